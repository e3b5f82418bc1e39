// Hybrid models (GatedDeltaNet / KDA layers beside attention) against llama.cpp's goldens: every case
// of every file type (README rules), KV cache F32 against the golden's high-precision logits.
#include "common/test_data.h"
#include "golden.h"
#include "llm/model.h"

#include <set>
#include <utility>

namespace {

// ../shared/models/README.md: in random-kimi-linear-f16, llama.cpp's own F16 activation rounding flips
// an expert choice inside this prompt and moves 13 of 32 steps beyond the MoE allowance; the logits of
// that case are checkable only when activations are rounded to F16 as ggml does (tokenization always).
const std::set<std::pair<std::string, std::string>> NEEDS_GGML_ROUNDING = {{"random-kimi-linear-f16", "12345 + 678 = ?"}};

void check_model(const std::string& stem) {
    REQUIRE_SHARED_DATA();
    const bool ggml_like = golden::ggml_like_activations(stem);
    golden::Tolerance tol = golden::tolerance(stem, ggml_like);
    // MoE Q8_0 files: with F32 activations the expert routing differs from ggml's from the first step
    // (golden README); our linear quantizes activations like ggml, so every file must be checkable.
    INFO(stem << ": ggml-like activations " << ggml_like);
    REQUIRE(tol.checkable);
    for (const golden::CaseReport& r : golden::run(stem, tol, /*kv_f16=*/false, /*use_hp=*/true)) {
        INFO(stem << ": " << r.describe());
        CHECK(r.prompt_ids_ok);
        CHECK(r.prompt_ids_no_special_ok);
        if (!ggml_like && NEEDS_GGML_ROUNDING.count({stem, r.prompt})) continue;
        CHECK(r.logits_ok);
        CHECK(r.greedy_matched == r.greedy_checked);
    }
}

}  // namespace

TEST_CASE("golden: random-qwen35 f32") { check_model("random-qwen35-f32"); }
TEST_CASE("golden: random-qwen35 f16") { check_model("random-qwen35-f16"); }
TEST_CASE("golden: random-qwen35 q8_0") { check_model("random-qwen35-q8_0"); }
TEST_CASE("golden: random-qwen3next f32") { check_model("random-qwen3next-f32"); }
TEST_CASE("golden: random-qwen3next f16") { check_model("random-qwen3next-f16"); }
TEST_CASE("golden: random-qwen3next q8_0") { check_model("random-qwen3next-q8_0"); }
TEST_CASE("golden: random-qwen35moe f32") { check_model("random-qwen35moe-f32"); }
TEST_CASE("golden: random-qwen35moe f16") { check_model("random-qwen35moe-f16"); }
TEST_CASE("golden: random-qwen35moe q8_0") { check_model("random-qwen35moe-q8_0"); }
TEST_CASE("golden: random-kimi-linear f32") { check_model("random-kimi-linear-f32"); }
TEST_CASE("golden: random-kimi-linear f16") { check_model("random-kimi-linear-f16"); }
TEST_CASE("golden: random-kimi-linear q8_0") { check_model("random-kimi-linear-q8_0"); }
