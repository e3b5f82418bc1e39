// Scalar activation quantizers: f32 rows → Q8_0, Q8_1, Q8_K, F16, BF16, F32, by the type table's
// reference quantizers (gguf/quants.cpp), so the bytes are ggml's.
#include "devices/cpu/kernels/scalar_impl.h"

#include <cmath>

namespace cpu_kernels::scalar {

using namespace gguf;

// gguf's reference quantizers (tested bit for bit against ggml's in tests/gguf/quants_test.cpp).
void quantize_rows(Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out, int64_t row_begin,
                   int64_t row_end) {
    const TypeTraits& traits = type_traits(act);
    const size_t row_bytes = *gguf::row_bytes(act, n_cols);
    for (int64_t r = row_begin; r < row_end; r++)
        traits.quantize(x + r * x_stride, static_cast<uint8_t*>(out) + r * row_bytes, n_cols);
}

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
    constexpr int kLanes = 16;
    float lanes[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= n; i += kLanes)
        for (int l = 0; l < kLanes; l++) lanes[l] += x[i + l] * x[i + l];
    for (; i < n; i++) lanes[i % kLanes] += x[i] * x[i];
    float sum = 0.0f;
    for (float l : lanes) sum += l;
    const float r = 1.0f / std::sqrt(sum * static_cast<float>(1.0 / static_cast<double>(n)) + eps);
    for (int64_t j = 0; j < n; j++) out[j] = x[j] * r * w[j];
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t i = 0; i < n; i++) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

}  // namespace cpu_kernels::scalar
