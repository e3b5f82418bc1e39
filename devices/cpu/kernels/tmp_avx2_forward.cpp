// TEMPORARY (work in progress): the AVX2 variant forwards to the scalar kernels until it is written.
#include "devices/cpu/kernels/scalar_impl.h"
namespace cpu_kernels::avx2 { const Kernels kernels = scalar::kernels; }
