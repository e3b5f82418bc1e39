// AVX2 attention over a KV cache with an online softmax, 8 keys at a time; the query heads sharing a
// KV head are processed together so each key and value row is read from memory once (see
// attention_avx512.cpp for the same algorithm 16 keys wide).
#include "devices/cpu/kernels/avx2_impl.h"

#include <cmath>

namespace cpu_kernels::avx2 {

using gguf::Type;

namespace {

constexpr int kMaxGroup = 8;

// e^x for x ≤ 0 (about 1 ulp; below −87 a value near 1e-38 instead of less: negligible in a sum that
// holds e^0 = 1): Cody-Waite reduction and Cephes' expf polynomial, 2^n built in the exponent bits.
__m256 exp_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n));
}

// Lane i of the result is the sum of the 8 lanes of v[i].
__m256 sum8(const __m256 v[8]) {
    const __m256 a0 = _mm256_hadd_ps(v[0], v[1]), a1 = _mm256_hadd_ps(v[2], v[3]);
    const __m256 a2 = _mm256_hadd_ps(v[4], v[5]), a3 = _mm256_hadd_ps(v[6], v[7]);
    const __m256 b0 = _mm256_hadd_ps(a0, a1), b1 = _mm256_hadd_ps(a2, a3);  // per 128-bit half: sums of v0..3 / v4..7
    return _mm256_add_ps(_mm256_permute2f128_ps(b0, b1, 0x20), _mm256_permute2f128_ps(b0, b1, 0x31));
}

float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

// Rows of the cache as f32 (zero-padded to a multiple of 8): the row itself for F32 when its
// length is a multiple of 8, else converted / copied into buf.
const float* cache_row(const Attention& a, const void* base, int64_t off, int64_t dim, float* buf) {
    if (a.kv_type == Type::F32 && dim % 8 == 0) return static_cast<const float*>(base) + off;
    for (int64_t c = 0; c < dim; c++)
        buf[c] = a.kv_type == Type::F32 ? static_cast<const float*>(base)[off + c]
                                        : half_to_float(static_cast<const uint16_t*>(base)[off + c]);
    for (int64_t c = dim; c % 8; c++) buf[c] = 0.0f;
    return buf;
}

void attend(const Attention& a, int64_t t, int64_t h0, int n_q, float* mem) {
    const int64_t Dk = a.head_dim_k, Dv = a.head_dim_v, hk = h0 / (a.n_head / a.n_head_kv);
    const int64_t Dk8 = (Dk + 7) / 8 * 8, Dv8 = (Dv + 7) / 8 * 8;
    // regions kSkew floats apart beyond their size: equal offsets modulo 4 KiB would make loads wait
    // on unrelated stores (4K aliasing)
    constexpr int64_t kSkew = 5 * 16;
    float* kbuf = mem;
    float* vbuf = kbuf + 8 * Dk8 + kSkew;
    float* qbuf = vbuf + 8 * Dv8 + kSkew;  // the query, zero-padded
    float* acc = qbuf + Dk8 + kSkew;       // [n_q][Dv8]
    alignas(32) float p[8];
    const int64_t pos = a.start_pos + t;
    const int64_t first = a.window > 0 ? (pos - a.window + 1 > 0 ? pos - a.window + 1 : 0) : 0;
    float m[kMaxGroup], l[kMaxGroup];
    for (int i = 0; i < n_q; i++) m[i] = -INFINITY, l[i] = 0.0f;
    for (int64_t i = 0; i < n_q * Dv8; i++) acc[i] = 0.0f;

    for (int64_t j0 = first; j0 <= pos; j0 += 8) {
        const int nb = static_cast<int>(pos + 1 - j0 < 8 ? pos + 1 - j0 : 8);
        const float* krow[8];
        const float* vrow[8];
        for (int j = 0; j < nb; j++) {
            krow[j] = cache_row(a, a.k, (j0 + j) * a.k_pos_stride + hk * a.k_head_stride, Dk, kbuf + j * Dk8);
            vrow[j] = cache_row(a, a.v, (j0 + j) * a.v_pos_stride + hk * a.v_head_stride, Dv, vbuf + j * Dv8);
        }
        for (int i = 0; i < n_q; i++) {
            const float* qh = a.q + t * a.q_token_stride + (h0 + i) * a.q_head_stride;
            for (int64_t c = 0; c < Dk8; c++) qbuf[c] = c < Dk ? qh[c] : 0.0f;
            __m256 dots[8];
            for (int j = 0; j < 8; j++) {
                __m256 s = _mm256_setzero_ps();
                if (j < nb)
                    for (int64_t c = 0; c < Dk8; c += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(qbuf + c), _mm256_loadu_ps(krow[j] + c), s);
                dots[j] = s;
            }
            const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nb), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
            const __m256 logits = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_mul_ps(sum8(dots), _mm256_set1_ps(a.scale)), valid);
            const float block_max = hmax(logits), new_max = m[i] > block_max ? m[i] : block_max;
            const __m256 pv = _mm256_and_ps(valid, exp_ps(_mm256_sub_ps(logits, _mm256_set1_ps(new_max))));
            _mm256_store_ps(p, pv);
            const float correction = std::exp(m[i] - new_max);  // 0 on the first block (m = −∞)
            l[i] = l[i] * correction + hsum(pv);
            m[i] = new_max;
            float* o = acc + i * Dv8;
            for (int64_t c = 0; c < Dv8; c += 8) {
                __m256 v = _mm256_mul_ps(_mm256_loadu_ps(o + c), _mm256_set1_ps(correction));
                for (int j = 0; j < nb; j++) v = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(vrow[j] + c), v);
                _mm256_storeu_ps(o + c, v);
            }
        }
    }
    for (int i = 0; i < n_q; i++) {
        float scale = 1.0f / l[i];
        if (a.sinks) {  // the sink joins the denominator, carrying no value
            const float sink = a.sinks[h0 + i], new_max = std::fmax(m[i], sink);
            const float correction = std::exp(m[i] - new_max);
            scale = correction / (l[i] * correction + std::exp(sink - new_max));
        }
        float* out = a.out + t * a.out_token_stride + (h0 + i) * a.out_head_stride;
        for (int64_t c = 0; c < Dv; c++) out[c] = acc[i * Dv8 + c] * scale;
    }
}

}  // namespace

void attention(const Attention& a, int64_t pair_begin, int64_t pair_end) {
    const int64_t group = a.n_head / a.n_head_kv;
    const int64_t Dk8 = (a.head_dim_k + 7) / 8 * 8, Dv8 = (a.head_dim_v + 7) / 8 * 8;
    auto mem = static_cast<float*>(scratch(ScratchSlot::TILE, sizeof(float) * (8 * Dk8 + 8 * Dv8 + Dk8 + kMaxGroup * Dv8 + 3 * 80)));
    for (int64_t pair = pair_begin; pair < pair_end;) {
        const int64_t t = pair / a.n_head, h = pair % a.n_head;
        const int64_t group_end = (h / group + 1) * group;
        int64_t n = (group_end < a.n_head ? group_end : a.n_head) - h;
        if (n > pair_end - pair) n = pair_end - pair;
        if (n > kMaxGroup) n = kMaxGroup;
        attend(a, t, h, static_cast<int>(n), mem);
        pair += n;
    }
}

}  // namespace cpu_kernels::avx2
