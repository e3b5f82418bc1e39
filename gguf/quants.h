// Reference quantizers, bit-exact with ggml's quantize_row_*_ref: the activation formats the CPU
// kernels feed their dot products with (q8_0, q8_1, q8_K) and the simple weight formats.
// Dequantization of every type: gguf::type_traits(t).dequantize. Layouts: gguf/blocks.h.
#pragma once

#include "gguf/blocks.h"

#include <cstdint>

namespace gguf {

// `n` is the number of floats in `x`, a multiple of the block size.
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n);  // d = amax/127, q = roundf(x/d)
void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n);  // as q8_0, plus s = fp16(d * sum(q))
void quantize_row_q8_K(const float* x, block_q8_K* y, int64_t n);  // d = -max/127 (signed), q rounded
                                                                   // half to even, bsums = sums of 16 q
void quantize_row_q4_0(const float* x, block_q4_0* y, int64_t n);  // d = max/-8 (signed max)
void quantize_row_q4_1(const float* x, block_q4_1* y, int64_t n);  // d = (max-min)/15, m = min
void quantize_row_q5_0(const float* x, block_q5_0* y, int64_t n);  // d = max/-16 (signed max)
void quantize_row_q5_1(const float* x, block_q5_1* y, int64_t n);  // d = (max-min)/31, m = min

}  // namespace gguf
