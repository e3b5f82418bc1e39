// Multi-head latent attention's op builders: a per-head linear over 3-D weights (one matrix per head,
// MLA's attn_k_b / attn_v_b) and causal attention over a latent cache whose keys carry the values in
// their first features (the attention op with a strided V).
#include "engine/op_call_impl.h"

namespace engine {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

}  // namespace

Tensor linear_heads(const Tensor& x, const Tensor& w) {
    if (x.ndim() != 3 || w.ndim() != 3) fail("linear_heads", "expects x (T, H, K) and w (H, N, K)");
    if (!w.dim(0).is_const() || !w.dim(1).is_const() || !w.dim(2).is_const() || !same(x.dim(1), w.dim(0)) || !same(x.dim(2), w.dim(2)))
        fail("linear_heads", "input " + shape_str(x.shape()) + " does not match weight " + shape_str(w.shape()));
    int64_t H = w.dim(0).value(), N = w.dim(1).value(), K = w.dim(2).value();
    DType dt = w.dtype();
    if (!dt.weight_type()) fail("linear_heads", "unsupported weight dtype " + dt.name());
    const gguf::Type type = *dt.weight_type();
    if (dt.is_quantized() && !gguf::type_traits(type).dequantize) fail("linear_heads", "no dequantizer for " + dt.name());
    if (!gguf::row_bytes(type, K)) fail("linear_heads", "rows of " + std::to_string(K) + " do not fit " + dt.name() + " blocks");
    Dim T = x.dim(0);
    Tensor xh = x.cast(f32).permute({1, 0, 2});  // (H, T, K): each head's tokens contiguous
    const gguf::Type act = devices::get(x.device()).activation_type(type);
    if (act != gguf::Type::F32) xh = quantize_activations(xh.reshape({T * H, K}), act);  // as linear() packs them
    using A = devices::ops::Linear;
    OpCall<A> call(type);
    call.args().type = type;
    call.args().act = act;
    call.in(&A::x, xh).in(&A::w, w).dim(&A::H, H).dim(&A::T, T).dim(&A::N, N).dim(&A::K, K);
    return call.out(&A::y, {H, T, N}, f32).permute({1, 0, 2});  // (T, H, N)
}

Tensor attention_latent(const Tensor& q, const Tensor& cache, int value_dim, const Dim& start_pos, double scale) {
    if (q.ndim() != 3 || cache.ndim() != 3) fail("attention_latent", "expects q (T, H, Dk) and cache (C, Hkv, Dk)");
    Dim T = q.dim(0), H = q.dim(1), Dk = q.dim(2), Hkv = cache.dim(1);
    if (!same(cache.dim(2), Dk)) fail("attention_latent", "cache " + shape_str(cache.shape()) + " does not match q " + shape_str(q.shape()));
    if (!H.is_const() || !Hkv.is_const() || H.value() % Hkv.value()) fail("attention_latent", "n_head must be a multiple of n_head_kv");
    if (value_dim <= 0 || value_dim > Dk.max()) fail("attention_latent", "value_dim " + std::to_string(value_dim) + " outside the key size " + Dk.str());
    if (cache.dtype() != f32 && cache.dtype() != f16) fail("attention_latent", "the cache must be f32 or f16");
    // Attention whose values are the first value_dim features of each key row: V is K with K's strides.
    using A = devices::ops::Attention;
    const gguf::Type kv_type = cache.dtype() == f16 ? gguf::Type::F16 : gguf::Type::F32;
    OpCall<A> call(kv_type);
    call.args().kv_type = kv_type;
    call.args().scale = float(scale);
    call.in(&A::q, q.cast(f32)).in(&A::k, cache).in(&A::v, cache);
    call.dim(&A::T, T).dim(&A::H, H).dim(&A::Hkv, Hkv).dim(&A::Dk, Dk).dim(&A::Dv, value_dim).dim(&A::start_pos, start_pos).dim(&A::C, cache.dim(0));
    call.dim(&A::v_pos_stride, Hkv * Dk).dim(&A::v_head_stride, Dk);
    return call.out(&A::out, {T, H, value_dim}, f32);
}

Tensor paged_attention_latent(const Tensor& q, const Tensor& pool, int value_dim, const Tensor& pos, const Tensor& seq,
                              const Tensor& block_table, int block_size, double scale) {
    if (q.ndim() != 3 || pool.ndim() != 3 || !same(pool.dim(2), q.dim(2)))
        fail("paged_attention_latent", "expects q (T, H, Dk) and a pool (n_rows, Hkv, Dk), got " + shape_str(q.shape()) + ", " + shape_str(pool.shape()));
    if (value_dim <= 0 || value_dim > q.dim(2).max()) fail("paged_attention_latent", "value_dim " + std::to_string(value_dim) + " outside the key size");
    // paged_attention over the pool as keys, with the values its rows' first value_dim features
    const Dim Dk = pool.dim(2), Hkv = pool.dim(1);
    return paged_attention(q, pool, pool.slice(2, 0, value_dim), pos, seq, block_table, block_size, scale, 0, {}, Hkv * Dk, Dk);
}

}  // namespace engine
