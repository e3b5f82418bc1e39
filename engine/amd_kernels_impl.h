// AMD implementations of the engine's hot custom kernels (engine/amd_kernels.cpp): kernels_amd's
// hand-written code objects for linear (q8 activations + GEMV, WMMA/MFMA GEMM, fp16 GEMV) and attention.
// Each returns nullopt when the tensors are not on an AMD device or no hand kernel fits them; the caller
// then keeps its generic path (generated kernels, or a custom kernel run on the host).
#pragma once

#include "engine/tensor.h"

#include <optional>

namespace engine::amd_kernels {

// y (T, N) f32 = x (T, K) f32 . W (N, K)^T, as engine::linear.
std::optional<Tensor> linear(const Tensor& x, const Tensor& w);
// engine::attention's contract; needs f16 caches and Dk == Dv of a size kernels_amd has (8..256).
std::optional<Tensor> attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Dim& start_pos, double scale);

}  // namespace engine::amd_kernels
