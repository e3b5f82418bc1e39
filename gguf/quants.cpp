// Reference (de)quantization per type, bit-exact with ggml's scalar to_float / quantize_row_*_ref.
// Layouts: gguf/blocks.h and ../shared/golden/quants/README.md.
#include "gguf/blocks.h"
#include "gguf/quants_impl.h"
#include "gguf/types.h"

#include <cmath>
#include <cstring>

namespace gguf::ref {

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

void dequantize_q8_0(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q8_0*>(x);
    for (int64_t i = 0; i < n / QK8_0; i++) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK8_0; j++) y[i * QK8_0 + j] = b[i].qs[j] * d;
    }
}

void quantize_q8_0(const float* x, void* y, int64_t n) {
    auto b = static_cast<block_q8_0*>(y);
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const float* xb = x + i * QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = std::fmax(amax, std::fabs(xb[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++) b[i].qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
    }
}

void dequantize_q4_0(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_q4_0*>(x);
    for (int64_t i = 0; i < n / QK4_0; i++) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[i * QK4_0 + j] = ((b[i].qs[j] & 0x0f) - 8) * d;
            y[i * QK4_0 + j + QK4_0 / 2] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

}  // namespace gguf::ref
