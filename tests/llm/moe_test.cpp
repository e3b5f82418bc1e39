// The MoE feed-forward with hand-set router weights against a direct transcription of llama.cpp's
// build_moe_ffn: each gating function with and without norm_topk_prob, the selection bias, expert
// groups, routed scaling, shared experts with their gate, and gpt-oss's biases and clamped SwiGLU.
#include "llm/blocks.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace llm;
using engine::Tensor;

namespace {

const int D = 8, F = 16;

std::vector<float> uniform(size_t n, uint32_t seed, float scale) {
    std::vector<float> v(n);
    uint64_t s = seed * 2654435761ull + 7;
    for (auto& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = scale * (2.0f * float(double(s >> 11) / double(1ull << 53)) - 1.0f);
    }
    return v;
}

// The layer as plain numbers, and as engine tensors for moe_ffn.
struct Layer {
    MoeConfig m;
    std::vector<float> router, router_b, sel_b;                 // (E, D), (E), (E)
    std::vector<float> gate, up, down;                          // (E, F, D), (E, F, D), (E, D, F)
    std::vector<float> gate_b, up_b, down_b;                    // (E, F), (E, F), (E, D)
    std::vector<float> sh_gate, sh_up, sh_down, sh_gate_inp;    // (F, D), (F, D), (D, F), (D)

    MoeWeights weights() const {
        const int E = m.n_expert;
        auto t = [](const std::vector<float>& v, engine::Shape s) { return Tensor::from_vector(v, s); };
        MoeWeights w;
        w.ffn_gate_inp = t(router, {E, D});
        if (m.router_bias) w.ffn_gate_inp_b = t(router_b, {E});
        if (m.selection_bias) w.exp_probs_b = t(sel_b, {E});
        w.ffn_gate_exps = t(gate, {E, F, D}), w.ffn_up_exps = t(up, {E, F, D}), w.ffn_down_exps = t(down, {E, D, F});
        if (m.expert_bias) w.ffn_gate_exps_b = t(gate_b, {E, F}), w.ffn_up_exps_b = t(up_b, {E, F}), w.ffn_down_exps_b = t(down_b, {E, D});
        if (m.n_expert_shared)
            w.shexp = {engine::linear_weight({t(sh_gate, {F, D}), t(sh_up, {F, D})}), engine::linear_weight({t(sh_down, {D, F})})};
        if (m.shared_gate) w.ffn_gate_inp_shexp = t(sh_gate_inp, {1, D});
        return w;
    }
};

// A layer of E experts whose router row e reads feature e with weight 2: expert e's logit is 2·x[e].
Layer make_layer(int E, int k, Gating gating, bool norm) {
    Layer l;
    l.m.n_expert = E, l.m.n_expert_used = k, l.m.n_ff_exp = F, l.m.gating = gating, l.m.norm_topk = norm;
    l.router.assign(size_t(E * D), 0.0f);
    for (int e = 0; e < E; e++) l.router[size_t(e * D + e % D)] = 2.0f;
    l.gate = uniform(size_t(E * F * D), 1, 0.5f), l.up = uniform(size_t(E * F * D), 2, 0.5f), l.down = uniform(size_t(E * D * F), 3, 0.3f);
    return l;
}

double silu(double x) { return x / (1 + std::exp(-x)); }

// ids (k) and weights (k) of one token, as build_moe_ffn chooses them (no ties in these tests).
void route(const Layer& l, const float* x, std::vector<int>& ids, std::vector<double>& w) {
    const MoeConfig& m = l.m;
    const int E = m.n_expert;
    std::vector<double> logit(static_cast<size_t>(E)), prob(static_cast<size_t>(E)), score;
    for (int e = 0; e < E; e++) {
        for (int d = 0; d < D; d++) logit[size_t(e)] += double(l.router[size_t(e * D + d)]) * x[d];
        if (m.router_bias) logit[size_t(e)] += l.router_b[size_t(e)];
    }
    double mx = *std::max_element(logit.begin(), logit.end()), sum = 0;
    for (int e = 0; e < E; e++) sum += std::exp(logit[size_t(e)] - mx);
    for (int e = 0; e < E; e++) {
        double z = logit[size_t(e)];
        switch (m.gating) {
            case Gating::SOFTMAX: prob[size_t(e)] = std::exp(z - mx) / sum; break;
            case Gating::SIGMOID: prob[size_t(e)] = 1 / (1 + std::exp(-z)); break;
            case Gating::SOFTMAX_WEIGHT: prob[size_t(e)] = z; break;
            case Gating::SQRT_SOFTPLUS: prob[size_t(e)] = std::sqrt(std::log1p(std::exp(z))); break;
        }
    }
    score = prob;
    if (m.selection_bias)
        for (int e = 0; e < E; e++) score[size_t(e)] += l.sel_b[size_t(e)];
    if (m.n_group > 1) {
        const int per = E / m.n_group;
        std::vector<double> group(static_cast<size_t>(m.n_group));
        for (int g = 0; g < m.n_group; g++) {
            std::vector<double> s(score.begin() + g * per, score.begin() + (g + 1) * per);
            std::sort(s.rbegin(), s.rend());
            group[size_t(g)] = s[0] + s[1];
        }
        std::vector<int> order(static_cast<size_t>(m.n_group));
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int a, int b) { return group[size_t(a)] > group[size_t(b)]; });
        for (int i = m.n_group_used; i < m.n_group; i++)
            for (int j = 0; j < per; j++) score[size_t(order[size_t(i)] * per + j)] = -INFINITY;
    }
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return score[size_t(a)] > score[size_t(b)]; });
    ids.assign(order.begin(), order.begin() + m.n_expert_used);
    w.clear();
    for (int e : ids) w.push_back(prob[size_t(e)]);
    if (m.gating == Gating::SOFTMAX_WEIGHT) {
        double wm = *std::max_element(w.begin(), w.end()), s = 0;
        for (double& v : w) s += (v = std::exp(v - wm));
        for (double& v : w) v /= s;
    }
    if (m.norm_topk) {
        double s = std::max(std::accumulate(w.begin(), w.end(), 0.0), 6.103515625e-5);
        for (double& v : w) v /= s;
    }
    for (double& v : w) v *= m.weights_scale;
}

// One SwiGLU expert (rows of gate/up/down starting at the given offsets) on x.
std::vector<double> expert(const Layer& l, const float* x, const float* gate, const float* up, const float* down, const float* gb,
                           const float* ub, const float* db) {
    std::vector<double> h(F), y(D);
    for (int f = 0; f < F; f++) {
        double g = gb ? gb[f] : 0, u = ub ? ub[f] : 0;
        for (int d = 0; d < D; d++) g += double(gate[f * D + d]) * x[d], u += double(up[f * D + d]) * x[d];
        if (l.m.swiglu_limit > 0) {
            double lim = l.m.swiglu_limit;
            g = std::min(g, lim), u = std::clamp(u, -lim, lim);
            h[size_t(f)] = g / (1 + std::exp(-l.m.swiglu_alpha * g)) * (u + 1);
        } else {
            h[size_t(f)] = silu(g) * u;
        }
    }
    for (int d = 0; d < D; d++) {
        y[size_t(d)] = db ? db[d] : 0;
        for (int f = 0; f < F; f++) y[size_t(d)] += double(down[d * F + f]) * h[size_t(f)];
    }
    return y;
}

std::vector<double> reference(const Layer& l, const std::vector<float>& x) {
    const int T = int(x.size()) / D;
    std::vector<double> out(x.size());
    for (int t = 0; t < T; t++) {
        const float* xt = x.data() + t * D;
        std::vector<int> ids;
        std::vector<double> w;
        route(l, xt, ids, w);
        for (size_t i = 0; i < ids.size(); i++) {
            int e = ids[i];
            bool b = l.m.expert_bias;
            auto y = expert(l, xt, &l.gate[size_t(e * F * D)], &l.up[size_t(e * F * D)], &l.down[size_t(e * D * F)],
                            b ? &l.gate_b[size_t(e * F)] : nullptr, b ? &l.up_b[size_t(e * F)] : nullptr, b ? &l.down_b[size_t(e * D)] : nullptr);
            for (int d = 0; d < D; d++) out[size_t(t * D + d)] += w[i] * y[size_t(d)];
        }
        if (l.m.n_expert_shared) {
            auto y = expert(l, xt, l.sh_gate.data(), l.sh_up.data(), l.sh_down.data(), nullptr, nullptr, nullptr);
            double g = 1;
            if (l.m.shared_gate) {
                double z = 0;
                for (int d = 0; d < D; d++) z += double(l.sh_gate_inp[size_t(d)]) * xt[d];
                g = 1 / (1 + std::exp(-z));
            }
            for (int d = 0; d < D; d++) out[size_t(t * D + d)] += g * y[size_t(d)];
        }
    }
    return out;
}

// Three tokens: token 0 prefers experts 0 and 2 (logits 6, -2, 4, 1), the others mixed.
const std::vector<float> X = {3.0f, -1.0f, 2.0f, 0.5f, 0.25f, -0.5f, 1.0f, 0.0f,   //
                              -0.5f, 1.5f, 0.2f, 2.5f, -1.0f, 0.3f, 0.7f, 1.1f,   //
                              0.1f, 0.4f, -2.0f, 0.0f, 1.8f, 1.2f, -0.3f, 0.9f};

void check(const Layer& l, const std::vector<float>& x = X) {
    Tensor xt = Tensor::from_vector(x, {int64_t(x.size()) / D, D});
    std::vector<double> got = moe_ffn(l.weights(), l.m, xt).to_vector<double>(), want = reference(l, x);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); i++) {
        INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
        REQUIRE(std::fabs(got[i] - want[i]) <= 1e-5 + 1e-4 * std::fabs(want[i]));
    }
}

}  // namespace

TEST_CASE("moe: every gating function, with and without norm_topk_prob") {
    for (Gating g : {Gating::SOFTMAX, Gating::SIGMOID, Gating::SOFTMAX_WEIGHT, Gating::SQRT_SOFTPLUS})
        for (bool norm : {false, true}) {
            INFO("gating " << int(g) << (norm ? ", normalized" : ""));
            Layer l = make_layer(4, 2, g, norm);
            check(l);
            // Every gate is monotone: token 0 takes experts 0 and 2, in that order.
            auto [ids, w] = moe_route(l.weights(), l.m, Tensor::from_vector(X, {3, D}));
            std::vector<int> chosen = ids.to_vector<int>();
            REQUIRE(chosen[0] == 0);
            REQUIRE(chosen[1] == 2);
            std::vector<double> wt = w.to_vector<double>();
            if (norm || g == Gating::SOFTMAX_WEIGHT) REQUIRE(wt[0] + wt[1] == Approx(1.0));
            if (g == Gating::SOFTMAX && !norm) REQUIRE(wt[0] == Approx(std::exp(6.0) / (std::exp(6.0) + std::exp(-2.0) + std::exp(4.0) + std::exp(1.0))));
        }
}

TEST_CASE("moe: the selection bias changes which experts are chosen, not their weights") {
    Layer l = make_layer(4, 2, Gating::SIGMOID, false);
    l.m.selection_bias = true;
    l.sel_b = {0.0f, 0.0f, -10.0f, 5.0f};
    check(l);
    auto [ids, w] = moe_route(l.weights(), l.m, Tensor::from_vector(X, {3, D}));
    REQUIRE(ids.to_vector<int>()[0] == 3);  // sigmoid(1) + 5 beats sigmoid(6)
    REQUIRE(ids.to_vector<int>()[1] == 0);
    REQUIRE(w.to_vector<double>()[0] == Approx(1 / (1 + std::exp(-2.0 * 0.5))));
}

TEST_CASE("moe: routed scaling factor and normalized sigmoid weights (DeepSeek-V3 style)") {
    Layer l = make_layer(4, 2, Gating::SIGMOID, true);
    l.m.weights_scale = 2.5f;
    check(l);
    auto [ids, w] = moe_route(l.weights(), l.m, Tensor::from_vector(X, {3, D}));
    std::vector<double> wt = w.to_vector<double>();
    REQUIRE(wt[0] + wt[1] == Approx(2.5));
}

TEST_CASE("moe: group-limited choice keeps the experts of the best groups") {
    Layer l = make_layer(8, 2, Gating::SIGMOID, true);
    l.m.n_group = 4, l.m.n_group_used = 2;
    check(l);
    // Token 0's group scores (sigmoid pairs): {0,1} 1.12, {2,3} 1.71, {4,5} 0.89, {6,7} 1.38: groups 1 and 3 compete.
    auto [ids, w] = moe_route(l.weights(), l.m, Tensor::from_vector(X, {3, D}));
    std::vector<int> chosen = ids.to_vector<int>();
    REQUIRE(chosen[0] == 2);
    REQUIRE(chosen[1] == 6);  // expert 0 (logit 6) is the best of all, but its group lost
}

TEST_CASE("moe: shared expert, plain and sigmoid-gated") {
    for (bool gated : {false, true}) {
        INFO((gated ? "gated" : "plain"));
        Layer l = make_layer(4, 2, Gating::SOFTMAX, true);
        l.m.n_expert_shared = 1, l.m.n_ff_shexp = F, l.m.shared_gate = gated;
        l.sh_gate = uniform(F * D, 4, 0.5f), l.sh_up = uniform(F * D, 5, 0.5f), l.sh_down = uniform(D * F, 6, 0.3f);
        l.sh_gate_inp = uniform(D, 7, 1.0f);
        check(l);
    }
}

TEST_CASE("moe: gpt-oss router and expert biases, softmax over the chosen, clamped SwiGLU") {
    Layer l = make_layer(4, 2, Gating::SOFTMAX_WEIGHT, false);
    l.m.router_bias = l.m.expert_bias = true;
    l.m.swiglu_limit = 7.0f, l.m.swiglu_alpha = 1.702f;
    l.router_b = {0.5f, -0.25f, 0.0f, 1.0f};
    // Large gate/up weights so the clamp at 7 is reached.
    l.gate = uniform(4 * F * D, 1, 4.0f), l.up = uniform(4 * F * D, 2, 4.0f);
    l.gate_b = uniform(4 * F, 8, 1.0f), l.up_b = uniform(4 * F, 9, 1.0f), l.down_b = uniform(4 * D, 10, 1.0f);
    check(l);
}
