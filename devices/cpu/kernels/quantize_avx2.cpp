// AVX2 activation quantizers, byte-identical to the scalar (ggml reference) ones: the same float
// operations in the same order, roundf emulated exactly (half away from zero), Q8_K's rounding to
// nearest even by the default MXCSR mode, F16 by vcvtps2ph, BF16 with integer rounding.
#include "devices/cpu/kernels/avx2_impl.h"

#include <cmath>

namespace cpu_kernels::avx2 {

using namespace gguf;

namespace {

__m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

int hsum_epi32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    return _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1)));
}

// roundf: truncate, then step away from zero when the dropped fraction is at least one half.
__m256i round_half_away(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 up = _mm256_cmp_ps(abs_ps(_mm256_sub_ps(v, t)), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    const __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(up, one)));
}

// 32 int32 (4 vectors, each in [-128, 127]) to 32 bytes in order.
__m256i pack_bytes(const __m256i q[4]) {
    const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void quantize_q8_block(const float* x, uint8_t* out, bool q8_1) {
    __m256 v[4];
    __m256 vmax = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) v[i] = _mm256_loadu_ps(x + 8 * i), vmax = _mm256_max_ps(vmax, abs_ps(v[i]));
    const float amax = hmax(vmax);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    __m256i q[4];
    for (int i = 0; i < 4; i++) q[i] = round_half_away(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
    const uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    std::memcpy(out, &dh, 2);
    _mm256_storeu_si256((__m256i*)(out + (q8_1 ? 4 : 2)), pack_bytes(q));
    if (q8_1) {
        const int sum = hsum_epi32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
        const uint16_t sh = _cvtss_sh(static_cast<float>(sum) * d, _MM_FROUND_TO_NEAREST_INT);
        std::memcpy(out + 2, &sh, 2);
    }
}

void quantize_q8_K_block(const float* x, block_q8_K* y) {
    __m256 vmax = _mm256_setzero_ps();
    for (int i = 0; i < 32; i++) vmax = _mm256_max_ps(vmax, abs_ps(_mm256_loadu_ps(x + 8 * i)));
    const float amax = hmax(vmax);
    if (amax == 0.0f) {
        std::memset(y, 0, sizeof(*y));
        return;
    }
    float max = 0.0f;  // the first value of largest magnitude, with its sign
    for (int i = 0; i < 32; i++) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + 8 * i)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
        if (hit) {
            max = x[8 * i + __builtin_ctz(hit)];
            break;
        }
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < 8; i++) {  // 32 values: two bsums
        __m256i q[4];
        for (int j = 0; j < 4; j++)
            q[j] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * i + 8 * j), _mm256_set1_ps(iscale))),
                                    _mm256_set1_epi32(127));
        _mm256_storeu_si256((__m256i*)(y->qs + 32 * i), pack_bytes(q));
        y->bsums[2 * i] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[0], q[1])));
        y->bsums[2 * i + 1] = static_cast<int16_t>(hsum_epi32(_mm256_add_epi32(q[2], q[3])));
    }
    y->d = 1.0f / iscale;
}

void quantize_half_row(Type act, const float* x, int64_t n, uint16_t* out) {
    int64_t c = 0;
    for (; c + 8 <= n; c += 8) {
        const __m256 v = _mm256_loadu_ps(x + c);
        __m128i h;
        if (act == Type::F16) {
            h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        } else {  // bf16: round to nearest even; NaN stays NaN (quiet)
            const __m256i u = _mm256_castps_si256(v);
            const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
            const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
            const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
            const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
            const __m256i sel = _mm256_blendv_epi8(r, quiet, nan);
            h = _mm_packus_epi32(_mm256_castsi256_si128(sel), _mm256_extracti128_si256(sel, 1));
        }
        _mm_storeu_si128((__m128i*)(out + c), h);
    }
    for (; c < n; c++) out[c] = act == Type::F16 ? gguf::f32_to_f16(x[c]) : gguf::f32_to_bf16(x[c]);
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

}  // namespace cpu_kernels::avx2

namespace cpu_kernels::avx2 {

// silu(g) · u = g · σ(g) · u, σ from e = e^−|g| (exp_ps's domain): 1 / (1 + e) for g ≥ 0, e / (1 + e) below.
void swiglu(const float* gate, const float* up, int64_t n, float* out) {
    const __m256 sign = _mm256_set1_ps(-0.0f), one = _mm256_set1_ps(1.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
        const __m256 e = exp_ps(_mm256_or_ps(g, sign));  // −|g|
        const __m256 inv = _mm256_div_ps(one, _mm256_add_ps(e, one));
        const __m256 s = _mm256_blendv_ps(inv, _mm256_mul_ps(e, inv), _mm256_cmp_ps(g, _mm256_setzero_ps(), _CMP_LT_OQ));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(g, s), u));
    }
    for (; i < n; i++) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        s0 = _mm256_fmadd_ps(a, a, s0), s1 = _mm256_fmadd_ps(b, b, s1);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(s0, s1));
    float sum = 0.0f;
    for (float l : lanes) sum += l;
    for (; i < n; i++) sum += x[i] * x[i];
    const float rs = 1.0f / std::sqrt(sum * static_cast<float>(1.0 / static_cast<double>(n)) + eps);
    const __m256 r = _mm256_set1_ps(rs);
    for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), r), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) out[i] = x[i] * rs * w[i];
}

}  // namespace cpu_kernels::avx2
