// Custom kernels for multi-head latent attention: a per-head linear over 3-D weights (one matrix per
// head, MLA's attn_k_b / attn_v_b) and causal attention over a latent cache whose keys carry the values
// in their first features. Reference CPU versions for any type; the hand kernels where they are built.
#include "engine/ref_kernels_impl.h"

#ifdef TINYLLM_HAND_KERNELS  // set by engine/CMakeLists.txt when devices/cpu/kernels exists
#include "devices/cpu/kernels/kernels.h"
#endif

#include <algorithm>
#include <cmath>
#include <vector>

namespace engine {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

using ref_kernels::dot;
using ref_kernels::type_of;

// ref_kernels::row_f32 with a growable buffer.
const float* row_f32(const void* base, gguf::Type type, int64_t r, int64_t k, std::vector<float>& buf) {
    buf.resize(size_t(k));
    return ref_kernels::row_f32(base, type, r, k, buf.data());
}

// scalar {T, H, N, K, weight type}; in {x (H, T, K) f32, w (H, N, K)}; out (H, T, N); items are the
// weight rows h * N + n.
[[maybe_unused]] void linear_heads_ref(const CustomArgs& a, int64_t begin, int64_t end) {
    int64_t T = a.scalar[0], N = a.scalar[2], K = a.scalar[3];
    auto x = static_cast<const float*>(a.in[0]);
    auto y = static_cast<float*>(a.out);
    thread_local std::vector<float> buf;
    for (int64_t row = begin; row < end; row++) {
        int64_t h = row / N, n = row % N;
        const float* w = row_f32(a.in[1], type_of(a.scalar[4]), row, K, buf);
        for (int64_t t = 0; t < T; t++) y[(h * T + t) * N + n] = dot(x + (h * T + t) * K, w, K);
    }
}

// A cache row as f32: f32 rows in place, f16 rows converted into `buf`.
const float* cache_row(const void* base, bool is_f16, int64_t index, int64_t d, std::vector<float>& buf) {
    if (!is_f16) return static_cast<const float*>(base) + index * d;
    return row_f32(base, gguf::Type::F16, index, d, buf);
}

// scalar {T, H, Hkv, Dk, Dv, start_pos, cache_is_f16, C}; fscalar {scale}; in {q (T, H, Dk) f32,
// cache (C, Hkv, Dk)}; out (T, H, Dv); items (t, h). Online softmax over the keys up to t's position.
[[maybe_unused]] void attention_latent_ref(const CustomArgs& a, int64_t begin, int64_t end) {
    int64_t H = a.scalar[1], Hkv = a.scalar[2], Dk = a.scalar[3], Dv = a.scalar[4], start = a.scalar[5];
    bool f16 = a.scalar[6] != 0;
    int64_t last_pos = a.scalar[7] - 1;  // never read past the cache, whatever start_pos says
    float scale = float(a.fscalar[0]);
    auto q = static_cast<const float*>(a.in[0]);
    auto out = static_cast<float*>(a.out);
    thread_local std::vector<float> acc, buf;
    acc.resize(size_t(Dv));
    for (int64_t item = begin; item < end; item++) {
        int64_t t = item / H, kvh = (item % H) / (H / Hkv);
        std::fill(acc.begin(), acc.end(), 0.0f);
        float m = -INFINITY, l = 0.0f;
        for (int64_t p = 0, n_keys = std::min(start + t, last_pos) + 1; p < n_keys; p++) {
            const float* kv = cache_row(a.in[1], f16, p * Hkv + kvh, Dk, buf);
            float s = scale * dot(q + item * Dk, kv, Dk);
            float m_new = std::max(m, s), corr = std::exp(m - m_new), w = std::exp(s - m_new);
            l = l * corr + w;
            for (int64_t i = 0; i < Dv; i++) acc[size_t(i)] = acc[size_t(i)] * corr + w * kv[i];
            m = m_new;
        }
        for (int64_t i = 0; i < Dv; i++) out[item * Dv + i] = acc[size_t(i)] / l;
    }
}

#ifdef TINYLLM_HAND_KERNELS
// linear_heads_ref's arguments with x packed in the weight type's activation format: one hand matmul
// per head over the part of [begin, end) that falls into it.
void linear_heads_hand(const CustomArgs& a, int64_t begin, int64_t end) {
    int64_t T = a.scalar[0], N = a.scalar[2], K = a.scalar[3];
    gguf::Type type = type_of(a.scalar[4]);
    int64_t x_row = ref_kernels::hand_activation_row_bytes(type, K), w_row = int64_t(*gguf::row_bytes(type, K));
    for (int64_t h = begin / N; h * N < end; h++) {
        ::cpu_kernels::Matmul m;
        m.type = type;
        m.w = static_cast<const uint8_t*>(a.in[1]) + h * N * w_row;
        m.n_rows = N, m.n_cols = K;
        m.x = static_cast<const uint8_t*>(a.in[0]) + h * T * x_row;
        m.n_tokens = T;
        m.y = static_cast<float*>(a.out) + h * T * N;
        m.y_stride = N;
        ::cpu_kernels::matmul(m, std::max(begin, h * N) - h * N, std::min(end, (h + 1) * N) - h * N);
    }
}

void attention_latent_hand(const CustomArgs& a, int64_t begin, int64_t end) {
    int64_t H = a.scalar[1], Hkv = a.scalar[2], Dk = a.scalar[3], Dv = a.scalar[4];
    ::cpu_kernels::Attention at;
    at.q = static_cast<const float*>(a.in[0]);
    at.q_token_stride = H * Dk, at.q_head_stride = Dk;
    at.kv_type = a.scalar[6] ? gguf::Type::F16 : gguf::Type::F32;
    at.k = at.v = a.in[1];  // the values are the first Dv features of each key row
    at.k_pos_stride = at.v_pos_stride = Hkv * Dk;
    at.k_head_stride = at.v_head_stride = Dk;
    at.out = static_cast<float*>(a.out);
    at.out_token_stride = H * Dv, at.out_head_stride = Dv;
    at.n_tokens = a.scalar[0];
    at.start_pos = std::min(a.scalar[5], a.scalar[7] - a.scalar[0]);  // never past the cache (C)
    at.n_head = H, at.n_head_kv = Hkv, at.head_dim_k = Dk, at.head_dim_v = Dv;
    at.scale = float(a.fscalar[0]);
    ::cpu_kernels::attention(at, begin, end);
}
const CustomKernel LINEAR_HEADS{"linear_heads", linear_heads_hand, ::cpu_kernels::kMatmulRowAlign};
const CustomKernel ATTENTION_LATENT{"attention_latent", attention_latent_hand, 1};
#else
const CustomKernel LINEAR_HEADS{"linear_heads", linear_heads_ref, 1};
const CustomKernel ATTENTION_LATENT{"attention_latent", attention_latent_ref, 1};
#endif

}  // namespace

Tensor linear_heads(const Tensor& x, const Tensor& w) {
    if (x.ndim() != 3 || w.ndim() != 3) fail("linear_heads", "expects x (T, H, K) and w (H, N, K)");
    if (!w.dim(0).is_const() || !w.dim(1).is_const() || !w.dim(2).is_const() || !same(x.dim(1), w.dim(0)) || !same(x.dim(2), w.dim(2)))
        fail("linear_heads", "input " + shape_str(x.shape()) + " does not match weight " + shape_str(w.shape()));
    int64_t H = w.dim(0).value(), N = w.dim(1).value(), K = w.dim(2).value();
    DType dt = w.dtype();
    gguf::Type type = dt.is_quantized() ? dt.block : dt == f16 ? gguf::Type::F16 : dt == bf16 ? gguf::Type::BF16 : gguf::Type::F32;
    if (!dt.is_quantized() && !dt.is_float()) fail("linear_heads", "unsupported weight dtype " + dt.name());
    if (dt.is_quantized() && !gguf::type_traits(type).dequantize) fail("linear_heads", "no dequantizer for " + dt.name());
    if (!gguf::row_bytes(type, K)) fail("linear_heads", "rows of " + std::to_string(K) + " do not fit " + dt.name() + " blocks");
    Dim T = x.dim(0);
    Tensor xh = x.cast(f32).permute({1, 0, 2});  // (H, T, K): each head's tokens contiguous
    if (ref_kernels::hand_kernels() && ref_kernels::hand_activation_type(type) != gguf::Type::F32) {
        CustomCall q;  // the activations in the weight type's partner format, as linear() packs them
        q.kernel = &ref_kernels::HAND_QUANTIZE;
        q.inputs = {xh.reshape({T * H, K})};
        q.out_shape = {T * H, ref_kernels::hand_activation_row_bytes(type, K)};
        q.out_dtype = u8;
        q.scalars = {K, int64_t(ref_kernels::hand_activation_type(type))};
        q.n_work = T * H;
        xh = custom(q);
    }
    CustomCall call;
    call.kernel = &LINEAR_HEADS;
    call.inputs = {xh, w};
    call.out_shape = {H, T, N};
    call.scalars = {T, H, N, K, int64_t(type)};
    call.n_work = H * N;
    return custom(call).permute({1, 0, 2});  // (T, H, N)
}

Tensor attention_latent(const Tensor& q, const Tensor& cache, int value_dim, const Dim& start_pos, double scale) {
    if (q.ndim() != 3 || cache.ndim() != 3) fail("attention_latent", "expects q (T, H, Dk) and cache (C, Hkv, Dk)");
    Dim T = q.dim(0), H = q.dim(1), Dk = q.dim(2), Hkv = cache.dim(1);
    if (!same(cache.dim(2), Dk)) fail("attention_latent", "cache " + shape_str(cache.shape()) + " does not match q " + shape_str(q.shape()));
    if (!H.is_const() || !Hkv.is_const() || H.value() % Hkv.value()) fail("attention_latent", "n_head must be a multiple of n_head_kv");
    if (value_dim <= 0 || value_dim > Dk.max()) fail("attention_latent", "value_dim " + std::to_string(value_dim) + " outside the key size " + Dk.str());
    if (cache.dtype() != f32 && cache.dtype() != f16) fail("attention_latent", "the cache must be f32 or f16");
    CustomCall call;
    call.kernel = &ATTENTION_LATENT;
    call.inputs = {q.cast(f32), cache};
    call.out_shape = {T, H, value_dim};
    call.scalars = {T, H, Hkv, Dk, value_dim, start_pos, int64_t(cache.dtype() == f16), cache.dim(0)};
    call.fscalars = {scale};
    call.n_work = T * H;
    return custom(call);
}

}  // namespace engine
