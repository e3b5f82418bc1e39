// Sampling from raw logits; see sampler.h for the order of the steps.
#include "llm/sampler.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace llm {

namespace {

bool more_likely(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// Largest n (logit, id) pairs, most likely first.
std::vector<std::pair<float, int32_t>> top_n(std::span<const float> logits, int n) {
    std::vector<std::pair<float, int32_t>> all(logits.size());
    for (size_t i = 0; i < logits.size(); i++) all[i] = {logits[i], int32_t(i)};
    size_t k = std::min<size_t>(size_t(std::max(n, 0)), all.size());
    std::partial_sort(all.begin(), all.begin() + k, all.end(), more_likely);
    all.resize(k);
    return all;
}

double log_sum_exp(std::span<const float> logits) {
    float max = -std::numeric_limits<float>::infinity();
    for (float l : logits) max = std::max(max, l);
    if (!std::isfinite(max)) return max;
    double sum = 0.0;
    for (float l : logits) sum += std::exp(double(l) - max);
    return max + std::log(sum);
}

}  // namespace

Sampler::Sampler(SamplingParams params) : params_(std::move(params)), rng_(params_.seed) {}

void Sampler::accept(int32_t id) { n_seen_[id]++; }

int32_t Sampler::sample(std::span<const float> logits) {
    assert(!logits.empty());
    const bool penalize = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
    std::span<const float> z = logits;
    if (!params_.logit_bias.empty() || (penalize && !n_seen_.empty())) {
        adjusted_.assign(logits.begin(), logits.end());
        for (auto [id, bias] : params_.logit_bias)
            if (id >= 0 && size_t(id) < adjusted_.size()) adjusted_[id] += bias;
        if (penalize)  // OpenAI: logit -= count * frequency_penalty + (count > 0) * presence_penalty
            for (auto [id, count] : n_seen_)
                if (id >= 0 && size_t(id) < adjusted_.size())
                    adjusted_[id] -= float(count) * params_.frequency_penalty + params_.presence_penalty;
        z = adjusted_;
    }
    if (params_.temperature <= 0.0f) return argmax(z);

    // Candidates, most likely first; top-k keeps only the k best.
    candidates_.clear();
    for (size_t i = 0; i < z.size(); i++)
        if (z[i] > -std::numeric_limits<float>::infinity()) candidates_.push_back({z[i], int32_t(i)});
    if (candidates_.empty()) return argmax(z);
    size_t keep = candidates_.size();
    if (params_.top_k > 0) keep = std::min(keep, size_t(params_.top_k));
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), more_likely);
    candidates_.resize(keep);

    // Probabilities at temperature 1 for top-p and min-p.
    std::vector<double> p(keep);
    double sum = 0.0;
    for (size_t i = 0; i < keep; i++) sum += p[i] = std::exp(double(candidates_[i].first) - candidates_[0].first);
    if (params_.top_p < 1.0f) {  // smallest prefix whose mass reaches top_p
        double mass = 0.0;
        size_t n = 0;
        while (n < keep && mass < params_.top_p * sum) mass += p[n++];
        keep = std::max<size_t>(n, 1);
    }
    if (params_.min_p > 0.0f) {  // drop ids less likely than min_p times the best one (p[0] = 1)
        size_t n = 1;
        while (n < keep && p[n] >= params_.min_p) n++;
        keep = n;
    }

    // Temperature, then one draw from what is left.
    std::vector<double> w(keep);
    double total = 0.0;
    for (size_t i = 0; i < keep; i++)
        total += w[i] = std::exp((double(candidates_[i].first) - candidates_[0].first) / params_.temperature);
    double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
    for (size_t i = 0; i < keep; i++) {
        if (u < w[i]) return candidates_[i].second;
        u -= w[i];
    }
    return candidates_[keep - 1].second;
}

int32_t argmax(std::span<const float> logits) {
    assert(!logits.empty());
    size_t best = 0;
    for (size_t i = 1; i < logits.size(); i++)
        if (logits[i] > logits[best]) best = i;
    return int32_t(best);
}

TokenStep describe_step(std::span<const float> logits, int32_t id, int n_top_logprobs, int n_top_logits, bool logprob) {
    TokenStep step;
    step.id = id;
    // a pass of exp over the whole vocabulary and a sort of it cost more than a small model's decode
    // step leaves over (~0.5 ms for 32000 logits): only when asked
    if (logprob || n_top_logprobs > 0) {
        const double lse = log_sum_exp(logits);
        if (id >= 0 && size_t(id) < logits.size()) step.logprob = float(logits[id] - lse);
        if (n_top_logprobs > 0)
            for (auto [logit, top_id] : top_n(logits, n_top_logprobs)) step.top_logprobs.push_back({top_id, float(logit - lse)});
    }
    if (n_top_logits > 0)
        for (auto [logit, top_id] : top_n(logits, n_top_logits)) step.top_logits.push_back({top_id, logit});
    return step;
}

}  // namespace llm
