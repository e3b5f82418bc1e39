// The CPU kernels against ggml's own numbers (../shared/golden/quants): weight decoding bit for bit,
// activation quantizers byte for byte, and matrix products within 1e-5·Σ|w·x| of ggml's vec_dot.
#include "devices/cpu/kernels/kernels.h"
#include "kernels_test.h"

using namespace kernels_test;
namespace ck = cpu_kernels;

namespace {

const char* const kHandTypes[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl", "iq4_xs",
                                  "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "f16", "bf16"};

uint32_t bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// y for each golden row (4 rows) against the golden activation, repeated as n_tokens tokens.
std::vector<float> golden_matmul(const Golden& g, const std::string& blocks, int64_t n_tokens) {
    const Type type = static_cast<Type>(g.info["type_id"].get<uint32_t>());
    const auto& vd = g.info["vec_dot"];
    const int64_t n_rows = vd["nrows"], n_cols = vd["row_len"];
    const size_t act_bytes = g.section_bytes("act_blocks");
    std::vector<uint8_t> x(n_tokens * act_bytes);
    for (int64_t t = 0; t < n_tokens; t++) std::memcpy(&x[t * act_bytes], g.section("act_blocks"), act_bytes);
    std::vector<float> y(n_tokens * n_rows, NAN);
    ck::Matmul m;
    m.type = type, m.w = g.section(blocks), m.n_rows = n_rows, m.n_cols = n_cols;
    m.x = x.data(), m.n_tokens = n_tokens, m.y = y.data(), m.y_stride = n_rows;
    ck::matmul(m, 0, n_rows);
    return y;
}

}  // namespace

TEST_CASE("decoded codes and scales reproduce ggml's dequantization bit for bit") {
    REQUIRE_SHARED_DATA();
    for (const char* name : kHandTypes) {
        const Golden g(name);
        const Type type = static_cast<Type>(g.info["type_id"].get<uint32_t>());
        if (!ck::quant_layout(type)) continue;  // f16, bf16: nothing to decode
        INFO(name);
        for (auto [blocks, expected] : {std::pair{"blocks", "dequant_f32"}, {"random_blocks", "random_dequant_f32"}}) {
            const std::vector<float> want = g.floats(expected);
            const std::vector<float> got = dequantize(type, g.section(blocks), static_cast<int64_t>(want.size()));
            int64_t mismatches = 0;
            for (size_t i = 0; i < want.size(); i++) mismatches += bits(got[i]) != bits(want[i]);
            CHECK(mismatches == 0);
        }
    }
}

TEST_CASE("activation quantizers reproduce ggml's bytes on every variant") {
    REQUIRE_SHARED_DATA();
    // (golden file, activation format): its act_input_f32 quantized to act_blocks
    const std::pair<const char*, Type> cases[] = {
        {"q4_0", Type::Q8_0}, {"q4_1", Type::Q8_1}, {"q4_K", Type::Q8_K}, {"f16", Type::F16}, {"bf16", Type::BF16}};
    for (Isa isa : supported_isas()) {
        ActiveIsa active(isa);
        for (auto [name, act] : cases) {
            INFO(ck::isa_name(isa) << " " << name);
            const Golden g(name);
            const std::vector<float> x = g.floats("act_input_f32");
            std::vector<uint8_t> out(g.section_bytes("act_blocks"), 0xAA);
            ck::quantize_rows(act, x.data(), static_cast<int64_t>(x.size()), static_cast<int64_t>(x.size()), out.data(), 0, 1);
            CHECK(std::memcmp(out.data(), g.section("act_blocks"), out.size()) == 0);
        }
        // q8_K of the weight input: 4 rows, with an all-zero block and a single-outlier block
        INFO(ck::isa_name(isa) << " q8_K");
        const Golden g("q8_K");
        const std::vector<float> x = g.floats("input_f32");
        std::vector<uint8_t> out(g.section_bytes("blocks"), 0xAA);
        ck::quantize_rows(Type::Q8_K, x.data(), 1024, 1024, out.data(), 0, 4);
        CHECK(std::memcmp(out.data(), g.section("blocks"), out.size()) == 0);
    }
}

TEST_CASE("matmul matches ggml's vec_dot on the golden rows, on every variant") {
    REQUIRE_SHARED_DATA();
    for (Isa isa : supported_isas()) {
        ActiveIsa active(isa);
        for (const char* name : kHandTypes) {
            const Golden g(name);
            for (auto [blocks, rows] : {std::pair{"blocks", "rows"}, {"random_blocks", "random_rows"}})
                for (int64_t n_tokens : {1, 3, 17}) {  // matrix-vector and matrix-matrix kernels
                    INFO(ck::isa_name(isa) << " " << name << " " << blocks << " tokens " << n_tokens);
                    const std::vector<float> y = golden_matmul(g, blocks, n_tokens);
                    const auto& want = g.info["vec_dot"][rows];
                    for (int64_t t = 0; t < n_tokens; t++)
                        for (size_t r = 0; r < want.size(); r++) {
                            const double ref = want[r]["vec_dot_ref"]["value"], tol = 1e-5 * want[r]["abs_sum_f64"].get<double>();
                            INFO("token " << t << " row " << r << ": " << y[t * want.size() + r] << " vs " << ref);
                            CHECK(std::fabs(y[t * want.size() + r] - ref) <= tol);
                        }
                }
        }
    }
}

namespace {

// A stand-in for gguf's dequantizer on the generic path: serves ggml's own dequantization of the
// golden blocks (the gguf reader does not dequantize every type yet).
const Golden* g_golden = nullptr;
const uint8_t* g_blocks = nullptr;
std::vector<float> g_dequant;

void golden_dequantize(const void* blocks, float* out, int64_t n) {
    const size_t bpb = g_golden->info["bytes_per_block"], bs = g_golden->info["block_size"];
    const size_t first = (static_cast<const uint8_t*>(blocks) - g_blocks) / bpb * bs;
    std::memcpy(out, &g_dequant[first], n * sizeof(float));
}

}  // namespace

TEST_CASE("the generic path (dequantize, then F32) matches the dequantized dot for every golden type") {
    REQUIRE_SHARED_DATA();
    for (Isa isa : supported_isas()) {
        ActiveIsa active(isa);
        for (const auto& [name, info] : golden_index()["types"].items()) {
            if (info["vec_dot"].is_null()) continue;  // q8_K: an activation type
            if (!gguf::type_traits(info["type_id"].get<uint32_t>())) continue;  // newer than gguf's table (nvfp4, q1_0, q2_0)
            const Golden g(name);
            g_golden = &g, g_blocks = g.section("blocks"), g_dequant = g.floats("dequant_f32");
            const auto& vd = info["vec_dot"];
            const int64_t n_rows = vd["nrows"], n_cols = vd["row_len"];
            std::vector<float> x;
            for (int t = 0; t < 5; t++) {  // 5 identical tokens
                const std::vector<float> row = g.floats("act_dequant_f32");
                x.insert(x.end(), row.begin(), row.end());
            }
            std::vector<float> y(5 * n_rows, NAN);
            ck::Matmul m;
            m.type = static_cast<Type>(info["type_id"].get<uint32_t>()), m.w = g_blocks, m.n_rows = n_rows;
            m.n_cols = n_cols, m.x = x.data(), m.n_tokens = 5, m.y = y.data(), m.y_stride = n_rows;
            ck::matmul_generic(m, golden_dequantize, 1, n_rows);  // rows 1.. : an unaligned start
            ck::matmul_generic(m, golden_dequantize, 0, 1);
            for (int t = 0; t < 5; t++)
                for (int64_t r = 0; r < n_rows; r++) {
                    INFO(ck::isa_name(isa) << " " << name << " token " << t << " row " << r);
                    const double ref = vd["rows"][r]["dot_dequant_f64"], tol = 1e-5 * vd["rows"][r]["abs_sum_f64"].get<double>();
                    CHECK(std::fabs(y[t * n_rows + r] - ref) <= tol);
                }
        }
    }
}

TEST_CASE("types without a hand kernel go through gguf's dequantizer when it has one") {
    REQUIRE_SHARED_DATA();
    int covered = 0;
    for (const auto& [name, info] : golden_index()["types"].items()) {
        const gguf::TypeTraits* traits = gguf::type_traits(info["type_id"].get<uint32_t>());
        if (!traits || ck::has_hand_kernel(traits->type) || info["vec_dot"].is_null()) continue;
        const auto& vd = info["vec_dot"];
        const int64_t n_rows = vd["nrows"], n_cols = vd["row_len"];
        const Golden g(name);
        const std::vector<float> x = g.floats("act_dequant_f32");
        std::vector<float> y(n_rows, NAN);
        ck::Matmul m;
        m.type = traits->type, m.w = g.section("blocks"), m.n_rows = n_rows, m.n_cols = n_cols;
        m.x = x.data(), m.n_tokens = 1, m.y = y.data(), m.y_stride = n_rows;
        INFO(name);
        if (!traits->dequantize) {
            CHECK_THROWS_WITH(ck::matmul(m, 0, n_rows), Catch::Contains("no dequantizer for the generic path"));
            continue;
        }
        ck::matmul(m, 0, n_rows);
        covered++;
        for (int64_t r = 0; r < n_rows; r++)
            CHECK(std::fabs(y[r] - vd["rows"][r]["dot_dequant_f64"].get<double>()) <= 1e-5 * vd["rows"][r]["abs_sum_f64"].get<double>());
    }
    if (covered == 0) WARN("gguf dequantizes none of the generic-path types yet: only their clear error is checked");
}
