// The AVX-512 variant's entry points: quantized weights go to the matrix-vector kernels for a few
// tokens and to the packed matrix-matrix kernels beyond; float weights to float_avx512.cpp.
#include "devices/cpu/kernels/avx512_impl.h"

namespace cpu_kernels::avx512 {

using gguf::Type;

namespace {

// From this many tokens on, packing 16 rows at a time pays for itself (bench_cpu_kernels --prefill T).
constexpr int64_t kGemmMinTokens = 5;

void matmul(const Matmul& m, int64_t r0, int64_t r1) {
    if (m.type == Type::F32 || m.type == Type::F16 || m.type == Type::BF16) return matmul_float(m, r0, r1);
    if (m.packed) return matmul_panels(m, r0, r1, kGemmMinTokens, gemv_packed, gemm_quant);
    // the packed kernels take 64 columns at a time; an odd count of 32-element blocks is rare
    if (m.n_tokens >= kGemmMinTokens && m.n_cols % 64 == 0) return gemm_quant(m, r0, r1);
    gemv_quant(m, r0, r1);
}

}  // namespace

const Kernels kernels = {quantize_rows, matmul, attention, swiglu, rms_norm};

}  // namespace cpu_kernels::avx512
