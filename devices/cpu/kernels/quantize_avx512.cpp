// AVX-512 activation quantizers, byte-identical to the scalar (ggml reference) ones: the same float
// operations in the same order, roundf emulated exactly (half away from zero), Q8_K's rounding to
// nearest even by the default MXCSR mode, F16 by vcvtps2ph, BF16 with integer rounding (no
// denormal flushing, unlike vcvtneps2bf16).
#include "devices/cpu/kernels/avx512_impl.h"

#include <algorithm>
#include <cmath>

namespace cpu_kernels::avx512 {

using namespace gguf;

namespace {

__m512 abs_ps(__m512 v) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff))); }

// roundf (half away from zero) exactly: v + copysign(0.49999997, v), truncated. The largest float
// below one half never rounds a fraction below .5 up, and ties at .5 still reach the next integer
// (checked against roundf for every float of magnitude below 2^31).
__m512i round_half_away(__m512 v) {
    const __m512i below_half = _mm512_castps_si512(_mm512_set1_ps(0.49999997f));
    const __m512 h = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(_mm512_castps_si512(v), below_half, _mm512_set1_epi32(INT32_MIN), 0xE4));
    return _mm512_cvttps_epi32(_mm512_add_ps(v, h));
}

// Lane j of the result: the largest lane of m[j]. The 16 vectors are reduced side by side, each step
// halving the vectors and doubling the inputs a vector holds: step 1 leaves m[2i] in lanes 0-7 and
// m[2i + 1] in 8-15, step 2 one input per 128-bit quarter, steps 3 and 4 work within quarters and leave
// input 4j + k in lane 4k + j, which the last permutation transposes.
__m512 max_of_each(__m512 (&m)[16]) {
    for (int i = 0; i < 8; i++)
        m[i] = _mm512_max_ps(_mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0x44), _mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)
        m[i] = _mm512_max_ps(_mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0x88), _mm512_shuffle_f32x4(m[2 * i], m[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++)
        m[i] = _mm512_max_ps(_mm512_shuffle_ps(m[2 * i], m[2 * i + 1], 0x44), _mm512_shuffle_ps(m[2 * i], m[2 * i + 1], 0xEE));
    const __m512 r = _mm512_max_ps(_mm512_shuffle_ps(m[0], m[1], 0x88), _mm512_shuffle_ps(m[0], m[1], 0xDD));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

// Up to 16 consecutive 32-element blocks of Q8_0 (or Q8_1: s = fp16(d·Σq)): their maxima reduced side
// by side, d and 1/d of all of them by two vector divisions (the scalar code's operations, so the same
// bits).
void quantize_q8_blocks(const float* x, int n_blocks, uint8_t* out, bool q8_1) {
    const int block_bytes = q8_1 ? 36 : 34;
    __m512 m[16];
    for (int b = 0; b < 16; b++)
        m[b] = b < n_blocks ? _mm512_max_ps(abs_ps(_mm512_loadu_ps(x + 32 * b)), abs_ps(_mm512_loadu_ps(x + 32 * b + 16))) : _mm512_setzero_ps();
    const __m512 amax = max_of_each(m);
    const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(d, _mm512_setzero_ps(), _CMP_NEQ_UQ), _mm512_set1_ps(1.0f), d);
    alignas(64) float ds[16], ids[16];
    alignas(32) uint16_t dh[16];
    _mm512_store_ps(ds, d);
    _mm512_store_ps(ids, id);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dh), _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (int b = 0; b < n_blocks; b++) {
        uint8_t* o = out + b * block_bytes;
        const __m512 ib = _mm512_set1_ps(ids[b]);
        const __m512i q0 = round_half_away(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b), ib));
        const __m512i q1 = round_half_away(_mm512_mul_ps(_mm512_loadu_ps(x + 32 * b + 16), ib));
        std::memcpy(o, dh + b, 2);
        uint8_t* qs = o + (q8_1 ? 4 : 2);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(q1));
        if (q8_1) {
            const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
            const uint16_t sh = _cvtss_sh(static_cast<float>(sum) * ds[b], _MM_FROUND_TO_NEAREST_INT);
            std::memcpy(o + 2, &sh, 2);
        }
    }
}

void quantize_q8_K_block(const float* x, block_q8_K* y) {
    __m512 v[16];
    __m512 vmax = _mm512_setzero_ps();
    for (int i = 0; i < 16; i++) v[i] = _mm512_loadu_ps(x + 16 * i), vmax = _mm512_max_ps(vmax, abs_ps(v[i]));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (amax == 0.0f) {
        std::memset(y, 0, sizeof(*y));
        return;
    }
    float max = 0.0f;  // the first value of largest magnitude, with its sign
    for (int i = 0; i < 16; i++) {
        const __mmask16 hit = _mm512_cmp_ps_mask(abs_ps(v[i]), _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (hit) {
            max = x[16 * i + __builtin_ctz(hit)];
            break;
        }
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < 16; i++) {
        const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(v[i], _mm512_set1_ps(iscale))), _mm512_set1_epi32(127));
        _mm_storeu_si128((__m128i*)(y->qs + 16 * i), _mm512_cvtsepi32_epi8(q));
        y->bsums[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    y->d = 1.0f / iscale;
}

void quantize_half_row(Type act, const float* x, int64_t n, uint16_t* out) {
    for (int64_t c = 0; c < n; c += 16) {
        const __mmask16 mask = n - c >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - c)) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(mask, x + c);
        __m256i h;
        if (act == Type::F16) {
            h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        } else {  // bf16: round to nearest even; NaN stays NaN (quiet)
            const __m512i u = _mm512_castps_si512(v);
            const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
            __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
            const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                           _mm512_set1_epi32(0x7f800000));
            r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
            h = _mm512_cvtepi32_epi16(r);
        }
        _mm256_mask_storeu_epi16(out + c, mask, h);
    }
}

}  // namespace

void quantize_rows(Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out, int64_t row_begin,
                   int64_t row_end) {
    const size_t row_bytes = bytes_per_row(act, n_cols);
    for (int64_t r = row_begin; r < row_end; r++) {
        const float* xr = x + r * x_stride;
        uint8_t* o = static_cast<uint8_t*>(out) + r * row_bytes;
        switch (act) {
            case Type::Q8_0: case Type::Q8_1: {
                const bool q8_1 = act == Type::Q8_1;
                for (int64_t b = 0; b < n_cols / 32; b += 16)
                    quantize_q8_blocks(xr + 32 * b, static_cast<int>(std::min<int64_t>(16, n_cols / 32 - b)), o + b * (q8_1 ? 36 : 34), q8_1);
                break;
            }
            case Type::Q8_K:
                for (int64_t b = 0; b < n_cols / QK_K; b++) quantize_q8_K_block(xr + QK_K * b, reinterpret_cast<block_q8_K*>(o) + b);
                break;
            case Type::F16: case Type::BF16: quantize_half_row(act, xr, n_cols, reinterpret_cast<uint16_t*>(o)); break;
            default: std::memcpy(o, xr, sizeof(float) * n_cols); break;
        }
    }
}

}  // namespace cpu_kernels::avx512

namespace cpu_kernels::avx512 {

// silu(g) · u = g · σ(g) · u, σ from e = e^−|g| (exp_ps's domain): 1 / (1 + e) for g ≥ 0, e / (1 + e) below.
void swiglu(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)));
        const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
        const __m512 s = _mm512_mask_mul_ps(inv, _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ), e, inv);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(g, s), u));
    }
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        s0 = _mm512_fmadd_ps(a, a, s0), s1 = _mm512_fmadd_ps(b, b, s1);
    }
    for (; i < n; i += 16) {
        const __m512 a = _mm512_maskz_loadu_ps(n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1), x + i);
        s0 = _mm512_fmadd_ps(a, a, s0);
    }
    const float sum = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    const __m512 r = _mm512_set1_ps(1.0f / std::sqrt(sum * static_cast<float>(1.0 / static_cast<double>(n)) + eps));
    for (i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), r), _mm512_maskz_loadu_ps(m, w + i)));
    }
}

}  // namespace cpu_kernels::avx512
