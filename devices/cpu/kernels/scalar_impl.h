// Internals of the scalar variant, shared by its files. The scalar kernels are the plainest
// statement of each computation; the other variants fall back to them for odd remainders.
#pragma once

#include "devices/cpu/kernels/kernels_impl.h"

namespace cpu_kernels::scalar {

void quantize_rows(gguf::Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out,
                   int64_t row_begin, int64_t row_end);
void swiglu(const float* gate, const float* up, int64_t n, float* out);
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);

// One Q8 activation row split per group of `group` elements: the quants, d_x, Σq and d_x·Σq
// (for Q8_1 its stored fp16 s, as ggml uses it).
struct ActRow {
    int8_t* q;     // n_cols
    float* d;      // n_cols / group
    int32_t* sum;  // n_cols / group
    float* s;      // n_cols / group
};
void split_activation(gguf::Type act, const void* row, int64_t n_cols, int group, const ActRow& out);

void matmul(const Matmul& m, int64_t row_begin, int64_t row_end);
void attention(const Attention& a, int64_t pair_begin, int64_t pair_end);

}  // namespace cpu_kernels::scalar
