// Shared by the AMD backend tests: the test code object built from amd_test_kernels.hip and the host
// twins the fake GPU runs for its kernels.
#pragma once

#include "devices/amd/fake/fake_kfd.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <vector>

namespace amd_test {

inline std::vector<uint8_t> test_kernels() {
#ifdef TINYLLM_AMD_TEST_KERNELS
    std::ifstream f(TINYLLM_AMD_TEST_KERNELS, std::ios::binary);
    REQUIRE(f);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
#else
    FAIL("the AMD test kernels were not built (see amd_test_kernels.cmake)");
    return {};
#endif
}

// vadd(a, b, c, n): every work-item i < n writes c[i] = a[i] + b[i], reading memory through the GPU's view.
inline void vadd_twin(const amd::Dispatch& d, amd::GpuMemory& mem) {
    uint64_t a = d.arg<uint64_t>(0), b = d.arg<uint64_t>(8), c = d.arg<uint64_t>(16);
    uint32_t n = d.arg<uint32_t>(24);
    for (uint64_t i = 0; i < d.grid[0]; i++) {
        if (i >= n) continue;
        *mem.array<float>(c + 4 * i, 1) = *mem.array<float>(a + 4 * i, 1) + *mem.array<float>(b + 4 * i, 1);
    }
}

// scale2d(x, s): like the kernel, takes the row length from the hidden arguments at `hidden_offset`
// (hidden_block_count_x × hidden_group_size_x), so it is only right if the backend filled them.
inline amd::HostTwin scale2d_twin(uint32_t hidden_offset) {
    return [hidden_offset](const amd::Dispatch& d, amd::GpuMemory& mem) {
        uint64_t x = d.arg<uint64_t>(0);
        float s = d.arg<float>(8);
        uint32_t cols = d.arg<uint32_t>(hidden_offset) * d.arg<uint16_t>(hidden_offset + 12);
        for (uint32_t row = 0; row < d.grid[1]; row++)
            for (uint32_t col = 0; col < d.grid[0]; col++) *mem.array<float>(x + 4 * (uint64_t(row) * cols + col), 1) *= s;
    };
}

}  // namespace amd_test
