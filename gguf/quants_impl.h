// Reference dequantizers, one per type, with the type table's untyped signature (n = element
// count, a multiple of the block size). Bit-exact with ggml's to_float. Used by gguf/types.cpp.
#pragma once

#include <cstdint>

namespace gguf::ref {

// gguf/quants.cpp: plain floats, the 32-element legacy formats, FP4 and the 1/2-bit formats.
void dequantize_f32(const void* x, float* y, int64_t n);
void dequantize_f16(const void* x, float* y, int64_t n);
void dequantize_bf16(const void* x, float* y, int64_t n);
void dequantize_q4_0(const void* x, float* y, int64_t n);
void dequantize_q4_1(const void* x, float* y, int64_t n);
void dequantize_q5_0(const void* x, float* y, int64_t n);
void dequantize_q5_1(const void* x, float* y, int64_t n);
void dequantize_q8_0(const void* x, float* y, int64_t n);
void dequantize_q8_1(const void* x, float* y, int64_t n);  // not in ggml: fp16(d) * qs
void dequantize_mxfp4(const void* x, float* y, int64_t n);
void dequantize_nvfp4(const void* x, float* y, int64_t n);
void dequantize_q1_0(const void* x, float* y, int64_t n);
void dequantize_q2_0(const void* x, float* y, int64_t n);

void quantize_f32(const float* x, void* y, int64_t n);
void quantize_f16(const float* x, void* y, int64_t n);
void quantize_bf16(const float* x, void* y, int64_t n);

// gguf/quants_k.cpp: the 256-element K super-blocks and the ternary formats.
void dequantize_q2_K(const void* x, float* y, int64_t n);
void dequantize_q3_K(const void* x, float* y, int64_t n);
void dequantize_q4_K(const void* x, float* y, int64_t n);
void dequantize_q5_K(const void* x, float* y, int64_t n);
void dequantize_q6_K(const void* x, float* y, int64_t n);
void dequantize_q8_K(const void* x, float* y, int64_t n);
void dequantize_tq1_0(const void* x, float* y, int64_t n);
void dequantize_tq2_0(const void* x, float* y, int64_t n);

// gguf/quants_iq.cpp: the lattice (IQ) formats.
void dequantize_iq2_xxs(const void* x, float* y, int64_t n);
void dequantize_iq2_xs(const void* x, float* y, int64_t n);
void dequantize_iq2_s(const void* x, float* y, int64_t n);
void dequantize_iq3_xxs(const void* x, float* y, int64_t n);
void dequantize_iq3_s(const void* x, float* y, int64_t n);
void dequantize_iq1_s(const void* x, float* y, int64_t n);
void dequantize_iq1_m(const void* x, float* y, int64_t n);
void dequantize_iq4_nl(const void* x, float* y, int64_t n);
void dequantize_iq4_xs(const void* x, float* y, int64_t n);

}  // namespace gguf::ref
