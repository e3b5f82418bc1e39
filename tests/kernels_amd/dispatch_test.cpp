// The host-facing interface a fake GPU and the engine use: the kernel table, argument validation, launch
// shapes, buffer extents checked through the memory resolver, and the Q6_K repack.
#include "support.h"

#include "kernels_amd/emu/emulator.h"

#include <catch2/catch.hpp>

#include <set>

using namespace amdtest;

namespace {

GemvQ8Args small_gemv(DeviceMemory& mem, uint32_t n_out, uint32_t n_in) {
    GemvQ8Args a{};
    a.w = gpu<const uint32_t>(mem.alloc(size_t{n_out} * n_in / 256 * 144));
    a.xq = gpu<const uint32_t>(mem.alloc(n_in));
    a.xscale = gpu<const float>(mem.alloc(n_in / 8));
    a.xsum = gpu<const float>(mem.alloc(n_in / 4));
    a.y = gpu<float>(mem.alloc(n_out * 4));
    a.n_out = n_out;
    a.n_in = n_in;
    a.n_tokens = 1;
    return a;
}

}  // namespace

TEST_CASE("every kernel has an emulated twin and a code object on every target") {
    std::set<std::string_view> names;
    for (const KernelInfo& k : kernels()) {
        CHECK(names.insert(k.name).second);
        for (Target t : ALL_TARGETS) {
            INFO(k.name << " on " << target_name(t));
            CHECK(tinyllm::amd::emu::find_twin(k.name, t) != nullptr);
            if (have_code_objects()) CHECK(code_object(k.name, t).size() > 64);
        }
    }
    CHECK(kernels().size() == 23);
}

TEST_CASE("kernels are found by GGUF weight type and head size") {
    CHECK(gemv_kernel_for(gguf::Type::Q4_K) == "gemv_q4_k_q8");
    CHECK(gemv_kernel_for(gguf::Type::IQ4_XS) == "gemv_iq4_xs_q8");
    CHECK(gemv_kernel_for(gguf::Type::F16) == "gemv_f16");
    CHECK_FALSE(gemv_kernel_for(gguf::Type::Q2_K));
    CHECK(gemm_kernel_for(gguf::Type::Q6_K) == "gemm_q6_k");
    CHECK(attention_partial_kernel_for(128) == "attn_decode_partial_d128");
    CHECK(attention_partial_kernel_for(8) == "attn_decode_partial_d8");
    CHECK_FALSE(attention_partial_kernel_for(96));
    CHECK(target_from_name("gfx942") == Target::GFX942);
    CHECK_FALSE(target_from_name("gfx950"));
}

TEST_CASE("launch shapes: one wave per GEMV row, 64x64 GEMM tiles, wave64 on CDNA") {
    DeviceMemory mem;
    GemvQ8Args g = small_gemv(mem, 10, 512);
    LaunchDims d = launch_dims("gemv_q4_k_q8", kernarg_bytes(g), Target::GFX1100);
    CHECK(d.block == Dim3{128, 1, 1});
    CHECK(d.grid == Dim3{3 * 128, 1, 1});
    d = launch_dims("gemv_q4_k_q8", kernarg_bytes(g), Target::GFX90A);
    CHECK(d.block == Dim3{256, 1, 1});
    GemmArgs m{};
    m.n_out = 130, m.n_in = 256, m.n_tokens = 65;
    d = launch_dims("gemm_q4_k", kernarg_bytes(m), Target::GFX1201);
    CHECK(d.grid == Dim3{3 * 128, 2, 1});
}

TEST_CASE("bad kernel arguments are rejected with the kernel and field named") {
    DeviceMemory mem;
    GemvQ8Args g = small_gemv(mem, 4, 512);
    g.n_in = 100;
    CHECK_THROWS_WITH(validate("gemv_q4_k_q8", kernarg_bytes(g)),
                      "[kernels_amd] gemv_q4_k_q8: n_in 100 is not a positive multiple of 256");
    AttnDecodeArgs a{};
    a.n_heads = 8, a.n_kv_heads = 3, a.kv_len = 10, a.n_chunks = 1, a.kv_head_stride = 64, a.pos_stride = 64;
    CHECK_THROWS_WITH(validate("attn_decode_partial_d64", kernarg_bytes(a)), Catch::Contains("not a positive multiple of n_kv_heads 3"));
    a.n_kv_heads = 2, a.n_chunks = 2;
    CHECK_THROWS_WITH(validate("attn_decode_partial_d64", kernarg_bytes(a)), Catch::Contains("n_chunks 2 is not ceil(kv_len / 64) = 1"));
    CHECK_THROWS_WITH(validate("gemv_q4_k_q8", std::span<const uint8_t>(kernarg_bytes(g).data(), 8)), Catch::Contains("kernarg of 8 bytes"));
    CHECK_THROWS_WITH(kernel_info("gemv_q3_k"), "[kernels_amd] unknown kernel 'gemv_q3_k'");
}

TEST_CASE("emulate refuses a dispatch shape the kernel was not written for") {
    DeviceMemory mem;
    GemvQ8Args g = small_gemv(mem, 4, 512);
    CHECK_THROWS_WITH(emulate("gemv_q4_k_q8", Target::GFX1100, {64, 1, 1}, {64, 1, 1}, kernarg_bytes(g), mem.resolver()),
                      Catch::Contains("dispatched grid (64,1,1) block (64,1,1), the kernel needs grid (128,1,1) block (128,1,1)"));
}

TEST_CASE("emulate passes every buffer's full extent to the resolver: an unmapped or short buffer faults") {
    DeviceMemory mem;
    GemvQ8Args g = small_gemv(mem, 4, 512);
    g.y = gpu<float>(0x10);  // never mapped
    CHECK_THROWS_WITH(run("gemv_q4_k_q8", Target::GFX1100, g, mem), Catch::Contains("not mapped"));
    g = small_gemv(mem, 4, 512);
    g.w = gpu<const uint32_t>(mem.alloc(2 * 144));  // half the rows the kernel will read
    std::vector<std::pair<uint64_t, uint64_t>> asked;
    MemoryResolver spy = [&](uint64_t a, uint64_t n, bool w) {
        asked.emplace_back(a, n);
        return mem.resolve(a, n, w);
    };
    LaunchDims d = launch_dims("gemv_q4_k_q8", kernarg_bytes(g), Target::GFX1100);
    CHECK_THROWS_WITH(emulate("gemv_q4_k_q8", Target::GFX1100, d.grid, d.block, kernarg_bytes(g), spy), Catch::Contains("not mapped"));
    REQUIRE(asked.size() == 1);
    CHECK(asked[0].second == 4 * 2 * 144);
}

TEST_CASE("buffer extents round quantized weights up to whole words") {
    GemvQ8Args g{};
    g.n_out = 3, g.n_in = 32, g.n_tokens = 1;  // Q4_0: 3 * 18 = 54 bytes, read as 14 words
    std::vector<BufferUse> uses = buffers("gemv_q4_0_q8", kernarg_bytes(g));
    REQUIRE(uses.size() == 5);
    CHECK(std::string(uses[0].name) == "w");
    CHECK(uses[0].bytes == 56);
    CHECK_FALSE(uses[0].written);
    CHECK(uses[4].written);
}

TEST_CASE("repack_q6_k pads each 210-byte block to 212 bytes and rejects partial blocks") {
    std::vector<uint8_t> src = random_blocks("q6_K", 3, 5);
    std::vector<uint8_t> out = repack_q6_k(src);
    REQUIRE(out.size() == 3 * 212);
    for (size_t b = 0; b < 3; b++) {
        CHECK(std::memcmp(out.data() + b * 212, src.data() + b * 210, 210) == 0);
        CHECK(out[b * 212 + 210] == 0);
        CHECK(out[b * 212 + 211] == 0);
    }
    CHECK_THROWS_WITH(repack_q6_k(std::span<const uint8_t>(src.data(), 211)), Catch::Contains("not a whole number of 210-byte blocks"));
}
