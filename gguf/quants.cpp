// Reference (de)quantization of the plain float types, the 32-element legacy formats (q4_0 … q8_1),
// FP4 (mxfp4, nvfp4) and q1_0/q2_0: bit-exact with ggml's scalar to_float and quantize_row_*_ref.
// Layouts: gguf/blocks.h and ../shared/golden/quants/README.md.
#include "gguf/quants.h"

#include "gguf/quant_tables.h"
#include "gguf/quants_impl.h"
#include "gguf/types.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

namespace gguf {

namespace {

// ggml writes `MIN(hi, (int8_t)(v))`: truncation toward zero, then a clamp. Clamping in float
// first gives the same result for every finite input and keeps NaN/inf inputs defined.
int trunc_clamped(float v, float hi) { return static_cast<int>(std::fmin(hi, std::fmax(0.0f, v))); }

// Largest magnitude with its sign (the first one wins ties), as ggml's q4_0/q5_0 scale it.
float signed_absmax(const float* x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

void min_max(const float* x, int n, float& min, float& max) {
    min = FLT_MAX;
    max = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
}

float absmax(const float* x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = std::fmax(amax, std::fabs(x[j]));
    return amax;
}

// The 5th bit of a q5 code j lives in bit j of qh (codes 0..15 low nibbles, 16..31 high nibbles).
uint32_t load_qh(const uint8_t qh[4]) {
    uint32_t v;
    std::memcpy(&v, qh, 4);
    return v;
}

// E8M0 exponent -> 2^(e-128): ggml's "half" convention, so the FP4 table can hold doubled values.
float e8m0_to_f32_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Unsigned E4M3 (bias 7, subnormal when the exponent is 0; 0x7f, the NaN pattern, reads as 0).
float ue4m3_to_f32(uint8_t x) {
    if (x == 0x7f) return 0.0f;
    int exp = (x >> 3) & 15, man = x & 7;
    return exp == 0 ? std::ldexp(static_cast<float>(man), -9) : std::ldexp(static_cast<float>(8 + man), exp - 10);
}

}  // namespace

// ---- quantizers (public, gguf/quants.h) ----

void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) {
    for (int64_t i = 0; i < n / QK8_0; i++, x += QK8_0) {
        float d = absmax(x, QK8_0) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
    }
}

void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n) {
    for (int64_t i = 0; i < n / QK8_1; i++, x += QK8_1) {
        float d = absmax(x, QK8_1) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = f32_to_f16(static_cast<float>(sum) * d);
    }
}

void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n) {
    for (int64_t i = 0; i < n / QK4_0; i++, x += QK4_0) {
        float d = signed_absmax(x, QK4_0) / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            int lo = trunc_clamped(x[j] * id + 8.5f, 15.0f);
            int hi = trunc_clamped(x[j + QK4_0 / 2] * id + 8.5f, 15.0f);
            y[i].qs[j] = static_cast<uint8_t>(lo | hi << 4);
        }
    }
}

void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n) {
    for (int64_t i = 0; i < n / QK4_1; i++, x += QK4_1) {
        float min, max;
        min_max(x, QK4_1, min, max);
        float d = (max - min) / 15.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        y[i].m = f32_to_f16(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            int lo = trunc_clamped((x[j] - min) * id + 0.5f, 15.0f);
            int hi = trunc_clamped((x[j + QK4_1 / 2] - min) * id + 0.5f, 15.0f);
            y[i].qs[j] = static_cast<uint8_t>(lo | hi << 4);
        }
    }
}

void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n) {
    for (int64_t i = 0; i < n / QK5_0; i++, x += QK5_0) {
        float d = signed_absmax(x, QK5_0) / -16.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int lo = trunc_clamped(x[j] * id + 16.5f, 31.0f);
            int hi = trunc_clamped(x[j + QK5_0 / 2] * id + 16.5f, 31.0f);
            y[i].qs[j] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
            qh |= static_cast<uint32_t>(lo >> 4) << j | static_cast<uint32_t>(hi >> 4) << (j + QK5_0 / 2);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

void quantize_row_q5_1(const float* x, block_q5_1* y, int64_t n) {
    for (int64_t i = 0; i < n / QK5_1; i++, x += QK5_1) {
        float min, max;
        min_max(x, QK5_1, min, max);
        float d = (max - min) / 31.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        y[i].m = f32_to_f16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            // ggml does not clamp here: (x - min) / d stays within [0, 31] up to rounding.
            int lo = trunc_clamped((x[j] - min) * id + 0.5f, 31.0f);
            int hi = trunc_clamped((x[j + QK5_1 / 2] - min) * id + 0.5f, 31.0f);
            y[i].qs[j] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
            qh |= static_cast<uint32_t>(lo >> 4) << j | static_cast<uint32_t>(hi >> 4) << (j + QK5_1 / 2);
        }
        std::memcpy(y[i].qh, &qh, 4);
    }
}

namespace ref {

// ---- plain floats ----

void dequantize_f32(const void* x, float* y, int64_t n) { std::memcpy(y, x, n * sizeof(float)); }
void quantize_f32(const float* x, void* y, int64_t n) { std::memcpy(y, x, n * sizeof(float)); }

void dequantize_f16(const void* x, float* y, int64_t n) {
    auto h = static_cast<const uint16_t*>(x);
    for (int64_t i = 0; i < n; i++) y[i] = f16_to_f32(h[i]);
}
void quantize_f16(const float* x, void* y, int64_t n) {
    auto h = static_cast<uint16_t*>(y);
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_f16(x[i]);
}

void dequantize_bf16(const void* x, float* y, int64_t n) {
    auto h = static_cast<const uint16_t*>(x);
    for (int64_t i = 0; i < n; i++) y[i] = bf16_to_f32(h[i]);
}
void quantize_bf16(const float* x, void* y, int64_t n) {
    auto h = static_cast<uint16_t*>(y);
    for (int64_t i = 0; i < n; i++) h[i] = f32_to_bf16(x[i]);
}

// ---- legacy 32-element blocks: low nibbles are elements 0..15, high nibbles 16..31 ----

void dequantize_q4_0(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q4_0*>(x);
    for (int64_t i = 0; i < n / QK4_0; i++, y += QK4_0) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = ((b[i].qs[j] & 15) - 8) * d;  // (q - 8) * d, not q*d - 8*d: keeps ggml's -0.0
            y[j + QK4_0 / 2] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_q4_1(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q4_1*>(x);
    for (int64_t i = 0; i < n / QK4_1; i++, y += QK4_1) {
        float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (b[i].qs[j] & 15) * d + m;
            y[j + QK4_1 / 2] = (b[i].qs[j] >> 4) * d + m;
        }
    }
}

void dequantize_q5_0(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q5_0*>(x);
    for (int64_t i = 0; i < n / QK5_0; i++, y += QK5_0) {
        float d = f16_to_f32(b[i].d);
        uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int lo = (b[i].qs[j] & 15) | ((qh >> j) & 1) << 4;
            int hi = (b[i].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
            y[j] = (lo - 16) * d;
            y[j + QK5_0 / 2] = (hi - 16) * d;
        }
    }
}

void dequantize_q5_1(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q5_1*>(x);
    for (int64_t i = 0; i < n / QK5_1; i++, y += QK5_1) {
        float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
        uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int lo = (b[i].qs[j] & 15) | ((qh >> j) & 1) << 4;
            int hi = (b[i].qs[j] >> 4) | ((qh >> (j + 16)) & 1) << 4;
            y[j] = lo * d + m;
            y[j + QK5_1 / 2] = hi * d + m;
        }
    }
}

void dequantize_q8_0(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q8_0*>(x);
    for (int64_t i = 0; i < n / QK8_0; i++, y += QK8_0) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++) y[j] = b[i].qs[j] * d;
    }
}

void dequantize_q8_1(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q8_1*>(x);
    for (int64_t i = 0; i < n / QK8_1; i++, y += QK8_1) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK8_1; j++) y[j] = b[i].qs[j] * d;
    }
}

// ---- FP4: E2M1 codes (table values doubled) times a power-of-two or UE4M3 scale ----

void dequantize_mxfp4(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_mxfp4*>(x);
    for (int64_t i = 0; i < n / QK_MXFP4; i++, y += QK_MXFP4) {
        float d = e8m0_to_f32_half(b[i].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[j] = tables::kvalues_fp4[b[i].qs[j] & 15] * d;
            y[j + QK_MXFP4 / 2] = tables::kvalues_fp4[b[i].qs[j] >> 4] * d;
        }
    }
}

void dequantize_nvfp4(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_nvfp4*>(x);
    for (int64_t i = 0; i < n / QK_NVFP4; i++) {
        for (int s = 0; s < QK_NVFP4 / 16; s++, y += 16) {
            float d = ue4m3_to_f32(b[i].d[s]) * 0.5f;
            const uint8_t* qs = b[i].qs + 8 * s;
            for (int j = 0; j < 8; j++) {
                y[j] = tables::kvalues_fp4[qs[j] & 15] * d;
                y[j + 8] = tables::kvalues_fp4[qs[j] >> 4] * d;
            }
        }
    }
}

// ---- 1- and 2-bit codes with one fp16 scale ----

void dequantize_q1_0(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q1_0*>(x);
    for (int64_t i = 0; i < n / QK1_0; i++, y += QK1_0) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK1_0; j++) y[j] = (b[i].qs[j / 8] >> (j % 8) & 1) ? d : -d;
    }
}

void dequantize_q2_0(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q2_0*>(x);
    for (int64_t i = 0; i < n / QK2_0; i++, y += QK2_0) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK2_0; j++) y[j] = ((b[i].qs[j / 4] >> 2 * (j % 4) & 3) - 1) * d;
    }
}

}  // namespace ref

}  // namespace gguf
