// Paged KV for batches of sequences (DESIGN.md §8, "Batches"): the store of new rows into a shared pool
// by slot, and attention through block tables. Both are hot ops (devices/ops.h).
#include "engine/ir_impl.h"
#include "engine/op_call_impl.h"
#include "engine/realize_impl.h"

namespace engine {

namespace ops = devices::ops;

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

gguf::Type pool_type(const Tensor& pool, const char* op) {
    if (pool.dtype().code == DType::F32) return gguf::Type::F32;
    if (pool.dtype().code == DType::F16) return gguf::Type::F16;
    fail(op, "pools must be f32 or f16, got " + pool.dtype().name());
}

Tensor i32_vector(const Tensor& t, const Dim& T, const char* op, const char* what) {
    if (t.ndim() != 1 || !t.dtype().is_int() || !same(t.dim(0), T))
        fail(op, std::string(what) + " must be (T) integers, T = " + T.str() + ", got " + shape_str(t.shape()));
    return t.cast(i32);
}

}  // namespace

Tensor kv_store(const Tensor& pool, const Tensor& x, const Tensor& slots) {
    if (pool.ndim() != 3 || x.ndim() != 3 || !same(x.dim(1), pool.dim(1)) || !same(x.dim(2), pool.dim(2)))
        fail("kv_store", "expects pool (n_rows, Hkv, D) and x (T, Hkv, D), got " + shape_str(pool.shape()) + ", " + shape_str(x.shape()));
    if (!pool.is_realized()) fail("kv_store", "the pool must be a realized buffer");
    const gguf::Type type = pool_type(pool, "kv_store");
    const Dim T = x.dim(0), row = x.dim(1) * x.dim(2);
    using A = ops::KvStore;
    OpCall<A> call(type);
    call.args().kv_type = type;
    call.in(&A::x, x.cast(f32).reshape({T, row})).in(&A::slot, i32_vector(slots, T, "kv_store", "slots")).in(&A::pool, pool);
    Tensor written = call.dim(&A::T, T).dim(&A::row, row).dim(&A::n_rows, pool.dim(0)).out(&A::out, {T}, i32);
    // The pool once the store ran: an AFTER node, as assign() makes, with the store as its write.
    const Node* buf = pool.node().get();
    if (buf->op == Op::AFTER) buf = buf->src(0);
    return make_tensor(make(Op::AFTER, buf->dtype, {NodeRef(buf), written.node()}), pool.device());
}

Tensor paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& pos, const Tensor& seq,
                       const Tensor& block_table, int block_size, double scale, int window, const Tensor& sinks,
                       const Dim& v_pos_stride, const Dim& v_head_stride) {
    if (q.ndim() != 3 || k_pool.ndim() != 3 || v_pool.ndim() != 3) fail("paged_attention", "expects q (T, H, Dk), pools (n_rows, Hkv, D)");
    const Dim T = q.dim(0), H = q.dim(1), Dk = q.dim(2), Hkv = k_pool.dim(1), Dv = v_pool.dim(2), rows = k_pool.dim(0);
    if (!same(k_pool.dim(2), Dk) || !same(v_pool.dim(1), Hkv) || !same(v_pool.dim(0), rows))
        fail("paged_attention", "pool shapes " + shape_str(k_pool.shape()) + ", " + shape_str(v_pool.shape()) + " do not match q " + shape_str(q.shape()));
    if (!H.is_const() || !Hkv.is_const() || H.value() % Hkv.value()) fail("paged_attention", "n_head must be a multiple of n_head_kv");
    if (block_size <= 0 || !rows.is_const() || rows.value() % block_size)
        fail("paged_attention", "pool rows " + rows.str() + " are not whole blocks of " + std::to_string(block_size));
    if (block_table.ndim() != 2 || !block_table.dtype().is_int()) fail("paged_attention", "block_table must be (S, MB) integers");
    if (window < 0) fail("paged_attention", "negative window");
    if (sinks.defined() && (sinks.ndim() != 1 || !same(sinks.dim(0), H)))
        fail("paged_attention", "sinks must be (n_head), got " + shape_str(sinks.shape()));
    const gguf::Type type = pool_type(k_pool, "paged_attention");
    if (pool_type(v_pool, "paged_attention") != type) fail("paged_attention", "the pools must have one dtype");
    using A = ops::PagedAttention;
    OpCall<A> call(type);
    call.args().kv_type = type;
    call.args().window = window;
    call.args().scale = float(scale);
    call.args().BS = block_size;
    call.args().n_blocks = rows.value() / block_size;
    const bool latent = !(v_pos_stride.is_const() && v_pos_stride.value() == 0);
    call.in(&A::q, q.cast(f32)).in(&A::k, k_pool).in(&A::v, latent ? k_pool : v_pool);  // latent: the values are in k's rows
    if (latent) call.dim(&A::v_pos_stride, v_pos_stride).dim(&A::v_head_stride, v_head_stride);
    call.in(&A::pos, i32_vector(pos, T, "paged_attention", "pos")).in(&A::seq, i32_vector(seq, T, "paged_attention", "seq"));
    call.in(&A::block_table, block_table.cast(i32));
    if (sinks.defined()) call.in(&A::sinks, sinks.cast(f32));
    call.dim(&A::T, T).dim(&A::H, H).dim(&A::Hkv, Hkv).dim(&A::Dk, Dk).dim(&A::Dv, Dv);
    call.dim(&A::S, block_table.dim(0)).dim(&A::MB, block_table.dim(1));
    return call.out(&A::out, {T, H, Dv}, f32);
}

}  // namespace engine
