// Host-side weight preparation for the kernels: Q6_K blocks padded from 210 to 212 bytes at load time so
// every block starts 4-byte aligned and the kernels read it with aligned u32 loads.
#include "kernels_amd/kernels_amd.h"

#include <cstring>

namespace tinyllm::amd {

std::vector<uint8_t> repack_q6_k(std::span<const uint8_t> src) {
    if (src.size() % Q6_K_BYTES)
        throw KernelError("[kernels_amd] repack_q6_k: " + std::to_string(src.size()) + " bytes is not a whole number of " +
                          std::to_string(Q6_K_BYTES) + "-byte blocks");
    size_t n = src.size() / Q6_K_BYTES;
    std::vector<uint8_t> out(n * Q6_K_REPACKED_BYTES, 0);
    for (size_t i = 0; i < n; i++) std::memcpy(out.data() + i * Q6_K_REPACKED_BYTES, src.data() + i * Q6_K_BYTES, Q6_K_BYTES);
    return out;
}

}  // namespace tinyllm::amd
