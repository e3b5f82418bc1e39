// The mixture-of-experts feed-forward, as llama.cpp's build_moe_ffn computes it: a router scores the
// experts (softmax / sigmoid / raw logits / sqrt-softplus), the k best (optionally within the best
// groups, after a selection-only bias) each run a SwiGLU FFN, and their outputs are summed with the
// router's weights; shared experts (optionally sigmoid-gated) see every token.
#include "llm/blocks.h"

#include <cmath>

namespace llm {

MoeWeights load_moe(const WeightLoader& L, const MoeConfig& m, int il, int D) {
    const int E = m.n_expert, F = m.n_ff_exp;
    MoeWeights w;
    w.ffn_gate_inp = L.layer(il, "ffn_gate_inp.weight", {E, D});
    if (m.router_bias) w.ffn_gate_inp_b = L.layer(il, "ffn_gate_inp.bias", {E});
    if (m.selection_bias) w.exp_probs_b = L.layer(il, "exp_probs_b.bias", {E});
    w.ffn_gate_exps = engine::pack_experts(L.layer_matrix(il, "ffn_gate_exps.weight", {E, F, D}));
    w.ffn_up_exps = engine::pack_experts(L.layer_matrix(il, "ffn_up_exps.weight", {E, F, D}));
    w.ffn_down_exps = engine::pack_experts(L.layer_matrix(il, "ffn_down_exps.weight", {E, D, F}));
    if (m.expert_bias) {
        w.ffn_gate_exps_b = L.layer(il, "ffn_gate_exps.bias", {E, F});
        w.ffn_up_exps_b = L.layer(il, "ffn_up_exps.bias", {E, F});
        w.ffn_down_exps_b = L.layer(il, "ffn_down_exps.bias", {E, D});
    }
    if (m.n_expert_shared > 0) w.shexp = load_ffn(L, il, m.n_ff_shexp, D, "_shexp");
    if (m.shared_gate) w.ffn_gate_inp_shexp = L.layer(il, "ffn_gate_inp_shexp.weight", {D}).reshape({1, D});
    return w;
}

namespace {

// Router logits -> the scores whose values weight the experts.
Tensor gate(const Tensor& logits, Gating g) {
    switch (g) {
        case Gating::SOFTMAX: return engine::softmax(logits, -1);
        case Gating::SIGMOID: return engine::sigmoid(logits);
        case Gating::SOFTMAX_WEIGHT: return logits;  // the softmax comes after the choice, over the chosen
        case Gating::SQRT_SOFTPLUS: return engine::sqrt(engine::softplus(logits));
    }
    throw std::logic_error("[moe] unknown gating function");
}

// DeepSeek-V3's group-limited choice: experts outside the n_group_used best groups (a group scores
// the sum of its two best experts) drop to -inf.
Tensor keep_best_groups(const Tensor& scores, const MoeConfig& m) {
    const Dim T = scores.dim(0);
    const int G = m.n_group, per_group = m.n_expert / m.n_group;
    Tensor grouped = scores.reshape({T, G, per_group});
    Tensor best2 = engine::gather(grouped, 2, engine::top_k_ggml(grouped, 2));           // (T, G, 2)
    Tensor chosen = engine::top_k_ggml(best2.sum(2), m.n_group_used);                    // (T, used) group ids
    Tensor hit = engine::eq(chosen.unsqueeze(2), Tensor::arange(G).reshape({1, 1, G}));  // (T, used, G)
    Tensor keep = engine::gt(hit.cast(engine::f32).sum(1), Tensor::scalar(0.0));          // (T, G)
    return engine::where(keep.unsqueeze(2), grouped, -INFINITY).reshape({T, m.n_expert});
}

// gpt-oss's clamped SwiGLU: gate clamped above, up clamped both ways and shifted by one.
Tensor swiglu_clamped(const Tensor& g_in, const Tensor& u_in, float alpha, float limit) {
    Tensor g = engine::minimum(g_in, limit), u = engine::minimum(engine::maximum(u_in, -limit), limit);
    return g * engine::sigmoid(g * alpha) * (u + 1.0);
}

}  // namespace

std::pair<Tensor, Tensor> moe_route(const MoeWeights& w, const MoeConfig& m, const Tensor& x) {
    Tensor logits = engine::linear(x, w.ffn_gate_inp);  // (T, E)
    if (m.router_bias) logits = logits + w.ffn_gate_inp_b;
    Tensor probs = gate(logits, m.gating);
    Tensor scores = m.selection_bias ? probs + w.exp_probs_b : probs;
    if (m.n_group > 1) scores = keep_best_groups(scores, m);
    Tensor ids = engine::top_k_ggml(scores, m.n_expert_used);  // (T, k)
    Tensor weights = engine::gather(probs, 1, ids);             // (T, k)
    if (m.gating == Gating::SOFTMAX_WEIGHT) weights = engine::softmax(weights, -1);
    // The clamp keeps an all-zero choice finite (llama.cpp: the smallest normal f16).
    if (m.norm_topk) weights = weights / engine::maximum(weights.sum(-1, true), 6.103515625e-5);
    if (m.weights_scale != 1.0f) weights = weights * double(m.weights_scale);
    return {ids, weights};
}

Tensor moe_ffn(const MoeWeights& w, const MoeConfig& m, const Tensor& x) {
    auto [ids, weights] = moe_route(w, m, x);
    engine::ExpertSelection chosen = engine::select_experts(ids, m.n_expert);
    Tensor g = engine::linear_experts(x, w.ffn_gate_exps, chosen);  // (T, k, F)
    Tensor u = engine::linear_experts(x, w.ffn_up_exps, chosen);
    if (m.expert_bias) g = g + engine::embedding(w.ffn_gate_exps_b, ids), u = u + engine::embedding(w.ffn_up_exps_b, ids);
    Tensor h = m.swiglu_limit > 0 ? swiglu_clamped(g, u, m.swiglu_alpha, m.swiglu_limit) : engine::silu(g) * u;
    Tensor y = engine::linear_experts(h, w.ffn_down_exps, chosen);  // (T, k, D)
    if (m.expert_bias) y = y + engine::embedding(w.ffn_down_exps_b, ids);
    Tensor out = (y * weights.unsqueeze(2)).sum(1);  // (T, D)
    if (m.n_expert_shared > 0) {
        Tensor s = ffn(w.shexp, x);
        if (m.shared_gate) s = s * engine::sigmoid(engine::linear(x, w.ffn_gate_inp_shexp));  // (T, D) * (T, 1)
        out = out + s;
    }
    return out;
}

MoeWeights MoeWeights::load(const WeightLoader& L, const ModelConfig& c, int il) { return load_moe(L, c.moe, il, c.n_embd); }
Tensor MoeWeights::forward(const ModelConfig& c, const Tensor& x) const { return moe_ffn(*this, c.moe, x); }

}  // namespace llm
