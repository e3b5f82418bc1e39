// deepseek2 (MLA + MoE) against llama.cpp's goldens: every case of every file (README rules, MoE class).
// F16 and Q8_0 files use the ggml-like tolerances when the hand kernels round activations as ggml does
// (F16 before F16 weights, Q8_0 blocks before Q8_0 weights); with F32 activations a Q8_0 MoE file would not
// be checkable by logits (expert routing differs from the first step), which fails the test.
#include "common/test_data.h"
#include "golden.h"

namespace {

void check_model(const std::string& stem, bool ggml_like) {
    REQUIRE_SHARED_DATA();
    golden::Tolerance tol = golden::tolerance(stem, ggml_like);
    REQUIRE(tol.checkable);  // an uncheckable golden fails
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

TEST_CASE("golden: random-deepseek2 f32") { check_model("random-deepseek2-f32", false); }
TEST_CASE("golden: random-deepseek2 f16") { check_model("random-deepseek2-f16", true); }
TEST_CASE("golden: random-deepseek2 q8_0") { check_model("random-deepseek2-q8_0", true); }
