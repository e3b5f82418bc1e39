// Kimi's MLA layers carry no position encoding at all. With a single MLA layer the last token attends to
// the set of earlier keys, so its logits cannot depend on their order; the same weights as a deepseek2
// model (RoPE on the rope part) must depend on it. (llama.cpp cannot run kimi-linear without its recurrent
// layers; the full model is checked against its goldens in golden_hybrid_test.cpp.)
#include "common/test_data.h"
#include "llm/session.h"
#include "mla_models.h"

#include <catch2/catch.hpp>

#include <cmath>

namespace {

std::vector<float> last_logits(llm::Session& s, const std::vector<int32_t>& prompt) {
    std::vector<float> logits;
    llm::GenerateOptions o;
    o.max_tokens = 1;
    o.stop_at_end = false;
    o.on_token = [&](const llm::TokenStep& step) {
        logits.assign(step.logits, step.logits + s.info().n_vocab);
        return true;
    };
    s.reset();
    s.generate(prompt, o);
    return logits;
}

// max |a - b| relative to the largest |a|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0.0, scale = 0.0;
    for (size_t i = 0; i < a.size(); i++) d = std::max(d, std::fabs(double(a[i]) - b[i])), scale = std::max(scale, std::fabs(double(a[i])));
    return d / scale;
}

double order_effect(const std::string& model) {
    llm::SessionOptions so;
    so.model_path = mla_models::path(model);
    so.n_ctx = 64;
    so.kv_type = gguf::Type::F32;
    auto s = llm::open_session(so);
    return relative_difference(last_logits(*s, {39, 68, 454, 120, 450}), last_logits(*s, {454, 120, 39, 68, 450}));
}

}  // namespace

TEST_CASE("mla: kimi-linear's MLA layer has no position encoding") {
    REQUIRE_SHARED_DATA();
    CHECK(order_effect("kimi-mla-f32") < 1e-5);
    CHECK(order_effect("deepseek2-no-q-lora-f32") > 1e-3);  // the same weights with RoPE
}
