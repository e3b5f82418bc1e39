// AVX-512 attention over a KV cache with an online softmax, 16 keys at a time: the query heads that
// share a KV head (grouped-query) are processed together so each key and value row is read from
// memory once; dot products run along the head dimension and 16 of them are reduced at once.
#include "devices/cpu/kernels/avx512_impl.h"

#include <cmath>

namespace cpu_kernels::avx512 {

using gguf::Type;

namespace {

constexpr int kMaxGroup = 8;  // query heads processed together

// e^x to about 1 ulp for x ≤ 0 (down to −∞, which gives 0): Cody-Waite reduction x = n·ln2 + r and a
// degree-7 polynomial (Cephes' expf coefficients) for e^r.
__m512 exp_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // e^-104 is below the smallest subnormal
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

// Lane i of the result is the sum of the 16 lanes of v[i].
__m512 sum16(__m512 v[16]) {
    __m512 a[8], b[4], c[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)  // per 128-bit lane: [v2i 0+2, v2i+1 0+2, v2i 1+3, v2i+1 1+3]
        a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {  // per 128-bit lane: the lane's sums of v4i .. v4i+3
        const __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
        b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88), _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
}

__mmask16 tail_mask(int64_t left) { return left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1); }

// Rows of the cache as f32: the row itself for F32, else converted into buf.
const float* cache_row(const Attention& a, const void* base, int64_t off, int64_t dim, float* buf) {
    if (a.kv_type == Type::F32) return static_cast<const float*>(base) + off;
    const uint16_t* h = static_cast<const uint16_t*>(base) + off;
    for (int64_t c = 0; c < dim; c += 16)
        _mm512_storeu_ps(buf + c, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(dim - c), h + c)));
    return buf;
}

// Query token t, heads h0 .. h0+n_q-1 (sharing one KV head). mem: scratch for 16 K rows, 16 V rows,
// n_q accumulators.
void attend(const Attention& a, int64_t t, int64_t h0, int n_q, float* mem) {
    const int64_t Dk = a.head_dim_k, Dv = a.head_dim_v, hk = h0 / (a.n_head / a.n_head_kv);
    const int64_t Dk16 = (Dk + 15) / 16 * 16, Dv16 = (Dv + 15) / 16 * 16;
    float* kbuf = mem;
    float* vbuf = kbuf + 16 * Dk16;
    float* acc = vbuf + 16 * Dv16;  // [n_q][Dv16]
    alignas(64) float p[16];
    const int64_t pos = a.start_pos + t;
    const int64_t first = a.window > 0 ? (pos - a.window + 1 > 0 ? pos - a.window + 1 : 0) : 0;
    float m[kMaxGroup], l[kMaxGroup];
    for (int i = 0; i < n_q; i++) m[i] = -INFINITY, l[i] = 0.0f;
    for (int64_t i = 0; i < n_q * Dv16; i++) acc[i] = 0.0f;

    for (int64_t j0 = first; j0 <= pos; j0 += 16) {
        const int nb = static_cast<int>(pos + 1 - j0 < 16 ? pos + 1 - j0 : 16);
        const float* krow[16];
        const float* vrow[16];
        for (int j = 0; j < nb; j++) {
            krow[j] = cache_row(a, a.k, (j0 + j) * a.k_pos_stride + hk * a.k_head_stride, Dk, kbuf + j * Dk16);
            vrow[j] = cache_row(a, a.v, (j0 + j) * a.v_pos_stride + hk * a.v_head_stride, Dv, vbuf + j * Dv16);
        }
        for (int i = 0; i < n_q; i++) {
            const float* q = a.q + t * a.q_token_stride + (h0 + i) * a.q_head_stride;
            __m512 dots[16];
            for (int j = 0; j < 16; j++) {
                __m512 s = _mm512_setzero_ps();
                if (j < nb)
                    for (int64_t c = 0; c < Dk; c += 16) {
                        const __mmask16 mask = tail_mask(Dk - c);
                        s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, q + c), _mm512_maskz_loadu_ps(mask, krow[j] + c), s);
                    }
                dots[j] = s;
            }
            const __mmask16 valid = tail_mask(nb);
            const __m512 logits = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid,
                                                     _mm512_mul_ps(sum16(dots), _mm512_set1_ps(a.scale)));
            const float new_max = std::fmax(m[i], _mm512_reduce_max_ps(logits));
            const __m512 pv = _mm512_maskz_mov_ps(valid, exp_ps(_mm512_sub_ps(logits, _mm512_set1_ps(new_max))));
            _mm512_store_ps(p, pv);
            const float correction = std::exp(m[i] - new_max);  // 0 on the first block (m = −∞)
            l[i] = l[i] * correction + _mm512_reduce_add_ps(pv);
            m[i] = new_max;
            float* o = acc + i * Dv16;
            for (int64_t c = 0; c < Dv; c += 16) {
                const __mmask16 mask = tail_mask(Dv - c);
                __m512 v = _mm512_mul_ps(_mm512_load_ps(o + c), _mm512_set1_ps(correction));
                for (int j = 0; j < nb; j++) v = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(mask, vrow[j] + c), v);
                _mm512_store_ps(o + c, v);
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
        for (int64_t c = 0; c < Dv; c += 16)
            _mm512_mask_storeu_ps(out + c, tail_mask(Dv - c), _mm512_mul_ps(_mm512_load_ps(acc + i * Dv16 + c), _mm512_set1_ps(scale)));
    }
}

}  // namespace

void attention(const Attention& a, int64_t pair_begin, int64_t pair_end) {
    const int64_t group = a.n_head / a.n_head_kv;
    const int64_t Dk16 = (a.head_dim_k + 15) / 16 * 16, Dv16 = (a.head_dim_v + 15) / 16 * 16;
    auto mem = static_cast<float*>(scratch(ScratchSlot::TILE, sizeof(float) * (16 * Dk16 + 16 * Dv16 + kMaxGroup * Dv16)));
    for (int64_t pair = pair_begin; pair < pair_end;) {
        const int64_t t = pair / a.n_head, h = pair % a.n_head;
        // the run of heads from h that share h's KV head, within the range
        const int64_t group_end = (h / group + 1) * group;
        int64_t n = (group_end < a.n_head ? group_end : a.n_head) - h;
        if (n > pair_end - pair) n = pair_end - pair;
        if (n > kMaxGroup) n = kMaxGroup;
        attend(a, t, h, static_cast<int>(n), mem);
        pair += n;
    }
}

}  // namespace cpu_kernels::avx512
