// Internals of the mixture-of-experts products (engine/experts.cpp, engine/expert_kernels.cpp): the
// custom kernels and the activation format each weight type multiplies against.
#pragma once

#include "engine/tensor.h"

namespace engine::experts {

// Output rows per work item: the tile of an expert's weight rows streamed for all its tokens.
constexpr int64_t ROW_TILE = 16;

// The format activations are packed in before multiplying `weight` rows: the hand kernels' partner
// format (Q8_0 for Q8_0, F16 for F16, ...) when they are built, else F32; always Q8_0 for MXFP4
// (as ggml does: its own dot product below).
gguf::Type activation_type(gguf::Type weight);
// x (R, K) f32 -> (R, row bytes) u8 in `act` (x itself for F32).
Tensor pack_activations(const Tensor& x, gguf::Type act);

// ids (T*k) i32 -> plan (E + 1 + T*k) i32. scalar {T*k, E}. One work item.
void plan(const CustomArgs& a, int64_t begin, int64_t end);
extern const CustomKernel PLAN;
// {activations (T or T*k rows), weights (E, N, K), plan} -> (T, k, N) f32, over items tile * E + e.
// scalar {T, k, N, K, weight type, per_slot, activation type, E}.
extern const CustomKernel MATMUL;
// y[j * n + r] = MXFP4 weight row r (rows w_row bytes apart) . Q8_0 activation row x[j], for n rows and
// count rows of x of n_blocks blocks each (engine/expert_mxfp4.cpp).
void mxfp4_q8_0_tile(const uint8_t* w, int64_t w_row, int64_t n, const uint8_t* const* x, int64_t count, int64_t n_blocks, float* y);
// (R, K) f32 -> (R, row bytes) u8 with gguf's reference quantizer. scalar {K, activation type}.
extern const CustomKernel QUANTIZE;

}  // namespace engine::experts
