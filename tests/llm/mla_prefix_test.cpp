// Prefix reuse on MLA models: a second turn that extends the first reuses the latent cache (only the
// new tokens are computed) and gives the logits of a fresh run over the whole sequence.
#include "common/test_data.h"
#include "llm/session.h"
#include "mla_models.h"

#include <catch2/catch.hpp>

#include <cmath>

namespace {

struct Run {
    llm::GenerateResult result;
    std::vector<std::vector<float>> logits;  // every step's full logits
};

Run generate(llm::Session& s, const std::vector<int32_t>& prompt, int max_tokens, const std::vector<int32_t>& forced = {}) {
    Run run;
    llm::GenerateOptions o;
    o.max_tokens = max_tokens;
    o.forced = forced;
    o.stop_at_end = false;
    int n_vocab = s.info().n_vocab;
    o.on_token = [&](const llm::TokenStep& step) {
        run.logits.emplace_back(step.logits, step.logits + n_vocab);
        return true;
    };
    run.result = s.generate(prompt, o);
    return run;
}

// max |a - b| relative to the largest |b|, over every step.
double relative_error(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    REQUIRE(a.size() == b.size());
    double err = 0.0, scale = 0.0;
    for (size_t i = 0; i < a.size(); i++)
        for (size_t j = 0; j < a[i].size(); j++) {
            err = std::max(err, std::fabs(double(a[i][j]) - double(b[i][j])));
            scale = std::max(scale, std::fabs(double(b[i][j])));
        }
    return err / scale;
}

void check_prefix_reuse(const std::string& model_path) {
    llm::SessionOptions so;
    so.model_path = model_path;
    so.n_ctx = 256;
    so.kv_type = gguf::Type::F32;
    auto session = llm::open_session(so);
    const tok::Tokenizer& tk = session->tokenizer();

    std::vector<int32_t> turn1 = tk.encode("<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n", false, true);
    Run r1 = generate(*session, turn1, 6);
    REQUIRE(r1.result.ids.size() == 6);
    CHECK(r1.result.n_reused == 0);

    // Turn 2 extends everything turn 1 saw: its prompt, its answer, a new user message.
    std::vector<int32_t> turn2 = turn1;
    turn2.insert(turn2.end(), r1.result.ids.begin(), r1.result.ids.end());
    std::vector<int32_t> more = tk.encode("<|im_end|>\n<|im_start|>user\nThe quick brown fox?<|im_end|>\n<|im_start|>assistant\n", false, true);
    turn2.insert(turn2.end(), more.begin(), more.end());
    const std::vector<int32_t> forced = {17, 250, 3, 99};
    Run r2 = generate(*session, turn2, int(forced.size()), forced);
    // The cache holds turn 1's prompt and every answer token but the last (no forward pass followed it).
    CHECK(r2.result.n_reused == int(turn1.size() + r1.result.ids.size() - 1));
    CHECK(r2.result.n_prompt - r2.result.n_reused == int(more.size()) + 1);

    session->reset();
    Run fresh = generate(*session, turn2, int(forced.size()), forced);
    CHECK(fresh.result.n_reused == 0);
    CHECK(relative_error(r2.logits, fresh.logits) < 1e-4);

    // A regenerate of turn 1's answer reuses its prompt only, and matches turn 1.
    Run again = generate(*session, turn1, 6);
    CHECK(again.result.n_reused == int(turn1.size()) - 1);
    CHECK(again.result.ids == r1.result.ids);
    CHECK(relative_error(again.logits, r1.logits) < 1e-4);
}

}  // namespace

TEST_CASE("mla: prefix reuse on deepseek2 attention recomputes only new tokens") {
    REQUIRE_SHARED_DATA();
    check_prefix_reuse(mla_models::path("deepseek2-dense-f32"));
}

TEST_CASE("mla: prefix reuse on random-deepseek2 (MLA + MoE) recomputes only new tokens") {
    REQUIRE_SHARED_DATA();
    check_prefix_reuse(test_data::shared("models/random-deepseek2-f32.gguf"));
}
