// The decode GEMVs and the q8 activation quantizer on the host emulator, for every target: against ggml's
// vec_dot on the golden quant rows, and on larger random shapes against a dequantize-and-dot reference.
#include "support.h"

#include "common/test_data.h"

#include <catch2/catch.hpp>

using namespace amdtest;

namespace {

const std::vector<std::string> GEMV_TYPES = {"q4_K", "q5_K", "q6_K", "iq4_xs", "q8_0", "q4_0"};

// y = W x on the emulator for q8 activations `act` (n_tokens rows of n_in).
std::vector<float> run_gemv(const std::string& type, Target target, const std::vector<uint8_t>& blocks, const Q8Activations& act,
                            uint32_t n_out, uint32_t n_in, uint32_t n_tokens) {
    DeviceMemory mem;
    GemvQ8Args a{};
    a.w = gpu<const uint32_t>(mem.upload(device_layout(type, blocks)));
    a.xq = gpu<const uint32_t>(mem.upload(act.q));
    a.xscale = gpu<const float>(mem.upload(act.scale));
    a.xsum = gpu<const float>(mem.upload(act.sum16));
    uint64_t y = mem.alloc(size_t{n_tokens} * n_out * 4);
    a.y = gpu<float>(y);
    a.n_out = n_out;
    a.n_in = n_in;
    a.n_tokens = n_tokens;
    run(*gemv_kernel_for(*gguf::type_from_name(type)), target, a, mem);
    return mem.download<float>(y, size_t{n_tokens} * n_out);
}

// The golden rows: 4 rows of 4 blocks dotted with ggml's quantized activation row; |got - vec_dot_ref| must
// stay within 1e-5 * sum|w a| (README of ../shared/golden/quants).
void check_golden(const std::string& type, bool random) {
    GoldenType g = load_golden(type);
    Q8Activations act = q8_from_ggml(g.act_type, g.act_blocks.data(), g.row_len);
    const std::vector<GoldenRow>& rows = random ? g.random_rows : g.rows;
    std::vector<double> want, tolerance;
    for (const GoldenRow& r : rows) want.push_back(r.vec_dot_ref), tolerance.push_back(1e-5 * r.abs_sum);
    for (Target t : ALL_TARGETS) {
        INFO(type << (random ? " random blocks" : " blocks") << " on " << target_name(t));
        std::vector<float> y = run_gemv(type, t, random ? g.random_blocks : g.blocks, act, static_cast<uint32_t>(rows.size()),
                                        static_cast<uint32_t>(g.row_len), 1);
        CHECK(worst_ratio(y, want, tolerance) <= 1.0);
    }
}

}  // namespace

TEST_CASE("the test dequantizers reproduce ggml's golden dequantization bit for bit") {
    REQUIRE_SHARED_DATA();
    for (const std::string& type : GEMV_TYPES) {
        GoldenType g = load_golden(type);
        for (bool random : {false, true}) {
            const auto& blocks = random ? g.random_blocks : g.blocks;
            const auto& want = random ? g.random_dequant : g.dequant;
            std::vector<float> got = dequantize(type, blocks.data(), want.size());
            INFO(type << (random ? " random" : ""));
            CHECK(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
        }
    }
}

TEST_CASE("q8_quantize matches the host quantizer bit for bit on every target") {
    const uint32_t n_in = 96 + 256, n_tokens = 3;  // 33 words per token: work-groups end mid-row
    Random rng(7);
    std::vector<float> x = rng.normals(size_t{n_tokens} * n_in, 2.0f);
    for (int i = 0; i < 32; i++) x[64 + i] = 0.0f;  // an all-zero group: scale 0, values 0
    x[5] = 40.0f;
    Q8Activations want = quantize_q8(x, n_in);
    for (Target t : ALL_TARGETS) {
        INFO(target_name(t));
        DeviceMemory mem;
        Q8QuantizeArgs a{};
        a.x = gpu<const float>(mem.upload(x));
        uint64_t xq = mem.alloc(x.size()), xscale = mem.alloc(x.size() / 8), xsum = mem.alloc(x.size() / 4);
        a.xq = gpu<uint32_t>(xq);
        a.xscale = gpu<float>(xscale);
        a.xsum = gpu<float>(xsum);
        a.n_tokens = n_tokens;
        a.n_in = n_in;
        run("q8_quantize", t, a, mem);
        CHECK(mem.download<uint32_t>(xq, x.size() / 4) == want.q);
        CHECK(mem.download<float>(xscale, x.size() / 32) == want.scale);
        CHECK(mem.download<float>(xsum, x.size() / 16) == want.sum16);
    }
}

TEST_CASE("gemv Q4_K matches ggml's vec_dot on the golden rows") {
    REQUIRE_SHARED_DATA();
    check_golden("q4_K", false);
    check_golden("q4_K", true);
}

TEST_CASE("gemv Q5_K matches ggml's vec_dot on the golden rows") {
    REQUIRE_SHARED_DATA();
    check_golden("q5_K", false);
    check_golden("q5_K", true);
}

TEST_CASE("gemv Q6_K (repacked to 212-byte blocks) matches ggml's vec_dot on the golden rows") {
    REQUIRE_SHARED_DATA();
    check_golden("q6_K", false);
    check_golden("q6_K", true);
}

TEST_CASE("gemv IQ4_XS (byte-permute code book) matches ggml's vec_dot on the golden rows") {
    REQUIRE_SHARED_DATA();
    check_golden("iq4_xs", false);
    check_golden("iq4_xs", true);
}

TEST_CASE("gemv Q8_0 matches ggml's vec_dot on the golden rows") {
    REQUIRE_SHARED_DATA();
    check_golden("q8_0", false);
    check_golden("q8_0", true);
}

TEST_CASE("gemv Q4_0 matches ggml's vec_dot on the golden rows") {
    REQUIRE_SHARED_DATA();
    check_golden("q4_0", false);
    check_golden("q4_0", true);
}

TEST_CASE("quantized gemvs match a dequantize-and-dot reference on larger random shapes") {
    // 37 rows (the last work-group is partial), 2 tokens, and more 32-groups per row than a wave has lanes;
    // for the 32-wide types an odd block count per row, so rows start 2 bytes off a word.
    const uint32_t n_out = 37, n_tokens = 2;
    for (const std::string& type : GEMV_TYPES) {
        const Format& f = format(type);
        uint32_t n_in = f.block_elems == 256 ? 256 * 9 : 32 * 71;
        std::vector<uint8_t> blocks = random_blocks(type, size_t{n_out} * n_in / f.block_elems, 11);
        std::vector<float> w = dequantize(type, blocks.data(), size_t{n_out} * n_in);
        Random rng(12);
        Q8Activations act = quantize_q8(rng.normals(size_t{n_tokens} * n_in), n_in);
        std::vector<double> want, abs_sum;
        reference_matmul(w, act.values(), n_out, n_in, n_tokens, want, abs_sum);
        for (double& a : abs_sum) a *= 1e-5;
        for (Target t : {Target::GFX1100, Target::GFX942}) {
            INFO(type << " on " << target_name(t));
            CHECK(worst_ratio(run_gemv(type, t, blocks, act, n_out, n_in, n_tokens), want, abs_sum) <= 1.0);
        }
    }
}

TEST_CASE("gemv_f16 matches a naive reference, rows not a multiple of the wave's span") {
    const uint32_t n_out = 13, n_in = 8 * 50, n_tokens = 3;
    std::vector<uint8_t> blocks = random_blocks("f16", size_t{n_out} * n_in, 21);
    std::vector<float> w = dequantize("f16", blocks.data(), size_t{n_out} * n_in);
    Random rng(22);
    std::vector<float> x = rng.normals(size_t{n_tokens} * n_in);
    std::vector<double> want, tolerance;
    reference_matmul(w, x, n_out, n_in, n_tokens, want, tolerance);
    for (double& a : tolerance) a *= 1e-5;
    for (Target t : ALL_TARGETS) {
        INFO(target_name(t));
        DeviceMemory mem;
        GemvF16Args a{};
        a.w = gpu<const uint16_t>(mem.upload(blocks));
        a.x = gpu<const float>(mem.upload(x));
        uint64_t y = mem.alloc(size_t{n_tokens} * n_out * 4);
        a.y = gpu<float>(y);
        a.n_out = n_out;
        a.n_in = n_in;
        a.n_tokens = n_tokens;
        run("gemv_f16", t, a, mem);
        CHECK(worst_ratio(mem.download<float>(y, size_t{n_tokens} * n_out), want, tolerance) <= 1.0);
    }
}
