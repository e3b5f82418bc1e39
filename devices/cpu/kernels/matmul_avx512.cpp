// The AVX-512 variant's entry points: quantized weights go to the matrix-vector kernels for a few
// tokens and to the packed matrix-matrix kernels beyond; float weights to float_avx512.cpp.
#include "devices/cpu/kernels/avx512_impl.h"
#include "devices/cpu/kernels/scalar_impl.h"

namespace cpu_kernels::avx512 {

using gguf::Type;

namespace {

// From this many tokens on, packing 16 rows at a time pays for itself (bench_cpu_kernels).
constexpr int64_t kGemmMinTokens = 4;

void matmul(const Matmul& m, int64_t r0, int64_t r1) {
    if (m.type == Type::F32 || m.type == Type::F16 || m.type == Type::BF16) return matmul_float(m, r0, r1);
    if (m.n_cols % 64 != 0) return scalar::matmul(m, r0, r1);  // 32-element blocks in odd count: rare
    if (m.n_tokens >= kGemmMinTokens) return gemm_quant(m, r0, r1);
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, m.n_tokens * (lane_act_bytes(m.n_cols) + sizeof(LaneAct))));
    auto acts = reinterpret_cast<LaneAct*>(mem + m.n_tokens * lane_act_bytes(m.n_cols));
    prepare_lane_acts(m.type, static_cast<const uint8_t*>(m.x), m.n_cols, m.n_tokens, mem, acts);
    for (int64_t t = 0; t < m.n_tokens; t += 4)
        gemv_quant(m, acts, t, static_cast<int>(m.n_tokens - t < 4 ? m.n_tokens - t : 4), r0, r1);
}

}  // namespace

const Kernels kernels = {quantize_rows, matmul, attention};

}  // namespace cpu_kernels::avx512
