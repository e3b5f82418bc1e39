// Conversation state: a follow-up turn reuses what the session holds (attention caches: any common
// prefix; recurrent state: the live state or a checkpoint at a turn boundary) and gives the same logits
// as a fresh run over the whole sequence, recomputing only the new tokens.
#include "common/test_data.h"
#include "llm/session.h"

#include <algorithm>
#include <cmath>

namespace {

struct Run {
    std::vector<int32_t> ids;
    std::vector<std::vector<float>> logits;  // per step
    llm::GenerateResult result;
};

// Greedy (or teacher-forced with `forced`) generation of n tokens, keeping every step's logits.
Run generate(llm::Session& s, const std::vector<int32_t>& prompt, int n, const std::vector<int32_t>& forced = {}) {
    Run r;
    llm::GenerateOptions o;
    o.max_tokens = n;
    o.stop_at_end = false;
    o.forced = forced;
    int n_vocab = s.info().n_vocab;
    o.on_token = [&](const llm::TokenStep& st) {
        r.logits.emplace_back(st.logits, st.logits + n_vocab);
        return true;
    };
    r.result = s.generate(prompt, o);
    r.ids = r.result.ids;
    return r;
}

// max |a - b| relative to the largest |b|, over all steps.
double rel_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    REQUIRE(a.size() == b.size());
    double num = 0, den = 1e-30;
    for (size_t i = 0; i < a.size(); i++)
        for (size_t j = 0; j < a[i].size(); j++) {
            num = std::max(num, double(std::fabs(a[i][j] - b[i][j])));
            den = std::max(den, double(std::fabs(b[i][j])));
        }
    return num / den;
}

std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

struct Fixture {
    std::unique_ptr<llm::Session> live, fresh;
    std::vector<int32_t> p1, extra;
    explicit Fixture(const std::string& model, int n_checkpoints = 4) {
        llm::SessionOptions so;
        so.model_path = test_data::shared("models/" + model);
        so.n_ctx = 256;
        so.kv_type = gguf::Type::F32;
        so.n_checkpoints = n_checkpoints;
        live = llm::open_session(so);
        fresh = llm::open_session(so);
        p1 = live->tokenizer().encode("The quick brown fox jumps over the lazy dog.", true, true);
        extra = live->tokenizer().encode(" 12345 + 678 = ?", false, false);
    }
    Run fresh_run(const std::vector<int32_t>& prompt, int n, const std::vector<int32_t>& forced = {}) {
        fresh->reset();
        return generate(*fresh, prompt, n, forced);
    }
};

void follow_up_turn(const std::string& model) {
    REQUIRE_SHARED_DATA();
    Fixture f(model);
    Run turn1 = generate(*f.live, f.p1, 6);
    std::vector<int32_t> p2 = cat(cat(f.p1, turn1.ids), f.extra), forced = {5, 17, 9, 101};
    Run turn2 = generate(*f.live, p2, 4, forced);
    // Everything fed in turn 1 (its prompt and all generated tokens but the last) is reused.
    CHECK(turn2.result.n_reused == int(f.p1.size() + turn1.ids.size() - 1));
    CHECK(rel_diff(turn2.logits, f.fresh_run(p2, 4, forced).logits) < 1e-4);
}

}  // namespace

TEST_CASE("prefix reuse: attention model, turn 2 after turn 1 equals a fresh run") { follow_up_turn("random-qwen3-f32.gguf"); }
TEST_CASE("prefix reuse: hybrid model, turn 2 after turn 1 equals a fresh run") { follow_up_turn("random-qwen35-f32.gguf"); }

TEST_CASE("prefix reuse: hybrid model, a regenerate resumes from the end-of-prompt checkpoint") {
    REQUIRE_SHARED_DATA();
    Fixture f("random-qwen35-f32.gguf");
    Run turn1 = generate(*f.live, f.p1, 6);
    Run again = generate(*f.live, f.p1, 6);
    CHECK(again.result.n_reused == int(f.p1.size()));  // not even the last prompt token is recomputed
    CHECK(again.ids == turn1.ids);
    CHECK(rel_diff(again.logits, turn1.logits) < 1e-6);
}

TEST_CASE("prefix reuse: hybrid model, an edited answer resumes from the end-of-prompt checkpoint") {
    REQUIRE_SHARED_DATA();
    Fixture f("random-qwen35-f32.gguf");
    Run turn1 = generate(*f.live, f.p1, 6);
    // The client sends back a different answer than the one generated (the live state cannot be used).
    std::vector<int32_t> edited = cat(f.p1, {turn1.ids[0] == 7 ? 8 : 7, 300, 12}), p2 = cat(edited, f.extra);
    Run turn2 = generate(*f.live, p2, 3);
    CHECK(turn2.result.n_reused == int(f.p1.size()));
    CHECK(rel_diff(turn2.logits, f.fresh_run(p2, 3, turn2.ids).logits) < 1e-4);
}

TEST_CASE("prefix reuse: hybrid model, an edited follow-up resumes from the end-of-generation checkpoint") {
    REQUIRE_SHARED_DATA();
    Fixture f("random-qwen35-f32.gguf");
    Run turn1 = generate(*f.live, f.p1, 6);
    std::vector<int32_t> history = cat(f.p1, turn1.ids);
    generate(*f.live, cat(history, f.extra), 3);
    // The user rewrites the follow-up message: the history up to the end of turn 1 stays.
    std::vector<int32_t> p2 = cat(history, f.live->tokenizer().encode(" Once upon a time", false, false));
    Run turn2 = generate(*f.live, p2, 3);
    CHECK(turn2.result.n_reused == int(history.size() - 1));
    CHECK(rel_diff(turn2.logits, f.fresh_run(p2, 3, turn2.ids).logits) < 1e-4);
}

TEST_CASE("prefix reuse: hybrid model, a prompt diverging before every checkpoint starts over") {
    REQUIRE_SHARED_DATA();
    Fixture f("random-qwen35-f32.gguf");
    generate(*f.live, f.p1, 4);
    std::vector<int32_t> p2 = f.p1;
    p2[p2.size() / 2] = p2[p2.size() / 2] == 40 ? 41 : 40;
    Run r = generate(*f.live, p2, 3);
    CHECK(r.result.n_reused == 0);
    CHECK(rel_diff(r.logits, f.fresh_run(p2, 3, r.ids).logits) < 1e-6);
}

TEST_CASE("prefix reuse: hybrid model without checkpoints recomputes a regenerate from the start") {
    REQUIRE_SHARED_DATA();
    Fixture f("random-qwen35-f32.gguf", /*n_checkpoints=*/0);
    Run turn1 = generate(*f.live, f.p1, 4);
    Run again = generate(*f.live, f.p1, 4);
    CHECK(again.result.n_reused == 0);  // the live state is past the prompt and nothing else is kept
    CHECK(again.ids == turn1.ids);
    CHECK(rel_diff(again.logits, turn1.logits) < 1e-6);
}
