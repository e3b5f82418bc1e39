// The AVX2 variant's entry points.
#include "devices/cpu/kernels/avx2_impl.h"

namespace cpu_kernels::avx2 {

using gguf::Type;

namespace {

void matmul(const Matmul& m, int64_t r0, int64_t r1) {
    if (m.type == Type::F32 || m.type == Type::F16 || m.type == Type::BF16) return matmul_float(m, r0, r1);
    matmul_quant(m, r0, r1);
}

}  // namespace

const Kernels kernels = {quantize_rows, matmul, attention, swiglu, rms_norm};

}  // namespace cpu_kernels::avx2
