// Grouped-query attention over the KV cache: q/k/v projections (+bias), per-head or full-width q/k
// RMSNorm, RoPE (optionally YaRN-scaled, multi-section for qwen35) on the first rope.n_dims features,
// causal attention (optionally in a sliding window, with per-head sinks), an optional sigmoid output
// gate (qwen3next/qwen35: q projects to query + gate), output projection.
#include "llm/blocks.h"

#include <cmath>
#include <limits>

namespace llm {

engine::RopeScaling rope_scaling(const RopeConfig& r) {
    engine::RopeScaling s;
    s.freq_scale = r.freq_scale;
    if (r.yarn) {
        s.ext_factor = r.yarn_ext_factor;
        s.n_ctx_orig = r.yarn_orig_ctx;
        s.beta_fast = r.yarn_beta_fast;
        s.beta_slow = r.yarn_beta_slow;
    }
    s.attn_factor = r.yarn_attn_factor;
    return s;
}

namespace {

// Multi-section RoPE (qwen35, ggml's IMROPE): rotary pair i belongs to section t, h, w or e, interleaved
// as t h w t h w ... while each section has pairs left. A text token has position p in t, h and w and 0
// in e, so it rotates like plain RoPE except that e pairs do not rotate. Returns the frequency divisors
// (+inf for e pairs: angle 0) or an undefined tensor when every pair rotates.
Tensor section_freq_factors(const RopeConfig& rope) {
    std::vector<int> s = rope.sections;
    s.resize(4, 0);
    const int n_sector = s[0] + s[1] + s[2] + s[3];
    if (n_sector <= 0) return {};
    std::vector<float> f(size_t(rope.n_dims / 2), 1.0f);
    bool any_still = false;
    for (size_t i = 0; i < f.size(); i++) {
        int sector = int(i) % n_sector;
        bool rotates = (sector % 3 == 0 && sector < 3 * s[0]) || (sector % 3 == 1 && sector < 3 * s[1]) ||
                       (sector % 3 == 2 && sector < 3 * s[2]);
        if (!rotates) f[i] = std::numeric_limits<float>::infinity(), any_still = true;
    }
    return any_still ? Tensor::from_vector(f, {int(f.size())}) : Tensor();
}

}  // namespace

AttentionWeights AttentionWeights::load(const WeightLoader& L, const ModelConfig& c, int il) {
    const int D = c.n_embd, H = c.n_head, Hkv = c.n_head_kv, Dk = c.head_dim_k, Dv = c.head_dim_v;
    AttentionWeights w;
    w.attn_qkv = engine::linear_weight({L.layer_matrix(il, "attn_q.weight", {H * Dk * (c.attn_gate ? 2 : 1), D}),  // per head: query, then gate
                                        L.layer_matrix(il, "attn_k.weight", {Hkv * Dk, D}), L.layer_matrix(il, "attn_v.weight", {Hkv * Dv, D})});
    w.attn_output = engine::linear_weight({L.layer_matrix(il, "attn_output.weight", {D, H * Dv})});
    if (c.qkv_bias) {
        w.attn_q_b = L.layer(il, "attn_q.bias", {H * Dk});
        w.attn_k_b = L.layer(il, "attn_k.bias", {Hkv * Dk});
        w.attn_v_b = L.layer(il, "attn_v.bias", {Hkv * Dv});
    }
    if (c.attn_out_bias) w.attn_output_b = L.layer(il, "attn_output.bias", {D});
    if (c.attn_sinks) w.attn_sinks = L.layer(il, "attn_sinks.weight", {H});
    if (c.swa_layer[il]) w.window = c.sliding_window;
    if (c.attn_gate && Dk != Dv)
        throw std::runtime_error("[model] " + L.file().path() + ": a gated attention needs key_length == value_length");
    if (!c.rope.sections.empty()) w.rope_freq_factors = section_freq_factors(c.rope);
    if (c.qk_norm) {
        w.attn_q_norm = L.layer(il, "attn_q_norm.weight", {c.qk_norm_full ? H * Dk : Dk});
        w.attn_k_norm = L.layer(il, "attn_k_norm.weight", {c.qk_norm_full ? Hkv * Dk : Dk});
    }
    return w;
}

void AttentionWeights::init_state(LayerState& s, const ModelConfig& c, int n_ctx, engine::DType kv_dtype) const {
    s.k = Tensor::empty({n_ctx, c.n_head_kv, c.head_dim_k}, kv_dtype);
    s.v = Tensor::empty({n_ctx, c.n_head_kv, c.head_dim_v}, kv_dtype);
}

AttentionWeights::Qkv AttentionWeights::project(const ModelConfig& c, const Tensor& x) const {
    const AttentionWeights& w = *this;
    const Dim T = x.dim(0);
    const int H = c.n_head, Hkv = c.n_head_kv, Dk = c.head_dim_k, Dv = c.head_dim_v;
    std::vector<Tensor> qkv = engine::linear_split(x, w.attn_qkv);
    Tensor q = qkv[0], k = qkv[1], v = qkv[2];  // (T, H*Dk) or (T, H*2*Dk) with the gate, (T, Hkv*Dk), (T, Hkv*Dv)
    Tensor gate;
    if (c.attn_gate) {
        Tensor qg = q.reshape({T, H, 2 * Dk});
        q = qg.slice(2, 0, Dk).reshape({T, H * Dk});
        gate = qg.slice(2, Dk, Dk);  // (T, H, Dv)
    }
    if (c.qkv_bias) q = q + w.attn_q_b, k = k + w.attn_k_b, v = v + w.attn_v_b;
    if (c.qk_norm_full) q = engine::rms_norm(q, w.attn_q_norm, c.rms_eps), k = engine::rms_norm(k, w.attn_k_norm, c.rms_eps);
    q = q.reshape({T, H, Dk});
    k = k.reshape({T, Hkv, Dk});
    v = v.reshape({T, Hkv, Dv});
    if (c.qk_norm && !c.qk_norm_full)
        q = engine::rms_norm(q, w.attn_q_norm, c.rms_eps), k = engine::rms_norm(k, w.attn_k_norm, c.rms_eps);
    return {q, k, v, gate};
}

Tensor AttentionWeights::finish(const ModelConfig& c, Tensor out, const Tensor& gate) const {
    const Dim T = out.dim(0);
    if (c.attn_gate) out = out * engine::sigmoid(gate);
    out = engine::linear(out.reshape({T, c.n_head * c.head_dim_v}), attn_output);  // (T, D)
    return c.attn_out_bias ? out + attn_output_b : out;
}

namespace {
// q and k rotated at `at`: start_pos (consecutive positions) or a positions tensor (T) i32.
template <class At> void rope_qk(const ModelConfig& c, const AttentionWeights& w, AttentionWeights::Qkv& p, const At& at) {
    if (c.rope.type == RopeType::NONE) return;
    auto layout = c.rope.type == RopeType::NEOX ? engine::RopeLayout::NEOX : engine::RopeLayout::NORM;
    engine::RopeScaling scaling = rope_scaling(c.rope);
    p.q = engine::rope(p.q, at, c.rope.n_dims, c.rope.freq_base, layout, w.rope_freq_factors, scaling);
    p.k = engine::rope(p.k, at, c.rope.n_dims, c.rope.freq_base, layout, w.rope_freq_factors, scaling);
}
}  // namespace

Tensor AttentionWeights::forward(const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) const {
    Qkv p = project(c, x);
    rope_qk(c, *this, p, start_pos);
    Tensor k = engine::kv_store(s.k, p.k, start_pos), v = engine::kv_store(s.v, p.v, start_pos);  // the caches after the store
    Tensor out = engine::attention(p.q, k, v, start_pos, 1.0 / std::sqrt(double(c.head_dim_k)), window, attn_sinks);  // (T, H, Dv)
    return finish(c, out, p.gate);
}

Tensor AttentionWeights::forward_paged(const ModelConfig& c, const Tensor& x, const PagedBatch& b, const Tensor& k_pool,
                                       const Tensor& v_pool) const {
    Qkv p = project(c, x);
    rope_qk(c, *this, p, b.positions);
    Tensor k = engine::kv_store(k_pool, p.k, b.slots), v = engine::kv_store(v_pool, p.v, b.slots);  // the pools after the store
    Tensor out = engine::paged_attention(p.q, k, v, b.positions, b.seq, b.block_table, b.block_size,
                                         1.0 / std::sqrt(double(c.head_dim_k)), window, attn_sinks);  // (T, H, Dv)
    return finish(c, out, p.gate);
}

}  // namespace llm
