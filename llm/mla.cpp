// Multi-head latent attention (DeepSeek-V2/V3, Moonlight, GLM-4.7-Flash; Kimi's MLA layers) in the
// absorbed form: each token caches one row, its normalized latent kv (R) and the rotated key part
// shared by all heads (Dr). Queries move into the latent space through attn_k_b, attention runs over
// the latent rows as one shared KV head, and attn_v_b takes each head's result back to its values.
#include "llm/blocks.h"

namespace llm {

MlaWeights MlaWeights::load(const WeightLoader& L, const ModelConfig& c, int il) {
    const MlaConfig& m = c.mla;
    const int D = c.n_embd, H = c.n_head, R = m.kv_lora_rank, Dr = m.rope_dim, Dk = m.head_dim_k, Dv = m.head_dim_v;
    MlaWeights w;
    if (m.q_lora_rank > 0) {
        w.attn_q_a = L.layer(il, "attn_q_a.weight", {m.q_lora_rank, D});
        w.attn_q_a_norm = L.layer(il, "attn_q_a_norm.weight", {m.q_lora_rank});
        w.attn_q_b = L.layer(il, "attn_q_b.weight", {H * Dk, m.q_lora_rank});
    } else {
        w.attn_q = L.layer(il, "attn_q.weight", {H * Dk, D});
    }
    w.attn_kv_a_mqa = L.layer(il, "attn_kv_a_mqa.weight", {R + Dr, D});
    w.attn_kv_a_norm = L.layer(il, "attn_kv_a_norm.weight", {R});
    w.attn_k_b = L.layer(il, "attn_k_b.weight", {H, R, Dk - Dr});
    w.attn_v_b = L.layer(il, "attn_v_b.weight", {H, Dv, R});
    w.attn_output = L.layer(il, "attn_output.weight", {D, H * Dv});
    return w;
}

void MlaWeights::init_state(LayerState& s, const ModelConfig& c, int n_ctx, engine::DType kv_dtype) const {
    s.kv_latent = Tensor::empty({n_ctx, 1, c.mla.kv_lora_rank + c.mla.rope_dim}, kv_dtype);
}

Tensor MlaWeights::forward(const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) const {
    const MlaWeights& w = *this;
    const MlaConfig& m = c.mla;
    const Dim T = x.dim(0);
    const int H = c.n_head, R = m.kv_lora_rank, Dr = m.rope_dim, Dn = m.head_dim_k - Dr, Dv = m.head_dim_v;
    Tensor q = m.q_lora_rank > 0 ? engine::linear(engine::rms_norm(engine::linear(x, w.attn_q_a), w.attn_q_a_norm, c.rms_eps), w.attn_q_b)
                                 : engine::linear(x, w.attn_q);
    q = q.reshape({T, H, Dn + Dr});
    Tensor q_nope = q.slice(2, 0, Dn), q_pe = q.slice(2, Dn, Dr);             // (T, H, Dn), (T, H, Dr)
    Tensor kv = engine::linear(x, w.attn_kv_a_mqa);                            // (T, R + Dr)
    Tensor latent = engine::rms_norm(kv.slice(1, 0, R), w.attn_kv_a_norm, c.rms_eps).reshape({T, 1, R});
    Tensor k_pe = kv.slice(1, R, Dr).reshape({T, 1, Dr});
    if (c.rope.type != RopeType::NONE) {  // Kimi's MLA layers use no position encoding at all
        auto layout = c.rope.type == RopeType::NEOX ? engine::RopeLayout::NEOX : engine::RopeLayout::NORM;
        q_pe = engine::rope(q_pe, start_pos, Dr, c.rope.freq_base, layout, {}, rope_scaling(c.rope));
        k_pe = engine::rope(k_pe, start_pos, Dr, c.rope.freq_base, layout, {}, rope_scaling(c.rope));
    }
    // q_nope · (attn_k_b latent) = (attn_k_bᵀ q_nope) · latent: the per-head keys are never formed.
    Tensor q_latent = engine::linear_heads(q_nope, w.attn_k_b);                // (T, H, R)
    s.kv_latent.slice(0, start_pos, T).assign(engine::concat({latent, k_pe}, 2));
    Tensor out = engine::attention_latent(engine::concat({q_latent, q_pe}, 2), s.kv_latent, R, start_pos, m.kq_scale);  // (T, H, R)
    out = engine::linear_heads(out, w.attn_v_b);                               // (T, H, Dv)
    return engine::linear(out.reshape({T, H * Dv}), w.attn_output);            // (T, D)
}

}  // namespace llm
