// Mutation tests: each swaps one lane mapping of the emulator for a wrong one and shows that the same
// kernel check that passes with the right mapping now fails. Without this, a kernel test could pass
// because the emulator is as wrong as the kernel.
#include "support.h"

#include "kernels_amd/emu/emulator.h"

#include <catch2/catch.hpp>

using namespace amdtest;
namespace emu = tinyllm::amd::emu;

namespace {

struct MutationScope {
    explicit MutationScope(emu::Mutation m) { emu::set_mutation(m); }
    ~MutationScope() { emu::set_mutation(emu::Mutation::NONE); }
};

// Worst |error| / (1e-5 * sum|w x|) of a Q4_K GEMV (swizzle reductions; bpermute too on wave64).
double gemv_error(Target target) {
    const uint32_t n_out = 8, n_in = 1024;
    std::vector<uint8_t> blocks = random_blocks("q4_K", n_out * n_in / 256, 31);
    Random rng(32);
    Q8Activations act = quantize_q8(rng.normals(n_in), n_in);
    std::vector<double> want, tolerance;
    reference_matmul(dequantize("q4_K", blocks.data(), n_out * n_in), act.values(), n_out, n_in, 1, want, tolerance);
    for (double& t : tolerance) t *= 1e-5;
    DeviceMemory mem;
    GemvQ8Args a{};
    a.w = gpu<const uint32_t>(mem.upload(blocks));
    a.xq = gpu<const uint32_t>(mem.upload(act.q));
    a.xscale = gpu<const float>(mem.upload(act.scale));
    a.xsum = gpu<const float>(mem.upload(act.sum16));
    uint64_t y = mem.alloc(n_out * 4);
    a.y = gpu<float>(y);
    a.n_out = n_out;
    a.n_in = n_in;
    a.n_tokens = 1;
    run("gemv_q4_k_q8", target, a, mem);
    return worst_ratio(mem.download<float>(y, n_out), want, tolerance);
}

// Worst error of an fp16 GEMM on the matrix cores, relative to 1e-5 * sum|w x|.
double gemm_error(Target target) {
    const uint32_t n_out = 32, n_in = 64, n_tokens = 32;
    std::vector<uint8_t> w = random_blocks("f16", n_out * n_in, 41);
    Random rng(42);
    std::vector<float> x = rng.normals(n_tokens * n_in);
    std::vector<uint16_t> x16(x.size());
    for (size_t i = 0; i < x.size(); i++) x16[i] = f32_to_f16(x[i]), x[i] = f16_to_f32(x16[i]);
    std::vector<double> want, tolerance;
    reference_matmul(dequantize("f16", w.data(), n_out * n_in), x, n_out, n_in, n_tokens, want, tolerance);
    for (double& t : tolerance) t *= 1e-5;
    DeviceMemory mem;
    GemmArgs a{};
    a.w = gpu<const uint32_t>(mem.upload(w));
    a.x = gpu<const uint16_t>(mem.upload(x16));
    uint64_t y = mem.alloc(n_out * n_tokens * 4);
    a.y = gpu<float>(y);
    a.n_out = n_out;
    a.n_in = n_in;
    a.n_tokens = n_tokens;
    run("gemm_f16", target, a, mem);
    return worst_ratio(mem.download<float>(y, n_out * n_tokens), want, tolerance);
}

}  // namespace

TEST_CASE("a wrong ds_swizzle lane mapping makes the GEMV check fail") {
    CHECK(gemv_error(Target::GFX1100) <= 1.0);
    MutationScope m(emu::Mutation::SWIZZLE_SOURCE_LANE);
    CHECK(gemv_error(Target::GFX1100) > 1.0);
}

TEST_CASE("a wrong ds_bpermute lane mapping makes the wave64 GEMV check fail") {
    CHECK(gemv_error(Target::GFX942) <= 1.0);
    MutationScope m(emu::Mutation::BPERMUTE_SOURCE_LANE);
    CHECK(gemv_error(Target::GFX942) > 1.0);
}

TEST_CASE("a wrong gfx11 WMMA accumulator layout makes the GEMM check fail") {
    CHECK(gemm_error(Target::GFX1100) <= 1.0);
    MutationScope m(emu::Mutation::WMMA_GFX11_D_ROWS);
    CHECK(gemm_error(Target::GFX1100) > 1.0);
}

TEST_CASE("a wrong gfx12 WMMA accumulator layout makes the GEMM check fail") {
    CHECK(gemm_error(Target::GFX1201) <= 1.0);
    MutationScope m(emu::Mutation::WMMA_GFX12_D_ROWS);
    CHECK(gemm_error(Target::GFX1201) > 1.0);
}

TEST_CASE("a wrong MFMA accumulator layout makes the GEMM check fail") {
    CHECK(gemm_error(Target::GFX942) <= 1.0);
    MutationScope m(emu::Mutation::MFMA_D_ROWS);
    CHECK(gemm_error(Target::GFX942) > 1.0);
}
