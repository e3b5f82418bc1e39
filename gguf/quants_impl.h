// Reference dequantizers and quantizers, one per type (gguf/quants.cpp). Used by the type table.
#pragma once

#include <cstdint>

namespace gguf::ref {

void dequantize_f32(const void* x, float* y, int64_t n);
void dequantize_f16(const void* x, float* y, int64_t n);
void dequantize_bf16(const void* x, float* y, int64_t n);
void dequantize_q8_0(const void* x, float* y, int64_t n);
void dequantize_q4_0(const void* x, float* y, int64_t n);

void quantize_f32(const float* x, void* y, int64_t n);
void quantize_f16(const float* x, void* y, int64_t n);
void quantize_bf16(const float* x, void* y, int64_t n);
void quantize_q8_0(const float* x, void* y, int64_t n);  // ggml's quantize_row_q8_0_ref (roundf)

}  // namespace gguf::ref
