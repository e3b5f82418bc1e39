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

// Until the MoE and MLA branches are merged, Model::load rejects qwen3next, qwen35moe and kimi-linear with
// exactly these messages; the case is then skipped loudly. Once they are merged the messages no longer
// exist and every case runs (verified on a merge of h/mla, which carries h/moe).
bool waits_for_moe_or_mla(const std::string& stem) {
    try {
        llm::Model::load(test_data::shared("models/" + stem + ".gguf"));
    } catch (const std::exception& e) {
        std::string what = e.what();
        bool waiting = what.find("a mixture-of-experts feed-forward") != std::string::npos ||
                       what.find("layer kind 'mla'") != std::string::npos;
        if (waiting) WARN(stem << ": skipped until MoE/MLA support is merged: " << what);
        return waiting;
    }
    return false;
}

void check_model(const std::string& stem) {
    REQUIRE_SHARED_DATA();
    if (waits_for_moe_or_mla(stem)) return;
    const bool ggml_like = golden::ggml_like_activations(stem);
    golden::Tolerance tol = golden::tolerance(stem, ggml_like);
    // MoE Q8_0 files: with F32 activations the expert routing differs from ggml's from the first step
    // (golden README), so only their tokenization is comparable until linear quantizes activations.
    if (!tol.checkable) WARN(stem << ": logits not checkable with F32 activations; checking tokenization only");
    for (const golden::CaseReport& r : golden::run(stem, tol, /*kv_f16=*/false, /*use_hp=*/true)) {
        INFO(stem << ": " << r.describe());
        CHECK(r.prompt_ids_ok);
        CHECK(r.prompt_ids_no_special_ok);
        if (!tol.checkable || (!ggml_like && NEEDS_GGML_ROUNDING.count({stem, r.prompt}))) continue;
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
