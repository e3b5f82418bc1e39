// AVX-512 activation quantizers, byte-identical to the scalar (ggml reference) ones: the same float
// operations in the same order, roundf emulated exactly (half away from zero), Q8_K's rounding to
// nearest even by the default MXCSR mode, F16 by vcvtps2ph, BF16 with integer rounding (no
// denormal flushing, unlike vcvtneps2bf16).
#include "devices/cpu/kernels/avx512_impl.h"

#include <cmath>

namespace cpu_kernels::avx512 {

using namespace gguf;

namespace {

__m512 abs_ps(__m512 v) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7fffffff))); }

// roundf: truncate, then step away from zero when the dropped fraction is at least one half (v − trunc(v)
// is exact in float).
__m512i round_half_away(__m512 v) {
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __mmask16 up = _mm512_cmp_ps_mask(abs_ps(_mm512_sub_ps(v, t)), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
    return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, one));
}

// One 32-element block of Q8_0 (or Q8_1: s = fp16(d·Σq)).
void quantize_q8_block(const float* x, uint8_t* out, bool q8_1) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(abs_ps(v0), abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512i q0 = round_half_away(_mm512_mul_ps(v0, _mm512_set1_ps(id)));
    const __m512i q1 = round_half_away(_mm512_mul_ps(v1, _mm512_set1_ps(id)));
    const uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    std::memcpy(out, &dh, 2);
    uint8_t* qs = out + (q8_1 ? 4 : 2);
    _mm_storeu_si128((__m128i*)qs, _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128((__m128i*)(qs + 16), _mm512_cvtepi32_epi8(q1));
    if (q8_1) {
        const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        const uint16_t sh = _cvtss_sh(static_cast<float>(sum) * d, _MM_FROUND_TO_NEAREST_INT);
        std::memcpy(out + 2, &sh, 2);
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
                for (int64_t b = 0; b < n_cols / 32; b++) quantize_q8_block(xr + 32 * b, o + b * (q8_1 ? 36 : 34), q8_1);
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
