// GatedDeltaNet, the linear-attention layer of qwen3next / qwen35: q, k, v through a causal short
// convolution + SiLU, q/k L2-normalized, a delta-rule state per v head decayed by exp(g) with
// g = -exp(A_log)·softplus(alpha + dt_bias), corrected by beta = sigmoid(b); output RMSNorm × SiLU(z).
#include "llm/blocks.h"

#include <cmath>

namespace llm {

namespace {

struct Dims {
    int Hk, Dk, Hv, Dv, conv_channels;
};

Dims dims_of(const ModelConfig& c) {
    const SsmConfig& s = c.ssm;
    Dims d{s.n_group, s.d_state, s.n_v_head, s.n_v_head > 0 ? s.d_inner / s.n_v_head : 0, 0};
    d.conv_channels = 2 * d.Hk * d.Dk + d.Hv * d.Dv;
    return d;
}

}  // namespace

Tensor RecurrentState::conv(const Tensor& x, const Tensor& w) {
    if (batch_) return engine::causal_conv1d_seqs(x, conv_pool_, w, {batch_->positions, batch_->seq, batch_->state_load, batch_->state_save});
    engine::ConvResult r = engine::causal_conv1d(x, one_->conv, w, start_pos_);
    one_->conv.assign(r.state);
    return r.y;
}

Tensor RecurrentState::delta(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta, double scale,
                             engine::HeadMap head_map) {
    if (batch_)
        return engine::delta_rule_seqs(q, k, v, g, beta, ssm_pool_, {batch_->positions, batch_->seq, batch_->state_load, batch_->state_save},
                                       scale, head_map);
    engine::DeltaResult r = engine::delta_rule(q, k, v, g, beta, one_->ssm, start_pos_, scale, head_map);
    one_->ssm.assign(r.state);
    return r.o;
}

Tensor l2_norm(const Tensor& x_in, double eps) {
    Tensor x = x_in.cast(engine::f32);
    return x / engine::maximum(engine::sqrt((x * x).sum(-1, true)), eps);
}

GatedDeltaNetWeights GatedDeltaNetWeights::load(const WeightLoader& L, const ModelConfig& c, int il) {
    const Dims d = dims_of(c);
    const int D = c.n_embd;
    if (d.Hk <= 0 || d.Hv <= 0 || d.Dk <= 0 || d.Hv % d.Hk || d.Dv != d.Dk || d.Hv * d.Dv != c.ssm.d_inner ||
        c.ssm.conv_kernel < 2)
        throw std::runtime_error("[model] " + L.file().path() + ": inconsistent GatedDeltaNet sizes (ssm.group_count " +
                                 std::to_string(d.Hk) + ", time_step_rank " + std::to_string(d.Hv) + ", state_size " +
                                 std::to_string(d.Dk) + ", inner_size " + std::to_string(c.ssm.d_inner) + ", conv_kernel " +
                                 std::to_string(c.ssm.conv_kernel) + ")");
    GatedDeltaNetWeights w;
    w.attn_qkv = engine::linear_weight({L.layer_matrix(il, "attn_qkv.weight", {d.conv_channels, D})});
    w.attn_gate = engine::linear_weight({L.layer_matrix(il, "attn_gate.weight", {d.Hv * d.Dv, D})});
    w.ssm_conv1d = L.layer(il, "ssm_conv1d.weight", {d.conv_channels, c.ssm.conv_kernel});
    w.ssm_dt_b = L.layer(il, "ssm_dt.bias", {d.Hv});
    w.ssm_a = L.layer(il, "ssm_a", {d.Hv});
    if (c.ssm.fused_ba) {
        w.ssm_ba = engine::linear_weight({L.layer_matrix(il, "ssm_ba.weight", {2 * d.Hv, D})});
    } else {
        w.ssm_beta_alpha = engine::linear_weight({L.layer_matrix(il, "ssm_beta.weight", {d.Hv, D}),
                                                  L.layer_matrix(il, "ssm_alpha.weight", {d.Hv, D})});
    }
    w.ssm_norm = L.layer(il, "ssm_norm.weight", {d.Dv});
    w.ssm_out = engine::linear_weight({L.layer_matrix(il, "ssm_out.weight", {D, d.Hv * d.Dv})});
    return w;
}

void GatedDeltaNetWeights::init_state(LayerState& s, const ModelConfig& c, int, engine::DType) const {
    const Dims d = dims_of(c);
    s.conv = Tensor::empty({c.ssm.conv_kernel - 1, d.conv_channels}, engine::f32);
    s.ssm = Tensor::empty({d.Hv, d.Dv, d.Dk}, engine::f32);
}

Tensor GatedDeltaNetWeights::forward(const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) const {
    RecurrentState state(s, start_pos);
    return forward(c, x, state);
}

Tensor GatedDeltaNetWeights::forward(const ModelConfig& c, const Tensor& x, RecurrentState& s) const {
    const GatedDeltaNetWeights& w = *this;
    const Dims d = dims_of(c);
    const Dim T = x.dim(0);
    Tensor b, a;  // (T, Hv) beta and alpha logits
    if (!w.ssm_ba.parts.empty()) {
        const int r = d.Hv / d.Hk;
        Tensor ba = engine::linear(x, w.ssm_ba).reshape({T, d.Hk, 2 * r});
        b = ba.slice(2, 0, r).reshape({T, d.Hv});
        a = ba.slice(2, r, r).reshape({T, d.Hv});
    } else {
        const std::vector<Tensor> ba = engine::linear_split(x, w.ssm_beta_alpha);
        b = ba[0], a = ba[1];
    }
    Tensor beta = engine::sigmoid(b);                                         // (T, Hv)
    Tensor g = engine::softplus(a + w.ssm_dt_b.cast(engine::f32)) * w.ssm_a.cast(engine::f32);  // (T, Hv) log decay

    Tensor qkv = engine::silu(s.conv(engine::linear(x, w.attn_qkv), w.ssm_conv1d));  // (T, conv channels)
    const int kd = d.Hk * d.Dk;
    Tensor q = l2_norm(qkv.slice(1, 0, kd).reshape({T, d.Hk, d.Dk}), c.rms_eps);
    Tensor k = l2_norm(qkv.slice(1, kd, kd).reshape({T, d.Hk, d.Dk}), c.rms_eps);
    Tensor v = qkv.slice(1, 2 * kd, d.Hv * d.Dv).reshape({T, d.Hv, d.Dv});

    auto head_map = c.ssm.qk_heads_interleaved ? engine::HeadMap::INTERLEAVE : engine::HeadMap::MODULO;
    Tensor o = s.delta(q, k, v, g.reshape({T, d.Hv, 1}), beta, 1.0 / std::sqrt(double(d.Dk)), head_map);  // (T, Hv, Dv)
    Tensor z = engine::linear(x, w.attn_gate).reshape({T, d.Hv, d.Dv});
    Tensor out = engine::rms_norm(o, w.ssm_norm, c.rms_eps) * engine::silu(z);  // (T, Hv, Dv)
    return engine::linear(out.reshape({T, d.Hv * d.Dv}), w.ssm_out);              // (T, D)
}

}  // namespace llm
