// TEMPORARY (work in progress): the AVX-512 float, quantizer and attention kernels and the whole AVX2
// variant forward to the scalar kernels until they are written.
#include "devices/cpu/kernels/avx512_impl.h"
#include "devices/cpu/kernels/scalar_impl.h"
namespace cpu_kernels::avx512 {
void matmul_float(const Matmul& m, int64_t r0, int64_t r1) { scalar::matmul(m, r0, r1); }
void quantize_rows(gguf::Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out, int64_t row_begin, int64_t row_end) { scalar::quantize_rows(act, x, x_stride, n_cols, out, row_begin, row_end); }
void attention(const Attention& a, int64_t pair_begin, int64_t pair_end) { scalar::attention(a, pair_begin, pair_end); }
}
namespace cpu_kernels::avx2 { const Kernels kernels = scalar::kernels; }
