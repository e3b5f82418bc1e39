// KV caches (DESIGN.md §8, "The KV cache"): their types, the store of new rows into a cache or a pool
// shared by a batch of sequences (paged KV, "Batches"), and attention through block tables. The store
// and the attention are hot ops (devices/ops.h).
#include "engine/ir_impl.h"
#include "engine/op_call_impl.h"
#include "engine/realize_impl.h"

#include <algorithm>

namespace engine {

namespace ops = devices::ops;

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

Tensor i32_vector(const Tensor& t, const Dim& T, const char* op, const char* what) {
    if (t.ndim() != 1 || !t.dtype().is_int() || !same(t.dim(0), T))
        fail(op, std::string(what) + " must be (T) integers, T = " + T.str() + ", got " + shape_str(t.shape()));
    return t.cast(i32);
}

}  // namespace

gguf::Type kv_cache_type(DType dtype, int64_t head_dim, const std::string& device_name, const char* op) {
    devices::Device& device = devices::get(device_name.empty() ? default_device() : device_name);
    const std::vector<gguf::Type> types = device.kv_cache_types();
    const std::optional<gguf::Type> type = dtype.weight_type();
    if (!type || std::find(types.begin(), types.end(), *type) == types.end()) {
        std::string names;
        for (gguf::Type t : types) names += std::string(names.empty() ? "" : ", ") + std::string(gguf::type_name(t));
        fail(op, device.name() + "'s attention reads " + names + " KV caches, not " + dtype.name());
    }
    const int64_t block = gguf::type_traits(*type).block_size;
    if (head_dim <= 0 || head_dim % block != 0)
        fail(op, dtype.name() + " KV caches need head dims that are multiples of its " + std::to_string(block) + "-value blocks, got " +
                     std::to_string(head_dim));
    return *type;
}

Tensor kv_store(const Tensor& cache, const Tensor& x, const Dim& start_pos) {
    const Dim T = x.dim(0);
    if (!cache.dtype().is_quantized()) {
        cache.slice(0, start_pos, T).assign(x);  // through a view: `cache` (a handle of the same buffer) reads the write
        return cache;
    }
    return kv_store(cache, x, Tensor::arange(T) + Tensor::from_dim(start_pos));
}

Tensor kv_store(const Tensor& pool, const Tensor& x, const Tensor& slots) {
    if (pool.ndim() != 3 || x.ndim() != 3 || !same(x.dim(1), pool.dim(1)) || !same(x.dim(2), pool.dim(2)))
        fail("kv_store", "expects pool (n_rows, Hkv, D) and x (T, Hkv, D), got " + shape_str(pool.shape()) + ", " + shape_str(x.shape()));
    if (!pool.is_realized()) fail("kv_store", "the pool must be a realized buffer");
    const gguf::Type type = kv_cache_type(pool.dtype(), pool.dim(2).max(), pool.device(), "kv_store");
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
    const bool latent = !(v_pos_stride.is_const() && v_pos_stride.value() == 0);
    if (!(k_pool.dtype() == v_pool.dtype())) fail("paged_attention", "the pools must have one dtype");
    if (latent && k_pool.dtype().is_quantized()) fail("paged_attention", "a latent pool (values inside the keys' rows) must be f32 or f16");
    const gguf::Type type = kv_cache_type(k_pool.dtype(), Dk.max(), k_pool.device(), "paged_attention");
    kv_cache_type(v_pool.dtype(), Dv.max(), v_pool.device(), "paged_attention");
    using A = ops::PagedAttention;
    OpCall<A> call(type);
    call.args().kv_type = type;
    call.args().window = window;
    call.args().scale = float(scale);
    call.args().BS = block_size;
    call.args().n_blocks = rows.value() / block_size;
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
