// The AVX2 variant's entry points: quantized weights go to the matrix-vector kernels for a few tokens
// and to the matrix-matrix kernels beyond; float weights to float_avx2.cpp.
#include "devices/cpu/kernels/avx2_impl.h"

namespace cpu_kernels::avx2 {

using gguf::Type;

namespace {

// From this many tokens on, decoding 8 rows into a panel once per call pays for itself.
constexpr int64_t kGemmMinTokens = 5;

void matmul(const Matmul& m, int64_t r0, int64_t r1) {
    if (m.type == Type::F32 || m.type == Type::F16 || m.type == Type::BF16) return matmul_float(m, r0, r1);
    if (m.packed) return matmul_panels(m, r0, r1, kGemmMinTokens, gemv_packed, gemm_quant);
    if (m.n_tokens >= kGemmMinTokens) return gemm_quant(m, r0, r1);
    matmul_quant(m, r0, r1);
}

}  // namespace

const Kernels kernels = {quantize_rows, matmul, attention, swiglu, rms_norm};

}  // namespace cpu_kernels::avx2
