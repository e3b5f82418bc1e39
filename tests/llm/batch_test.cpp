// Results do not depend on company (issue #14): four prompts decoded together by the BatchRunner
// (greedy, 32 tokens, staggered starts so steps mix prefill chunks and decode tokens) give the same
// ids as each prompt alone through llm::Session, up to a near tie of the lone run's top two logits;
// no step after the first compiles anything (one capture with a symbolic token count serves every mix).
// Recurrent layers carry one state per sequence, so their prefill chunks test that it carries over steps.
#include "common/test_data.h"
#include "llm/company.h"
#include "engine/tensor.h"
#include "llm/batch.h"
#include "llm/sampler.h"
#include "llm/session.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace {

const char* PROMPTS[] = {"Once upon a time, there was a little girl", "The cat sat", "One day, a big dog named Max went to the park to play with",
                         "Lily"};
constexpr int N_GEN = 32;

struct Run {
    std::vector<std::vector<int32_t>> prompts, alone, together;
    std::vector<std::vector<float>> margins, tops;
    std::vector<std::vector<std::vector<float>>> lone_logits, together_logits;  // per prompt, per step
    int steady_steps = 0;  // steps with all four decoding, after the one that captured them
    bool compiled_in_steady_state = false;
    bool compiled_after_first = false;  // any step after the first one
};

Run run(const std::string& path, gguf::Type kv) {
    Run r;
    llm::SessionOptions so;
    so.model_path = path;
    so.n_ctx = 256;
    so.kv_type = kv;
    auto session = llm::open_session(so);
    for (const char* p : PROMPTS) {
        r.prompts.push_back(session->tokenizer().encode(p, true, true));
        llm::GenerateOptions go;
        go.max_tokens = N_GEN;
        go.stop_at_end = false;
        std::vector<float> margins, tops;  // per step: the gap between the two largest logits of the lone run, the largest
        std::vector<std::vector<float>> logits;
        go.on_token = [&](const llm::TokenStep& st) {
            logits.emplace_back(st.logits, st.logits + session->info().n_vocab);
            float a = -1e30f, b = -1e30f;
            for (int v = 0; v < session->info().n_vocab; v++) {
                const float l = st.logits[v];
                if (l > a) b = a, a = l;
                else if (l > b) b = l;
            }
            margins.push_back(a - b), tops.push_back(a);
            return true;
        };
        session->reset();
        r.alone.push_back(session->generate(r.prompts.back(), go).ids);
        r.margins.push_back(margins), r.tops.push_back(tops), r.lone_logits.push_back(logits);
    }

    auto model = llm::Model::load(path);
    llm::BatchOptions bo;
    bo.n_ctx = 128, bo.max_seqs = 4, bo.token_budget = 8, bo.kv_type = kv;  // budget 8: long prompts go in chunks
    llm::BatchRunner runner(*model, bo);
    std::map<int, std::vector<int32_t>> out;  // greedy ids per sequence
    std::map<int, std::vector<std::vector<float>>> out_logits;
    auto add = [&](size_t i) {
        llm::BatchRequest q;
        q.prompt = r.prompts[i], q.max_tokens = N_GEN;
        return runner.add(q);
    };
    auto step = [&] {  // one step, the greedy choice for every sequence it served; how many ended
        int ended = 0;
        for (const llm::SeqLogits& l : runner.step()) {
            std::vector<int32_t>& ids = out[l.id];
            ids.push_back(llm::argmax(l.logits));
            out_logits[l.id].emplace_back(l.logits.begin(), l.logits.end());
            if (int(ids.size()) == N_GEN) runner.finish(l.id), ended++;
            else REQUIRE(runner.push(l.id, ids.back()));
        }
        return ended;
    };
    std::vector<int> ids = {add(0), add(1)};
    step();  // captures the graph: no later step, whatever its mix of tokens, compiles or schedules again
    const uint64_t first_compiles = engine::stats().compiles, first_schedules = engine::stats().schedules;
    for (int i = 0; i < 2; i++) step();
    ids.push_back(add(2)), ids.push_back(add(3));
    // by the 6th step from here all four decode (4 tokens a step): record the counters, then no step
    // until the first sequence ends may compile or schedule anything
    int steps = 0, ended = 0;
    uint64_t compiles = 0, schedules = 0;
    while (!runner.idle()) {
        const int ended_now = step();
        if (++steps == 6) compiles = engine::stats().compiles, schedules = engine::stats().schedules;
        if (steps > 6 && ended == 0 && ended_now == 0) {
            r.steady_steps++;
            r.compiled_in_steady_state |= engine::stats().compiles != compiles || engine::stats().schedules != schedules;
        }
        ended += ended_now;
    }
    for (int id : ids) r.together.push_back(out[id]), r.together_logits.push_back(out_logits[id]);
    r.compiled_after_first = engine::stats().compiles != first_compiles || engine::stats().schedules != first_schedules;
    return r;
}

void check(const std::string& path, gguf::Type kv = gguf::Type::F16) {
    INFO(path << " (" << gguf::type_name(kv) << " KV)");
    Run r = run(path, kv);
    for (size_t i = 0; i < r.prompts.size(); i++) {
        INFO("prompt " << i << ": " << r.prompts[i].size() << " tokens");
        REQUIRE(r.alone[i].size() == size_t(N_GEN));
        REQUIRE(r.together[i].size() == size_t(N_GEN));
        // Logits within the tolerance while the tokens are the same; equal ids, or equal up to a step where
        // the lone run's two largest logits nearly tie (within twice the tolerance): the batch's matmuls,
        // prefill attention and delta-rule chunks round differently from a lone token's, so logits agree to
        // rounding, not bit for bit (random-qwen3-f16, prompt 0: step 31, top two 0.5625 and 0.5623).
        size_t first = 0;
        while (first < size_t(N_GEN) && r.alone[i][first] == r.together[i][first]) first++;
        INFO("first difference at step " << first << " of " << N_GEN << "; lone top logit " << (first < size_t(N_GEN) ? r.tops[i][first] : 0.0f));
        const float tol = test_data::batch_logit_tolerance(path, kv);
        float dev = 0;  // the largest logit difference while both runs had the same tokens, relative to the top logit
        for (size_t st = 0; st <= std::min(first, size_t(N_GEN) - 1); st++)
            for (size_t v = 0; v < r.lone_logits[i][st].size(); v++)
                dev = std::max(dev, std::fabs(r.lone_logits[i][st][v] - r.together_logits[i][st][v]) / std::max(1.0f, std::fabs(r.tops[i][st])));
        CHECK(dev <= tol);
        if (first < size_t(N_GEN)) CHECK(r.margins[i][first] <= 2 * tol * std::max(1.0f, std::fabs(r.tops[i][first])));
    }
    CHECK(r.steady_steps >= 16);
    CHECK_FALSE(r.compiled_in_steady_state);
    CHECK_FALSE(r.compiled_after_first);
}

}  // namespace

TEST_CASE("batch: stories260K decodes four prompts together exactly as alone, and no step after the first compiles") {
    check(test_data::builtin_model(), gguf::Type::F16);
    check(test_data::builtin_model(), gguf::Type::F32);
}

TEST_CASE("batch: random llama, qwen2 and qwen3 decode four prompts together as alone (up to near ties)") {
    REQUIRE_SHARED_DATA();
    for (const char* m : {"random-llama-q8_0", "random-qwen2-f16", "random-qwen3-f16"}) check(test_data::shared(std::string("models/") + m + ".gguf"));
}

TEST_CASE("batch: random qwen3moe and olmoe (mixtures of experts) decode four prompts together as alone (up to near ties)") {
    REQUIRE_SHARED_DATA();
    for (const char* m : {"random-qwen3moe-q8_0", "random-olmoe-f32"}) check(test_data::shared(std::string("models/") + m + ".gguf"));
}

TEST_CASE("batch: random gpt-oss (sinks, sliding windows, MXFP4 experts) decodes four prompts together as alone (up to near ties)") {
    REQUIRE_SHARED_DATA();
    for (const char* m : {"random-gpt-oss-f32", "random-gpt-oss-mxfp4"}) check(test_data::shared(std::string("models/") + m + ".gguf"));
}

TEST_CASE("batch: random deepseek2 and glm4moe (MLA through a paged latent pool) decode four prompts together as alone (up to near ties)") {
    REQUIRE_SHARED_DATA();
    for (const char* m : {"random-deepseek2-f32", "random-deepseek2-q8_0", "random-glm4moe-f32"}) check(test_data::shared(std::string("models/") + m + ".gguf"));
}

TEST_CASE("batch: random qwen3next, qwen35, qwen35moe and kimi-linear (recurrent states per sequence) decode four prompts together as alone") {
    REQUIRE_SHARED_DATA();
    for (const char* m : {"random-qwen3next-f32", "random-qwen3next-q8_0", "random-qwen35-f16", "random-qwen35moe-q8_0", "random-kimi-linear-f32"})
        check(test_data::shared(std::string("models/") + m + ".gguf"));
}

TEST_CASE("batch: with q8_0 and q4_0 KV caches, random qwen2, glm4moe and qwen3next decode four prompts together as alone") {
    REQUIRE_SHARED_DATA();
    for (gguf::Type kv : {gguf::Type::Q8_0, gguf::Type::Q4_0})
        for (const char* m : {"random-qwen2-f32", "random-glm4moe-f16", "random-qwen3next-f32"}) check(test_data::shared(std::string("models/") + m + ".gguf"), kv);
}

namespace {

// Greedy: the logits after the prompt and after each generated token (n_gen of them in all).
std::vector<std::vector<float>> greedy_logits(llm::BatchRunner& runner, const std::vector<int32_t>& prompt, int n_gen,
                                              std::vector<int32_t>* generated = nullptr) {
    llm::BatchRequest q;
    q.prompt = prompt, q.max_tokens = n_gen;
    const int id = runner.add(q);
    std::vector<std::vector<float>> out;
    while (int(out.size()) < n_gen)
        for (const llm::SeqLogits& l : runner.step()) {
            REQUIRE(l.id == id);
            out.emplace_back(l.logits.begin(), l.logits.end());
            if (generated) generated->push_back(llm::argmax(l.logits));
            if (int(out.size()) == n_gen) runner.finish(id);
            else REQUIRE(runner.push(id, llm::argmax(l.logits)));
        }
    return out;
}

float max_relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    float top = 1, d = 0;
    for (size_t i = 0; i < a.size(); i++) top = std::max(top, std::fabs(a[i])), d = std::max(d, std::fabs(a[i] - b[i]));
    return d / top;
}

}  // namespace

TEST_CASE("batch: a recurrent model resumes a repeated prompt or the next turn from a checkpoint of its state") {
    REQUIRE_SHARED_DATA();
    for (const char* m : {"random-qwen3next-f32", "random-kimi-linear-f32"}) {
        INFO(m);
        auto model = llm::Model::load(test_data::shared(std::string("models/") + m + ".gguf"));
        llm::BatchOptions bo;
        bo.n_ctx = 128, bo.max_seqs = 2, bo.token_budget = 16;
        llm::BatchRunner runner(*model, bo);
        bo.prefix_cache = false;
        llm::BatchRunner fresh(*model, bo);  // every prompt from scratch
        std::vector<int32_t> prompt(40);
        for (size_t i = 0; i < prompt.size(); i++) prompt[i] = int32_t(10 + 7 * i % 50);

        // Turn 1 saves the state after 32 prompt tokens (the last block boundary before its last token)
        // and, generating to position 69, after 64.
        std::vector<int32_t> reply;
        const auto first = greedy_logits(runner, prompt, 30, &reply);
        CHECK(runner.stats().checkpoints == 2);
        CHECK(runner.stats().prefix_hit_tokens == 0);
        // The same prompt again (a regenerate): 32 positions from the cache, the same logits.
        const auto again = greedy_logits(runner, prompt, 1);
        CHECK(runner.stats().prefix_hit_tokens == 32);
        CHECK(max_relative_difference(again[0], first[0]) <= 1e-5f);
        // The next turn (the conversation so far plus new tokens) resumes after 64.
        std::vector<int32_t> turn2 = prompt;
        turn2.insert(turn2.end(), reply.begin(), reply.end() - 1);  // the last reply token was never fed
        for (int i = 0; i < 10; i++) turn2.push_back(int32_t(60 + i));
        const auto resumed = greedy_logits(runner, turn2, 4);
        CHECK(runner.stats().prefix_hit_tokens == 32 + 64);
        const auto scratch = greedy_logits(fresh, turn2, 4);
        CHECK(fresh.stats().prefix_hit_tokens == 0);
        for (size_t i = 0; i < resumed.size(); i++) CHECK(max_relative_difference(resumed[i], scratch[i]) <= 1e-3f);
        // A prompt that shares only its first block has no checkpoint there: computed from scratch.
        std::vector<int32_t> other(prompt.begin(), prompt.begin() + 20);
        other.insert(other.end(), 20, 3);
        const int64_t hits = runner.stats().prefix_hit_tokens;
        const auto other_logits = greedy_logits(runner, other, 1);
        CHECK(runner.stats().prefix_hit_tokens == hits);
        CHECK(max_relative_difference(other_logits[0], greedy_logits(fresh, other, 1)[0]) <= 1e-5f);
    }
}

TEST_CASE("batch: a prompt longer than n_ctx is refused when added, a long max_tokens is cut at n_ctx") {
    auto model = llm::Model::load(test_data::builtin_model());
    llm::BatchOptions bo;
    bo.n_ctx = 16;
    llm::BatchRunner runner(*model, bo);
    llm::BatchRequest q;
    q.prompt = std::vector<int32_t>(17, 1), q.max_tokens = 1;
    CHECK_THROWS_WITH(runner.add(q), Catch::StartsWith("[batch] the prompt has 17 tokens, more than n_ctx 16"));
    q.prompt = std::vector<int32_t>(10, 1), q.max_tokens = 100;
    const int id = runner.add(q);
    int pushed = 0;
    for (int i = 0; i < 20 && !runner.idle(); i++)
        for (const llm::SeqLogits& l : runner.step()) {
            if (runner.push(l.id, 1)) pushed++;
            else runner.finish(id);
        }
    CHECK(runner.idle());
    CHECK(pushed == 16 - 10);  // positions 10..15
}
