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
        w.attn_q_a = engine::linear_weight({L.layer_matrix(il, "attn_q_a.weight", {m.q_lora_rank, D})});
        w.attn_q_a_norm = L.layer(il, "attn_q_a_norm.weight", {m.q_lora_rank});
        w.attn_q_b = engine::linear_weight({L.layer_matrix(il, "attn_q_b.weight", {H * Dk, m.q_lora_rank})});
    } else {
        w.attn_q = engine::linear_weight({L.layer_matrix(il, "attn_q.weight", {H * Dk, D})});
    }
    w.attn_kv_a_mqa = engine::linear_weight({L.layer_matrix(il, "attn_kv_a_mqa.weight", {R + Dr, D})});
    w.attn_kv_a_norm = L.layer(il, "attn_kv_a_norm.weight", {R});
    w.attn_k_b = L.layer(il, "attn_k_b.weight", {H, R, Dk - Dr});
    w.attn_v_b = L.layer(il, "attn_v_b.weight", {H, Dv, R});
    w.attn_output = engine::linear_weight({L.layer_matrix(il, "attn_output.weight", {D, H * Dv})});
    return w;
}

void MlaWeights::init_state(LayerState& s, const ModelConfig& c, int n_ctx, engine::DType kv_dtype) const {
    s.kv_latent = Tensor::empty({n_ctx, 1, c.mla.kv_lora_rank + c.mla.rope_dim}, kv_dtype);
}

namespace {
// The query in the latent space and the token's cache row, rotated at `at` (start_pos or positions).
template <class At>
std::pair<Tensor, Tensor> latent_qkv(const MlaWeights& w, const ModelConfig& c, const Tensor& x, const At& at) {
    const MlaConfig& m = c.mla;
    const Dim T = x.dim(0);
    const int H = c.n_head, R = m.kv_lora_rank, Dr = m.rope_dim, Dn = m.head_dim_k - Dr;
    Tensor q = m.q_lora_rank > 0 ? engine::linear(engine::rms_norm(engine::linear(x, w.attn_q_a), w.attn_q_a_norm, c.rms_eps), w.attn_q_b)
                                 : engine::linear(x, w.attn_q);
    q = q.reshape({T, H, Dn + Dr});
    Tensor q_nope = q.slice(2, 0, Dn), q_pe = q.slice(2, Dn, Dr);             // (T, H, Dn), (T, H, Dr)
    Tensor kv = engine::linear(x, w.attn_kv_a_mqa);                            // (T, R + Dr)
    Tensor latent = engine::rms_norm(kv.slice(1, 0, R), w.attn_kv_a_norm, c.rms_eps).reshape({T, 1, R});
    Tensor k_pe = kv.slice(1, R, Dr).reshape({T, 1, Dr});
    if (c.rope.type != RopeType::NONE) {  // Kimi's MLA layers use no position encoding at all
        auto layout = c.rope.type == RopeType::NEOX ? engine::RopeLayout::NEOX : engine::RopeLayout::NORM;
        q_pe = engine::rope(q_pe, at, Dr, c.rope.freq_base, layout, {}, rope_scaling(c.rope));
        k_pe = engine::rope(k_pe, at, Dr, c.rope.freq_base, layout, {}, rope_scaling(c.rope));
    }
    // q_nope · (attn_k_b latent) = (attn_k_bᵀ q_nope) · latent: the per-head keys are never formed.
    Tensor q_latent = engine::linear_heads(q_nope, w.attn_k_b);                // (T, H, R)
    return {engine::concat({q_latent, q_pe}, 2), engine::concat({latent, k_pe}, 2)};  // (T, H, R + Dr), (T, 1, R + Dr)
}

Tensor values_out(const MlaWeights& w, const ModelConfig& c, Tensor out) {  // (T, H, R) -> (T, D)
    const Dim T = out.dim(0);
    out = engine::linear_heads(out, w.attn_v_b);                               // (T, H, Dv)
    return engine::linear(out.reshape({T, c.n_head * c.mla.head_dim_v}), w.attn_output);
}
}  // namespace

Tensor MlaWeights::forward(const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) const {
    auto [q, row] = latent_qkv(*this, c, x, start_pos);
    s.kv_latent.slice(0, start_pos, x.dim(0)).assign(row);
    return values_out(*this, c, engine::attention_latent(q, s.kv_latent, c.mla.kv_lora_rank, start_pos, c.mla.kq_scale));  // (T, H, R)
}

Tensor MlaWeights::forward_paged(const ModelConfig& c, const Tensor& x, const PagedBatch& b, const Tensor& pool) const {
    auto [q, row] = latent_qkv(*this, c, x, b.positions);
    Tensor stored = engine::kv_store(pool, row, b.slots);  // the pool after the store
    return values_out(*this, c, engine::paged_attention_latent(q, stored, c.mla.kv_lora_rank, b.positions, b.seq, b.block_table, b.block_size,
                                                               c.mla.kq_scale));
}

}  // namespace llm
