// Dense models against llama.cpp's goldens: every case of every listed file (README rules).
#include "common/test_data.h"
#include "golden.h"

namespace {

void check_model(const std::string& stem, bool ggml_like) {
    REQUIRE_SHARED_DATA();
    golden::Tolerance tol = golden::tolerance(stem, ggml_like);
    REQUIRE(tol.checkable);
    // KV cache F32 without flash attention: the golden's high-precision reference.
    for (const golden::CaseReport& r : golden::run(stem, tol, /*kv_f16=*/false, /*use_hp=*/true)) {
        INFO(stem << ": " << r.describe());
        CHECK(r.prompt_ids_ok);
        CHECK(r.prompt_ids_no_special_ok);
        CHECK(r.logits_ok);
        CHECK(r.greedy_matched == r.greedy_checked);
    }
}

}  // namespace

TEST_CASE("golden: stories260K f32") { check_model("stories260K-f32", false); }
TEST_CASE("golden: stories260K f16") { check_model("stories260K-f16", false); }
TEST_CASE("golden: stories260K q8_0") { check_model("stories260K-q8_0", true); }
TEST_CASE("golden: random-llama f32") { check_model("random-llama-f32", false); }
TEST_CASE("golden: random-llama f16") { check_model("random-llama-f16", false); }
TEST_CASE("golden: random-llama q8_0") { check_model("random-llama-q8_0", true); }
TEST_CASE("golden: random-llama-bpe f32") { check_model("random-llama-bpe-f32", false); }
TEST_CASE("golden: random-llama-bpe f16") { check_model("random-llama-bpe-f16", false); }
TEST_CASE("golden: random-llama-bpe q8_0") { check_model("random-llama-bpe-q8_0", true); }
TEST_CASE("golden: random-qwen2 f32") { check_model("random-qwen2-f32", false); }
TEST_CASE("golden: random-qwen2 f16") { check_model("random-qwen2-f16", false); }
TEST_CASE("golden: random-qwen2 q8_0") { check_model("random-qwen2-q8_0", true); }
TEST_CASE("golden: random-qwen3 f32") { check_model("random-qwen3-f32", false); }
TEST_CASE("golden: random-qwen3 f16") { check_model("random-qwen3-f16", false); }
TEST_CASE("golden: random-qwen3 q8_0") { check_model("random-qwen3-q8_0", true); }

TEST_CASE("golden: every quant type") {
    for (const char* t : {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq4_nl",
                          "iq4_xs", "q4_k_m"}) {
        SECTION(t) { check_model(std::string("quant-") + t, false); }
    }
}
