// The engine's own CPU custom kernels: correct for every GGUF type, simple, single-threaded over a
// range of work items (the runner splits the range across the pool). The hand-written kernels in
// devices/cpu/kernels replace them where they exist (see linear and attention in nn.cpp).
#pragma once

#include "engine/tensor.h"

namespace engine::ref_kernels {

// Helpers the engine's other reference kernels (MLA, experts) share.
float dot(const float* a, const float* b, int64_t n);  // vectorized per ISA
// Row r (k elements) of a matrix stored as `type`, as f32: f32 rows in place, others converted into
// `buf` (k floats) with the gguf reference dequantizers.
const float* row_f32(const void* base, gguf::Type type, int64_t r, int64_t k, float* buf);
inline gguf::Type type_of(int64_t id) { return static_cast<gguf::Type>(uint32_t(id)); }

// y (T, N) f32 = x (T, K) f32 . W (N, K)^T for any weight type, over output rows [begin, end).
// scalar: {T, N, K, gguf type id}. Quantized/half rows are dequantized one at a time.
extern const CustomKernel LINEAR_DEQUANT;
// out (n, D) f32 = table (V, D)[ids (n) i32] for any table type, over ids [begin, end).
// scalar: {V, D, gguf type id}. Out-of-range ids read row 0 or V-1 (clamped), like gather.
extern const CustomKernel GET_ROWS;
// out (R, K) f32 = dequantize(w (R, K)), over rows. scalar: {K, gguf type id}.
extern const CustomKernel DEQUANTIZE;
// Causal GQA attention over a KV cache with online softmax, over (t, h) items.
// q (T, H, Dk) f32, k (C, Hkv, Dk), v (C, Hkv, Dv) f32 or f16 -> out (T, H, Dv) f32.
// scalar: {T, H, Hkv, Dk, Dv, start_pos, k_is_f16, v_is_f16, C, window (0: none), has_sinks}; fscalar:
// {scale}. With has_sinks, in[3] holds a logit per head (H) that counts in each softmax sum only.
extern const CustomKernel ATTENTION;
// Indices (R, k) i32 of the k largest values of each row of x (R, N) f32, descending, ties by lower
// index, NaN last. scalar: {N, k}.
extern const CustomKernel TOPK;

// The hand-written kernels of devices/cpu/kernels behind the same interface (hand_kernels.cpp); their
// CPU functions are null (and hand_kernels() false) in a build without them.
bool hand_kernels();
gguf::Type hand_activation_type(gguf::Type weight);             // the format activations are packed in
int64_t hand_activation_row_bytes(gguf::Type weight, int64_t n_cols);
extern const CustomKernel HAND_QUANTIZE;   // (T, K) f32 -> (T, row bytes) u8; scalar {K, activation type}
extern const CustomKernel HAND_MATMUL;     // {activations, W} -> (T, N) f32; scalar {T, N, K, weight type, packed}
// Whether hand_pack() takes this weight (false in a build without hand kernels or off AVX-512).
bool hand_can_pack(gguf::Type weight, int64_t n_rows, int64_t n_cols);
// Panels [p0, p1) of 16 rows of w (n_rows, n_cols) into out, in the layout HAND_MATMUL reads with packed = 1.
void hand_pack(gguf::Type weight, const void* w, int64_t n_rows, int64_t n_cols, void* out, int64_t p0, int64_t p1);
extern const CustomKernel HAND_ATTENTION;  // the ATTENTION arguments

}  // namespace engine::ref_kernels
