// The sampler: turns one step's raw logits into a token id (logit bias, presence/frequency penalties,
// top-k, top-p, min-p, temperature, a seeded draw; temperature 0 = greedy, first maximum on ties) and
// describes a step with log-probabilities of the raw, unmodified distribution.
#pragma once

#include "llm/session.h"

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

namespace llm {

class Sampler {
public:
    explicit Sampler(SamplingParams params);

    // Picks the next id. The order follows llama.cpp's default chain: bias, penalties, top-k, top-p,
    // min-p (these three on the temperature-1 distribution), then temperature and the draw.
    int32_t sample(std::span<const float> logits);
    // Records an id that became part of the output (sampled or forced): the penalties count it.
    void accept(int32_t id);
    const SamplingParams& params() const { return params_; }

private:
    SamplingParams params_;
    std::mt19937_64 rng_;
    std::unordered_map<int32_t, int> n_seen_;                // generated id -> how often
    std::vector<float> adjusted_;                            // (n_vocab) scratch
    std::vector<std::pair<float, int32_t>> candidates_;     // (logit, id) scratch
};

// First maximum (lowest id among equal maxima).
int32_t argmax(std::span<const float> logits);

// The record of a step that produced `id`: its log-softmax over the raw logits, the n_top_logprobs most
// likely ids with their log-probabilities and the n_top_logits largest raw logits (ties: lower id first).
TokenStep describe_step(std::span<const float> logits, int32_t id, int n_top_logprobs, int n_top_logits, bool logprob = true);

}  // namespace llm
