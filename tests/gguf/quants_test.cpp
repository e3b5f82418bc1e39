// The type table against ggml's own numbers (../shared/golden/quants): dequantization bit-exact
// (uint32 patterns, -0.0 included) for every type, quantizers byte-exact where ggml has a reference.
#include "common/test_data.h"
#include "gguf/quant_tables.h"
#include "gguf/quants.h"
#include "gguf/types.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

namespace {

std::string golden_dir() { return test_data::shared("golden/quants"); }

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

const nlohmann::json& index_json() {
    static const nlohmann::json index = [] {
        std::ifstream f(golden_dir() + "/index.json");
        return nlohmann::json::parse(f);
    }();
    return index;
}

// One golden file: its sections by name.
struct Golden {
    std::string name;
    nlohmann::json info;
    std::vector<uint8_t> bytes;

    explicit Golden(const std::string& type_name) : name(type_name) {
        info = index_json()["types"][type_name];
        REQUIRE(info.is_object());
        bytes = read_bytes(golden_dir() + "/" + info["file"].get<std::string>());
        REQUIRE(bytes.size() == info["file_bytes"].get<size_t>());
    }
    bool has(const std::string& section) const { return info["sections"].contains(section); }
    std::vector<uint8_t> section(const std::string& s) const {
        const auto& sec = info["sections"][s];
        size_t off = sec["offset"], len = sec["length"];
        REQUIRE(off + len <= bytes.size());
        return {bytes.begin() + off, bytes.begin() + off + len};
    }
    std::vector<float> floats(const std::string& s) const {
        auto raw = section(s);
        std::vector<float> out(raw.size() / 4);
        std::memcpy(out.data(), raw.data(), raw.size());
        return out;
    }
};

const gguf::TypeTraits& traits_of(const std::string& name) {
    auto t = gguf::type_from_name(name);
    REQUIRE(t.has_value());
    return gguf::type_traits(*t);
}

// Dequantizes `blocks` and compares bit patterns with `expected`; reports the first difference.
void check_dequant(const std::string& type, const std::vector<uint8_t>& blocks, const std::vector<float>& expected) {
    const gguf::TypeTraits& tr = traits_of(type);
    REQUIRE(tr.dequantize != nullptr);
    REQUIRE(static_cast<int64_t>(blocks.size() / tr.bytes_per_block) * tr.block_size == static_cast<int64_t>(expected.size()));
    std::vector<float> got(expected.size(), 12345.0f);
    tr.dequantize(blocks.data(), got.data(), static_cast<int64_t>(got.size()));
    size_t mismatches = 0, first = 0;
    for (size_t i = 0; i < got.size(); i++) {
        uint32_t a, b;
        std::memcpy(&a, &got[i], 4);
        std::memcpy(&b, &expected[i], 4);
        if (a != b && mismatches++ == 0) first = i;
    }
    INFO(type << ": " << mismatches << " of " << got.size() << " values differ; first at " << first << ": got "
              << got[first] << ", ggml " << expected[first]);
    CHECK(mismatches == 0);
}

void check_quant(const std::string& type, const std::vector<float>& input, const std::vector<uint8_t>& expected) {
    const gguf::TypeTraits& tr = traits_of(type);
    REQUIRE(tr.quantize != nullptr);
    std::vector<uint8_t> got(expected.size(), 0xAA);
    tr.quantize(input.data(), got.data(), static_cast<int64_t>(input.size()));
    size_t first = got.size();
    for (size_t i = 0; i < got.size() && first == got.size(); i++)
        if (got[i] != expected[i]) first = i;
    INFO(type << ": first differing byte " << first << " of " << got.size() << " (block " << first / tr.bytes_per_block
              << ")");
    CHECK(first == got.size());
}

const char* const WEIGHT_TYPES[] = {
    "f16",   "bf16",    "q4_0",   "q4_1",  "q5_0",    "q5_1",  "q8_0",   "q2_K",   "q3_K",   "q4_K",
    "q5_K",  "q6_K",    "q8_K",   "iq1_s", "iq1_m",   "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
    "iq4_nl", "iq4_xs", "mxfp4",  "tq1_0", "tq2_0",   "nvfp4", "q1_0",   "q2_0",
};

}  // namespace

TEST_CASE("the type table agrees with ggml on ids, names and block geometry") {
    REQUIRE_SHARED_DATA();
    for (auto& [name, info] : index_json()["types"].items()) {
        INFO(name);
        const gguf::TypeTraits* tr = gguf::type_traits(info["type_id"].get<uint32_t>());
        REQUIRE(tr != nullptr);
        CHECK(tr->name == name);
        CHECK(tr->block_size == info["block_size"].get<int64_t>());
        CHECK(tr->bytes_per_block == info["bytes_per_block"].get<size_t>());
    }
}

TEST_CASE("the type table's kernel columns are consistent: activation formats quantize, code groups fit") {
    for (const gguf::TypeTraits& t : gguf::all_types()) {
        INFO(t.name);
        // every layer quantizes activations through the table's own reference quantizer
        const gguf::TypeTraits& act = gguf::type_traits(t.act_type);
        CHECK(act.quantize != nullptr);
        if (t.codes.group == 0) continue;
        CHECK(t.dequantize != nullptr);
        CHECK(t.block_size % t.codes.group == 0);
        CHECK(t.block_size % act.block_size == 0);  // a weight block meets whole activation blocks
        CHECK(t.codes.zero >= 0);
        CHECK(t.codes.zero <= 128);
    }
    CHECK(gguf::type_traits(gguf::Type::Q4_K).act_type == gguf::Type::Q8_K);
    CHECK(gguf::type_traits(gguf::Type::Q4_1).act_type == gguf::Type::Q8_1);
    CHECK(gguf::type_traits(gguf::Type::IQ2_XXS).act_type == gguf::Type::F32);  // generic path only
}

TEST_CASE("dequantization of ggml-quantized blocks is bit-exact for every type") {
    REQUIRE_SHARED_DATA();
    for (const char* type : WEIGHT_TYPES) {
        Golden g(type);
        check_dequant(type, g.section("blocks"), g.floats("dequant_f32"));
    }
}

TEST_CASE("dequantization of random blocks (every code, subnormal and negative scales) is bit-exact") {
    REQUIRE_SHARED_DATA();
    for (const char* type : WEIGHT_TYPES) {
        Golden g(type);
        check_dequant(type, g.section("random_blocks"), g.floats("random_dequant_f32"));
    }
}

TEST_CASE("dequantization of the activation blocks (q8_0, q8_1, q8_K, f16, bf16) is bit-exact") {
    REQUIRE_SHARED_DATA();
    for (const char* type : WEIGHT_TYPES) {
        Golden g(type);
        if (!g.has("act_blocks")) continue;
        std::string act_type = g.info["vec_dot"]["vec_dot_type"];
        INFO(type << " activations as " << act_type);
        check_dequant(act_type, g.section("act_blocks"), g.floats("act_dequant_f32"));
    }
}

TEST_CASE("activation quantizers reproduce ggml's q8_0, q8_1, q8_K, f16 and bf16 bytes") {
    REQUIRE_SHARED_DATA();
    std::set<std::string> covered;
    for (const char* type : WEIGHT_TYPES) {
        Golden g(type);
        if (!g.has("act_blocks")) continue;
        std::string act_type = g.info["vec_dot"]["vec_dot_type"];
        INFO(type << " activations as " << act_type);
        check_quant(act_type, g.floats("act_input_f32"), g.section("act_blocks"));
        covered.insert(act_type);
    }
    CHECK(covered == std::set<std::string>{"q8_0", "q8_1", "q8_K", "f16", "bf16"});
}

TEST_CASE("weight quantizers reproduce ggml's bytes for q8_0, q4_0, q4_1, q5_0, q5_1, q8_K, f16, bf16") {
    REQUIRE_SHARED_DATA();
    for (const char* type : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q8_K", "f16", "bf16"}) {
        Golden g(type);
        check_quant(type, g.floats("input_f32"), g.section("blocks"));
    }
}

TEST_CASE("the direct activation quantizers match the type table") {
    // quantize_row_q8_K on a block with a tie (0.5 steps) rounds half to even; q8_0 rounds half away.
    std::vector<float> x(gguf::QK_K);
    for (int i = 0; i < gguf::QK_K; i++) x[i] = static_cast<float>(i % 7) - 3.0f;
    x[0] = -127.0f;  // d = 1 exactly, so every x is its own quant and x.5 is a tie
    x[1] = 2.5f;
    x[2] = -3.5f;
    gguf::block_q8_K k;
    gguf::quantize_row_q8_K(x.data(), &k, gguf::QK_K);
    CHECK(k.d == 1.0f);
    CHECK(k.qs[0] == -127);
    CHECK(k.qs[1] == 2);   // 2.5 -> 2 (even)
    CHECK(k.qs[2] == -4);  // -3.5 -> -4 (even)
    int sum = 0;
    for (int j = 0; j < 16; j++) sum += k.qs[j];
    CHECK(k.bsums[0] == sum);

    std::vector<float> y(gguf::QK8_0, 0.0f);
    y[0] = 127.0f;
    y[1] = 2.5f;
    gguf::block_q8_0 b;
    gguf::quantize_row_q8_0(y.data(), &b, gguf::QK8_0);
    CHECK(gguf::f16_to_f32(b.d) == 1.0f);
    CHECK(b.qs[1] == 3);  // roundf: half away from zero
    gguf::block_q8_1 b1;
    gguf::quantize_row_q8_1(y.data(), &b1, gguf::QK8_1);
    CHECK(std::memcmp(b1.qs, b.qs, sizeof b.qs) == 0);
    CHECK(gguf::f16_to_f32(b1.s) == 130.0f);  // d * (127 + 3)
}

TEST_CASE("the generated lattice tables equal tables.json") {
    REQUIRE_SHARED_DATA();
    std::ifstream f(golden_dir() + "/tables.json");
    auto tables = nlohmann::json::parse(f)["tables"];
    auto check = [&](const char* name, const auto* table, size_t n) {
        INFO(name);
        auto values = tables[name]["values"];
        REQUIRE(values.size() == n);
        for (size_t i = 0; i < n; i++) {
            if (values[i].is_number_unsigned()) CHECK(static_cast<uint64_t>(table[i]) == values[i].get<uint64_t>());
            else CHECK(static_cast<int64_t>(table[i]) == values[i].get<int64_t>());
        }
    };
    using namespace gguf::tables;
    check("kmask_iq2xs", kmask_iq2xs, 8);
    check("ksigns_iq2xs", ksigns_iq2xs, 128);
    check("kvalues_iq4nl", kvalues_iq4nl, 16);
    check("kvalues_fp4", kvalues_fp4, 16);
    check("iq2xxs_grid", iq2xxs_grid, 256);
    check("iq2xs_grid", iq2xs_grid, 512);
    check("iq2s_grid", iq2s_grid, 1024);
    check("iq1s_grid", iq1s_grid, 2048);
    check("iq3xxs_grid", iq3xxs_grid, 256);
    check("iq3s_grid", iq3s_grid, 512);
}

TEST_CASE("f16 conversion round-trips every finite half and rounds to nearest even") {
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;  // inf / NaN
        float f = gguf::f16_to_f32(static_cast<uint16_t>(h));
        REQUIRE(gguf::f32_to_f16(f) == h);
    }
    CHECK(gguf::f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);  // tie between 1 and 1+2^-10 -> even (1)
    CHECK(gguf::f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02);  // tie -> even (1+2^-9)
    CHECK(gguf::f32_to_f16(0x1p-25f) == 0x0000);   // half the smallest subnormal -> 0 (even)
    CHECK(gguf::f32_to_f16(3 * 0x1p-25f) == 0x0002);
    CHECK(gguf::f32_to_f16(65520.0f) == 0x7c00);   // rounds up to inf
    CHECK(gguf::f32_to_f16(65519.0f) == 0x7bff);
    CHECK(gguf::f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80);  // tie -> even
    CHECK(gguf::f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
}
