// Kimi delta attention (kimi-linear's recurrent layers): q, k, v each through its own causal short
// convolution + SiLU, q/k L2-normalized, a delta-rule state per head decayed per key channel by
// exp(A · softplus(f_b(f_a x) + dt_bias)) and corrected by beta = sigmoid(b x); the output is
// RMSNorm(o) × sigmoid(g_b(g_a x)) projected by attn_output. Recipe: ../shared/models/README.md.
#include "llm/blocks.h"

#include <cmath>

namespace llm {

KdaWeights KdaWeights::load(const WeightLoader& L, const ModelConfig& c, int il) {
    const int D = c.n_embd, H = c.n_head, Dh = c.ssm.kda_head_dim, K = c.ssm.conv_kernel, HD = H * Dh;
    if (Dh <= 0 || K < 2)
        throw std::runtime_error("[model] " + L.file().path() + ": kda.head_dim must be positive and ssm.conv_kernel at least 2");
    KdaWeights w;
    w.attn_qkv = engine::linear_weight({L.layer_matrix(il, "attn_q.weight", {HD, D}), L.layer_matrix(il, "attn_k.weight", {HD, D}),
                                        L.layer_matrix(il, "attn_v.weight", {HD, D})});
    // The convolution weights are [K, 1, HD, 1] in ggml order (the loader drops the outer unit dim).
    // One (3·HD, K) f32 weight lets a single convolution serve q, k and v.
    std::vector<Tensor> convs;
    for (const char* name : {"ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"})
        convs.push_back(L.layer(il, name, {HD, 1, K}).reshape({HD, K}).cast(engine::f32));
    w.ssm_conv1d_qkv = engine::concat(convs, 0).contiguous();
    w.ssm_conv1d_qkv.realize();
    w.ssm_f_a = engine::linear_weight({L.layer_matrix(il, "ssm_f_a.weight", {Dh, D})});
    w.ssm_f_b = engine::linear_weight({L.layer_matrix(il, "ssm_f_b.weight", {HD, Dh})});
    w.ssm_dt_b = L.layer(il, "ssm_dt.bias", {HD});
    w.ssm_a = L.layer(il, "ssm_a", {H, 1}).reshape({H});  // [1, H, 1, 1] in ggml order
    w.ssm_beta = engine::linear_weight({L.layer_matrix(il, "ssm_beta.weight", {H, D})});
    w.ssm_g_a = engine::linear_weight({L.layer_matrix(il, "ssm_g_a.weight", {Dh, D})});
    w.ssm_g_b = engine::linear_weight({L.layer_matrix(il, "ssm_g_b.weight", {HD, Dh})});
    w.ssm_norm = L.layer(il, "ssm_norm.weight", {Dh});
    w.attn_output = engine::linear_weight({L.layer_matrix(il, "attn_output.weight", {D, HD})});
    return w;
}

void KdaWeights::init_state(LayerState& s, const ModelConfig& c, int, engine::DType) const {
    const int H = c.n_head, Dh = c.ssm.kda_head_dim;
    s.conv = Tensor::empty({c.ssm.conv_kernel - 1, 3 * H * Dh}, engine::f32);
    s.ssm = Tensor::empty({H, Dh, Dh}, engine::f32);
}

Tensor KdaWeights::forward(const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) const {
    RecurrentState state(s, start_pos);
    return forward(c, x, state);
}

Tensor KdaWeights::forward(const ModelConfig& c, const Tensor& x, RecurrentState& s) const {
    const KdaWeights& w = *this;
    using engine::linear;
    const Dim T = x.dim(0);
    const int H = c.n_head, Dh = c.ssm.kda_head_dim, HD = H * Dh;
    Tensor qkv = linear(x, w.attn_qkv);  // (T, 3·HD)
    qkv = engine::silu(s.conv(qkv, w.ssm_conv1d_qkv));
    Tensor q = l2_norm(qkv.slice(1, 0, HD).reshape({T, H, Dh}), c.rms_eps);
    Tensor k = l2_norm(qkv.slice(1, HD, HD).reshape({T, H, Dh}), c.rms_eps);
    Tensor v = qkv.slice(1, 2 * HD, HD).reshape({T, H, Dh});

    Tensor f = linear(linear(x, w.ssm_f_a), w.ssm_f_b) + w.ssm_dt_b.cast(engine::f32);          // (T, HD)
    Tensor g = engine::softplus(f).reshape({T, H, Dh}) * w.ssm_a.cast(engine::f32).reshape({1, H, 1});  // log decay per channel
    Tensor beta = engine::sigmoid(linear(x, w.ssm_beta));                                       // (T, H)

    Tensor o = s.delta(q, k, v, g, beta, 1.0 / std::sqrt(double(Dh)));                         // (T, H, Dh)
    Tensor gate = linear(linear(x, w.ssm_g_a), w.ssm_g_b).reshape({T, H, Dh});
    Tensor out = engine::rms_norm(o, w.ssm_norm, c.rms_eps) * engine::sigmoid(gate);  // (T, H, Dh)
    return linear(out.reshape({T, HD}), w.attn_output);                                    // (T, D)
}

}  // namespace llm
