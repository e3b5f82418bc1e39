// Scalar activation quantizers: f32 rows → Q8_0, Q8_1, Q8_K, F16, BF16, F32. Each follows ggml's
// reference quantizer operation for operation, so the bytes are identical.
#include "devices/cpu/kernels/scalar_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cpu_kernels::scalar {

using namespace gguf;

namespace {

// ggml's nearest_int: round to nearest even through the float mantissa (valid for |v| < 2^22).
int nearest_int(float v) {
    float shifted = v + 12582912.0f;
    int32_t bits;
    std::memcpy(&bits, &shifted, 4);
    return (bits & 0x007fffff) - 0x00400000;
}

void quantize_q8_0(const float* x, block_q8_0* y, int64_t n_blocks) {
    for (int64_t i = 0; i < n_blocks; i++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        for (int j = 0; j < QK8_0; j++) y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
    }
}

void quantize_q8_1(const float* x, block_q8_1* y, int64_t n_blocks) {
    for (int64_t i = 0; i < n_blocks; i++, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = f32_to_f16(static_cast<float>(sum) * d);
    }
}

void quantize_q8_K(const float* x, block_q8_K* y, int64_t n_blocks) {
    for (int64_t i = 0; i < n_blocks; i++, x += QK_K) {
        float max = 0.0f, amax = 0.0f;  // max: the signed value of largest magnitude
        for (int j = 0; j < QK_K; j++) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) amax = ax, max = x[j];
        }
        if (amax == 0.0f) {  // ggml leaves bsums unwritten here; we write zeros
            std::memset(&y[i], 0, sizeof(block_q8_K));
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y[i].qs[16 * j + l];
            y[i].bsums[j] = static_cast<int16_t>(sum);
        }
        y[i].d = 1.0f / iscale;
    }
}

}  // namespace

void quantize_row(Type act, const float* x, int64_t n_cols, void* out) {
    switch (act) {
        case Type::Q8_0: quantize_q8_0(x, static_cast<block_q8_0*>(out), n_cols / QK8_0); break;
        case Type::Q8_1: quantize_q8_1(x, static_cast<block_q8_1*>(out), n_cols / QK8_1); break;
        case Type::Q8_K: quantize_q8_K(x, static_cast<block_q8_K*>(out), n_cols / QK_K); break;
        case Type::F16:
            for (int64_t i = 0; i < n_cols; i++) static_cast<uint16_t*>(out)[i] = f32_to_f16(x[i]);
            break;
        case Type::BF16:
            for (int64_t i = 0; i < n_cols; i++) static_cast<uint16_t*>(out)[i] = f32_to_bf16(x[i]);
            break;
        default: std::memcpy(out, x, sizeof(float) * n_cols); break;
    }
}

void quantize_rows(Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out, int64_t row_begin,
                   int64_t row_end) {
    const size_t row_bytes = *gguf::row_bytes(act, n_cols);
    for (int64_t r = row_begin; r < row_end; r++)
        quantize_row(act, x + r * x_stride, n_cols, static_cast<uint8_t*>(out) + r * row_bytes);
}

}  // namespace cpu_kernels::scalar
