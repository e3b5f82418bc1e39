// Reference (de)quantization of the 256-element K super-blocks (q2_K … q8_K) and the ternary
// formats (tq1_0, tq2_0), bit-exact with ggml's dequantize_row_* and quantize_row_q8_K_ref.
// Layouts: gguf/blocks.h and ../shared/golden/quants/README.md.
#include "gguf/quants.h"

#include "gguf/quants_impl.h"
#include "gguf/types.h"

#include <cmath>
#include <cstring>

namespace gguf {

namespace {

// Round to nearest, ties to even, for |v| < 2^22: adding 1.5·2^23 leaves the integer in the mantissa.
// (ggml's nearest_int; q8_K's rounding differs from q8_0's roundf in exactly the ties.)
int nearest_int(float v) {
    float biased = v + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &biased, 4);
    return (bits & 0x007fffff) - 0x00400000;
}

// q4_K / q5_K: 8 six-bit scales and 8 six-bit mins packed into 12 bytes.
void scale_min_k4(int j, const uint8_t* s, int& scale, int& min) {
    if (j < 4) {
        scale = s[j] & 63;
        min = s[j + 4] & 63;
    } else {
        scale = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
        min = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

// q3_K: 16 six-bit scales; low 4 bits in bytes 0..7 (low nibble for i < 8), high 2 bits in 8..11.
int scale_q3_K(int i, const uint8_t* s) {
    int low = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
    int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    return (low | high << 4) - 32;
}

}  // namespace

void quantize_row_q8_K(const float* x, block_q8_K* y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            if (std::fabs(x[j]) > amax) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y[i], 0, sizeof y[i]);  // ggml leaves bsums unwritten; zero is their value
            continue;
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = nearest_int(iscale * x[j]);
            y[i].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y[i].qs[16 * g + j];
            y[i].bsums[g] = static_cast<int16_t>(sum);
        }
        y[i].d = 1.0f / iscale;
    }
}

namespace ref {

// Each 128-element half uses 32 bytes of qs four times (2-bit shifts 0, 2, 4, 6); each of those
// passes covers two 16-element groups (qs bytes 0..15 and 16..31) with their own scale.
void dequantize_q2_K(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q2_K*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
        const uint8_t* sc = b[i].scales;
        for (int half = 0; half < 2; half++) {
            const uint8_t* q = b[i].qs + 32 * half;
            for (int shift = 0; shift < 8; shift += 2) {
                for (int k = 0; k < 2; k++, sc++) {
                    float dl = d * (*sc & 15), ml = dmin * (*sc >> 4);
                    for (int l = 0; l < 16; l++) *y++ = dl * ((q[16 * k + l] >> shift) & 3) - ml;
                }
            }
        }
    }
}

void dequantize_q3_K(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q3_K*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        int is = 0;
        for (int half = 0; half < 2; half++) {
            const uint8_t* q = b[i].qs + 32 * half;
            for (int shift = 0; shift < 8; shift += 2) {
                uint8_t hbit = static_cast<uint8_t>(1 << (4 * half + shift / 2));  // set: no -4
                for (int k = 0; k < 2; k++) {
                    float dl = d * scale_q3_K(is++, b[i].scales);
                    for (int l = 0; l < 16; l++) {
                        int v = ((q[16 * k + l] >> shift) & 3) - ((b[i].hmask[16 * k + l] & hbit) ? 0 : 4);
                        *y++ = dl * v;
                    }
                }
            }
        }
    }
}

// q4_K / q5_K: each 64-element chunk c reads qs[32c..32c+32): low nibbles are sub-block 2c,
// high nibbles 2c+1. q5_K's fifth bit for sub-block s is bit s of qh[l].
void dequantize_q4_K(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q4_K*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
        for (int c = 0; c < QK_K / 64; c++) {
            const uint8_t* q = b[i].qs + 32 * c;
            for (int nib = 0; nib < 2; nib++) {
                int sc, m;
                scale_min_k4(2 * c + nib, b[i].scales, sc, m);
                float dl = d * sc, ml = dmin * m;
                for (int l = 0; l < 32; l++) *y++ = dl * ((q[l] >> (4 * nib)) & 15) - ml;
            }
        }
    }
}

void dequantize_q5_K(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q5_K*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
        for (int c = 0; c < QK_K / 64; c++) {
            const uint8_t* q = b[i].qs + 32 * c;
            for (int nib = 0; nib < 2; nib++) {
                int s = 2 * c + nib, sc, m;
                scale_min_k4(s, b[i].scales, sc, m);
                float dl = d * sc, ml = dmin * m;
                for (int l = 0; l < 32; l++) {
                    int v = ((q[l] >> (4 * nib)) & 15) + ((b[i].qh[l] >> s & 1) ? 16 : 0);
                    *y++ = dl * v - ml;
                }
            }
        }
    }
}

// q6_K: per 128-element half, ql[0..64) gives low nibbles (elements l, l+32) and high nibbles
// (l+64, l+96); qh[0..32) gives the 2 high bits of those four at shifts 0, 2, 4, 6.
void dequantize_q6_K(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q6_K*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        for (int half = 0; half < 2; half++, y += 128) {
            const uint8_t* ql = b[i].ql + 64 * half;
            const uint8_t* qh = b[i].qh + 32 * half;
            const int8_t* sc = b[i].scales + 8 * half;
            for (int l = 0; l < 32; l++) {
                int q[4] = {
                    ((ql[l] & 15) | ((qh[l] >> 0) & 3) << 4) - 32,
                    ((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4) - 32,
                    ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32,
                    ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32,
                };
                for (int k = 0; k < 4; k++) y[l + 32 * k] = d * sc[l / 16 + 2 * k] * q[k];
            }
        }
    }
}

void dequantize_q8_K(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q8_K*>(x);
    for (int64_t i = 0; i < n / QK_K; i++)
        for (int j = 0; j < QK_K; j++) *y++ = b[i].d * b[i].qs[j];
}

// tq1_0: five base-3 digits per byte, stored as ceil(v * 256 / 243); digit k is recovered by
// multiplying by 3^k (mod 256) and taking the top "trit" (x * 3 >> 8).
void dequantize_tq1_0(const void* x, float* y, int64_t n) {
    static constexpr uint8_t pow3[5] = {1, 3, 9, 27, 81};
    auto trit = [](uint8_t byte, int k) { return ((static_cast<uint8_t>(byte * pow3[k]) * 3) >> 8) - 1; };
    auto b = static_cast<const block_tq1_0*>(x);
    constexpr int n_qs = sizeof(block_tq1_0::qs), n_qs32 = n_qs - n_qs % 32;
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < n_qs32; j += 32)
            for (int k = 0; k < 5; k++)
                for (int m = 0; m < 32; m++) *y++ = static_cast<float>(trit(b[i].qs[j + m], k)) * d;
        for (int j = n_qs32; j < n_qs; j += 16)
            for (int k = 0; k < 5; k++)
                for (int m = 0; m < 16; m++) *y++ = static_cast<float>(trit(b[i].qs[j + m], k)) * d;
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < static_cast<int>(sizeof(block_tq1_0::qh)); j++)
                *y++ = static_cast<float>(trit(b[i].qh[j], k)) * d;
    }
}

void dequantize_tq2_0(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_tq2_0*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < static_cast<int>(sizeof(block_tq2_0::qs)); j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++) *y++ = static_cast<float>(((b[i].qs[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}

}  // namespace ref

}  // namespace gguf
