// Multi-head latent attention and RoPE scaling against llama.cpp, on the derived models of mla_models.h
// (MLA without MoE, Kimi's MLA layer without q LoRA, YaRN and linear scaling). The reference logits in
// tests/llm/mla_refs/<model>.json come from tests/llm/mla_refs/make.sh (llama.cpp, KV F32, no flash
// attention); the rules are the goldens' with the dense class's τ, since these models have dense FFNs.
#include "common/test_data.h"
#include "golden.h"
#include "mla_models.h"

#include <cstdlib>
#include <fstream>

namespace {

void check(const std::string& name, double tau) {
    REQUIRE_SHARED_DATA();
    std::ifstream in(test_data::source_dir() + "/tests/llm/mla_refs/" + name + ".json");
    REQUIRE(in);
    golden::Tolerance tol;
    tol.tau = tau;
    for (const golden::CaseReport& r : golden::run_file(mla_models::path(name), nlohmann::json::parse(in), tol, false, true)) {
        INFO(name << ": " << r.describe());
        CHECK(r.prompt_ids_ok);
        CHECK(r.logits_ok);
        CHECK(r.greedy_matched == r.greedy_checked);
    }
}

}  // namespace

TEST_CASE("mla: deepseek2 attention f32 matches llama.cpp") { check("deepseek2-dense-f32", 0.02); }
// The CPU rounds activations as ggml does (F16 before F16 weights, Q8_0 blocks before Q8_0 weights):
// the goldens' ggml-like τ.
TEST_CASE("mla: deepseek2 attention f16 matches llama.cpp") { check("deepseek2-dense-f16", 0.01); }
TEST_CASE("mla: deepseek2 attention q8_0 matches llama.cpp") { check("deepseek2-dense-q8_0", 0.15); }
TEST_CASE("mla: deepseek2 attention with YaRN (mscale_all_dim 0.707) matches llama.cpp") { check("deepseek2-dense-yarn-f32", 0.02); }
TEST_CASE("mla: deepseek2 attention with YaRN (mscale_all_dim 1) matches llama.cpp") { check("deepseek2-dense-yarn1-f32", 0.02); }
TEST_CASE("mla: kimi-linear's MLA layer without q LoRA matches llama.cpp") { check("deepseek2-no-q-lora-f32", 0.02); }
TEST_CASE("mla: llama attention with YaRN matches llama.cpp") { check("llama-yarn-f32", 0.02); }
TEST_CASE("mla: llama attention with linear RoPE scaling matches llama.cpp") { check("llama-linear-f32", 0.02); }

// Not a check: writes every derived model for tests/llm/mla_refs/make.sh.
TEST_CASE("mla: write the derived models to MLA_MODELS_DIR", "[.write]") {
    REQUIRE_SHARED_DATA();
    const char* dir = std::getenv("MLA_MODELS_DIR");
    REQUIRE(dir);
    for (const std::string& name : mla_models::names()) mla_models::write(name, std::string(dir) + "/" + name + ".gguf");
}
