// The building blocks of every architecture, one file each: weights named as in GGUF, a loader and a
// forward that reads like the math. Shapes: T tokens, D = n_embd, H heads, Hkv KV heads, Dk/Dv head dims.
// Internal to llm/ (model.cpp composes them).
#pragma once

#include "engine/tensor.h"
#include "llm/config.h"
#include "llm/weights_impl.h"

namespace llm {

using engine::Dim;
using engine::Tensor;

// Per-layer sequence state. Attention layers use k/v; recurrent layers (GatedDeltaNet, KDA) their own.
struct LayerState {
    Tensor k;  // attention: (C, Hkv, Dk) f16/f32
    Tensor v;  // attention: (C, Hkv, Dv)
    Tensor kv_latent;  // MLA: (C, 1, kv_lora_rank + rope_dim): the normalized latent, then the rotated key
};

// --- attention (llm/attention.cpp): GQA, RoPE, qkv bias, q/k norm ------------------------------------
struct AttentionWeights {
    Tensor attn_q, attn_k, attn_v;        // (H*Dk, D), (Hkv*Dk, D), (Hkv*Dv, D)
    Tensor attn_q_b, attn_k_b, attn_v_b;  // biases (qkv_bias)
    Tensor attn_q_norm, attn_k_norm;      // (Dk) per head, or the full width (qk_norm_full)
    Tensor attn_output, attn_output_b;    // (D, H*Dv), (D)
};
AttentionWeights load_attention(const WeightLoader& L, const ModelConfig& c, int il);
void init_attention_state(LayerState& s, const ModelConfig& c, int n_ctx, engine::DType kv_dtype);
Tensor attention(const AttentionWeights& w, const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s);

// --- feed-forward (llm/ffn.cpp): SwiGLU ---------------------------------------------------------------
struct FfnWeights {
    Tensor ffn_gate, ffn_up;  // (F, D)
    Tensor ffn_down;          // (D, F)
};
FfnWeights load_ffn(const WeightLoader& L, int il, int n_ff, int n_embd, const std::string& suffix = "");
Tensor ffn(const FfnWeights& w, const Tensor& x);  // (T, D) -> (T, D)

// --- multi-head latent attention (llm/mla.cpp): DeepSeek-V2/V3, Moonlight, GLM-4.7-Flash, Kimi ---------
// R = kv_lora_rank, Dr = rope_dim, Dn = nope dims (head_dim_k - Dr), Dv = value dims per head.
struct MlaWeights {
    Tensor attn_q_a, attn_q_a_norm, attn_q_b;  // q LoRA: (Rq, D), (Rq), (H*(Dn+Dr), Rq)
    Tensor attn_q;                             // without q LoRA: (H*(Dn+Dr), D)
    Tensor attn_kv_a_mqa;                      // (R + Dr, D): the latent and the key part shared by all heads
    Tensor attn_kv_a_norm;                     // (R)
    Tensor attn_k_b;                           // (H, R, Dn): latent -> each head's key (nope part)
    Tensor attn_v_b;                           // (H, Dv, R): latent -> each head's value
    Tensor attn_output;                        // (D, H*Dv)
};
MlaWeights load_mla(const WeightLoader& L, const ModelConfig& c, int il);
void init_mla_state(LayerState& s, const ModelConfig& c, int n_ctx, engine::DType kv_dtype);
Tensor mla_attention(const MlaWeights& w, const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s);

// The engine's RoPE frequency scaling for a config (linear, YaRN).
inline engine::RopeScaling rope_scaling(const RopeConfig& r) {
    engine::RopeScaling s;
    s.freq_scale = r.freq_scale;
    s.ext_factor = r.yarn_ext_factor;
    s.attn_factor = r.yarn_attn_factor;
    s.n_ctx_orig = r.yarn_orig_ctx;
    s.beta_fast = r.yarn_beta_fast;
    s.beta_slow = r.yarn_beta_slow;
    return s;
}

}  // namespace llm
