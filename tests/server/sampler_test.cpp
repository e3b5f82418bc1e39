// The sampler (llm/sampler.h): greedy ties, filters, penalties, bias, seeds and raw logprobs.
#include "llm/sampler.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>

using llm::Sampler;
using llm::SamplingParams;

TEST_CASE("sampler: greedy picks the first maximum") {
    Sampler s(SamplingParams{});
    std::vector<float> z = {1.0f, 3.0f, 2.0f, 3.0f};
    CHECK(s.sample(z) == 1);
    CHECK(llm::argmax(z) == 1);
}

TEST_CASE("sampler: logit bias and penalties change the greedy choice") {
    SamplingParams p;
    p.logit_bias[3] = 0.5f;
    Sampler biased(p);
    CHECK(biased.sample(std::vector<float>{1.0f, 3.0f, 2.0f, 3.0f}) == 3);

    SamplingParams q;
    q.presence_penalty = 0.6f;
    q.frequency_penalty = 0.5f;
    Sampler penalized(q);
    std::vector<float> z = {0.0f, 2.0f, 1.0f};
    CHECK(penalized.sample(z) == 1);
    penalized.accept(1);  // 2 - 0.5 - 0.6 = 0.9 < 1
    CHECK(penalized.sample(z) == 2);
}

TEST_CASE("sampler: top-k 1 is greedy whatever the temperature") {
    SamplingParams p;
    p.temperature = 5.0f;
    p.top_k = 1;
    p.seed = 7;
    Sampler s(p);
    for (int i = 0; i < 50; i++) CHECK(s.sample(std::vector<float>{0.1f, 0.2f, 0.3f, 0.25f}) == 2);
}

TEST_CASE("sampler: top-p and min-p cut the unlikely tail") {
    // probabilities ~ {0.665, 0.245, 0.090}: top_p 0.8 keeps ids 0 and 1; min_p 0.3 keeps 0 and 1 too.
    std::vector<float> z = {2.0f, 1.0f, 0.0f};
    for (auto setup : {0, 1}) {
        SamplingParams p;
        p.temperature = 1.0f;
        p.seed = 42;
        if (setup == 0) p.top_p = 0.8f;
        else p.min_p = 0.3f;
        Sampler s(p);
        std::map<int, int> seen;
        for (int i = 0; i < 400; i++) seen[s.sample(z)]++;
        CHECK(seen[2] == 0);
        CHECK(seen[0] > seen[1]);
        CHECK(seen[1] > 0);
    }
}

TEST_CASE("sampler: the same seed draws the same sequence, another seed another one") {
    std::vector<float> z(64);
    for (size_t i = 0; i < z.size(); i++) z[i] = float(i % 7) * 0.3f;
    auto draw = [&](uint64_t seed) {
        SamplingParams p;
        p.temperature = 1.0f;
        p.top_k = 0;
        p.top_p = 1.0f;
        p.seed = seed;
        Sampler s(p);
        std::vector<int32_t> ids;
        for (int i = 0; i < 32; i++) ids.push_back(s.sample(z));
        return ids;
    };
    CHECK(draw(1) == draw(1));
    CHECK(draw(1) != draw(2));
}

TEST_CASE("sampler: describe_step gives log-softmax of the raw logits") {
    std::vector<float> z = {0.0f, std::log(3.0f), 0.0f};  // probabilities 0.2, 0.6, 0.2
    llm::TokenStep step = llm::describe_step(z, 2, 2, 3);
    CHECK(step.logprob == Approx(std::log(0.2)));
    REQUIRE(step.top_logprobs.size() == 2);
    CHECK(step.top_logprobs[0].first == 1);
    CHECK(step.top_logprobs[0].second == Approx(std::log(0.6)));
    CHECK(step.top_logprobs[1].first == 0);  // tie between 0 and 2: the lower id first
    REQUIRE(step.top_logits.size() == 3);
    CHECK(step.top_logits[2].first == 2);
}
