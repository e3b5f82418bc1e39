// The building blocks of every architecture, one file each: weights named as in GGUF, a loader and a
// forward that reads like the math. Shapes: T tokens, D = n_embd, H heads, Hkv KV heads, Dk/Dv head dims.
// Internal to llm/ (model.cpp composes them).
#pragma once

#include "engine/tensor.h"
#include "llm/config.h"
#include "llm/weights.h"

#include <variant>

namespace llm {

using engine::Dim;
using engine::Tensor;

// A layer's token mixer (attention, MLA, GatedDeltaNet, KDA) and its feed-forward (dense, MoE) are each
// one of their kinds (Mixer, FeedForward below); every kind has the same three members:
//   static W load(L, config, il)   its weights, checked against the config
//   init_state(...)                its part of a sequence's LayerState (mixers)
//   forward(config, x, ...)        (T, D) -> (T, D)

// Per-layer sequence state. Attention layers use k/v; recurrent layers (GatedDeltaNet, KDA) conv/ssm.
struct LayerState {
    Tensor k;          // attention: (C, Hkv, Dk) f16/f32
    Tensor v;          // attention: (C, Hkv, Dv)
    Tensor kv_latent;  // MLA: (C, 1, kv_lora_rank + rope_dim): the normalized latent, then the rotated key
    Tensor conv;       // recurrent: (K-1, conv channels) f32, the last inputs of the short convolution
    Tensor ssm;        // recurrent: (Hv, Dv, Dk) f32, the delta-rule state per head
};

// One forward over a batch of sequences whose KV lives in a shared paged pool (llm/batch.h): token t
// is at position positions[t] of sequence seq[t] and its keys and values go to pool row slots[t].
struct PagedBatch {
    Tensor positions;    // (T) i32
    Tensor slots;        // (T) i32
    Tensor seq;          // (T) i32 rows of block_table
    Tensor block_table;  // (S, MB) i32 block ids: position p of sequence s is row table[s, p / BS] * BS + p % BS
    int block_size = 0;  // BS
    Tensor state_load, state_save;  // (T) i32 recurrent checkpoint rows or -1 (engine::SeqRows); optional
};

// --- attention (llm/attention.cpp): GQA, RoPE, qkv bias, q/k norm ------------------------------------
struct AttentionWeights {
    engine::LinearWeight attn_qkv;        // attn_q, attn_k, attn_v: (H*Dk, D), (Hkv*Dk, D), (Hkv*Dv, D), one input
    Tensor attn_q_b, attn_k_b, attn_v_b;  // biases (qkv_bias)
    Tensor attn_q_norm, attn_k_norm;      // (Dk) per head, or the full width (qk_norm_full)
    engine::LinearWeight attn_output;     // (D, H*Dv)
    Tensor attn_output_b;                 // (D)
    Tensor attn_sinks;                    // (H) per-head sink logits (attn_sinks)
    int window = 0;                       // this layer's sliding window (0: full attention)
    Tensor rope_freq_factors;             // (rope_dim/2) multi-section RoPE: +inf where a pair stays still

    static AttentionWeights load(const WeightLoader& L, const ModelConfig& c, int il);
    void init_state(LayerState& s, const ModelConfig& c, int n_ctx, engine::DType kv_dtype) const;
    Tensor forward(const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) const;
    // The same for a batch of sequences: keys and values into rows of the pools (n_rows, Hkv, Dk|Dv).
    Tensor forward_paged(const ModelConfig& c, const Tensor& x, const PagedBatch& b, const Tensor& k_pool, const Tensor& v_pool) const;

    struct Qkv { Tensor q, k, v, gate; };  // (T, H, Dk), (T, Hkv, Dk), (T, Hkv, Dv), (T, H, Dv) or unset
    Qkv project(const ModelConfig& c, const Tensor& x) const;     // projections, biases, q/k norm: before RoPE
    Tensor finish(const ModelConfig& c, Tensor out, const Tensor& gate) const;  // gate, attn_output: (T, D)
};
// The GGUF's RoPE scaling (linear or YaRN) in the form engine::rope takes it.
engine::RopeScaling rope_scaling(const RopeConfig& r);

// --- feed-forward (llm/ffn.cpp): SwiGLU ---------------------------------------------------------------
struct FfnWeights {
    engine::LinearWeight ffn_gate_up;  // ffn_gate, ffn_up: (F, D) each, one input
    engine::LinearWeight ffn_down;     // (D, F)

    static FfnWeights load(const WeightLoader& L, const ModelConfig& c, int il);  // of width n_ff
    Tensor forward(const ModelConfig& c, const Tensor& x) const;
};
FfnWeights load_ffn(const WeightLoader& L, int il, int n_ff, int n_embd, const std::string& suffix = "");
Tensor ffn(const FfnWeights& w, const Tensor& x);  // (T, D) -> (T, D)

// --- mixture of experts (llm/moe.cpp): router, top-k routed experts, shared experts ------------------
// E experts of width F (n_ff_exp), k used per token (n_expert_used), shared experts of width n_ff_shexp.
struct MoeWeights {
    Tensor ffn_gate_inp;                     // (E, D) router
    Tensor ffn_gate_inp_b;                   // (E) router bias (router_bias)
    Tensor exp_probs_b;                      // (E) added to the scores for choosing only (selection_bias)
    Tensor ffn_gate_exps, ffn_up_exps;       // (E, F, D)
    Tensor ffn_down_exps;                    // (E, D, F)
    Tensor ffn_gate_exps_b, ffn_up_exps_b;   // (E, F) (expert_bias)
    Tensor ffn_down_exps_b;                  // (E, D)
    FfnWeights shexp;                        // ffn_{gate,up,down}_shexp (n_expert_shared > 0)
    Tensor ffn_gate_inp_shexp;               // (1, D) sigmoid gate of the shared expert (shared_gate)

    static MoeWeights load(const WeightLoader& L, const ModelConfig& c, int il);
    Tensor forward(const ModelConfig& c, const Tensor& x) const;
};
MoeWeights load_moe(const WeightLoader& L, const MoeConfig& m, int il, int n_embd);
// (T, D) -> (T, D): Σ over the chosen experts of weight · expert(x), plus the shared expert.
Tensor moe_ffn(const MoeWeights& w, const MoeConfig& m, const Tensor& x);
// The router alone: expert ids (T, k) i32 and their weights (T, k) f32 (gating, bias, groups, norm, scale).
std::pair<Tensor, Tensor> moe_route(const MoeWeights& w, const MoeConfig& m, const Tensor& x);

// --- multi-head latent attention (llm/mla.cpp): DeepSeek-V2/V3, Moonlight, GLM-4.7-Flash, Kimi ---------
// R = kv_lora_rank, Dr = rope_dim, Dn = nope dims (head_dim_k - Dr), Dv = value dims per head.
struct MlaWeights {
    engine::LinearWeight attn_q_a;             // q LoRA: (Rq, D)
    Tensor attn_q_a_norm;                      // (Rq)
    engine::LinearWeight attn_q_b;             // (H*(Dn+Dr), Rq)
    engine::LinearWeight attn_q;               // without q LoRA: (H*(Dn+Dr), D)
    engine::LinearWeight attn_kv_a_mqa;        // (R + Dr, D): the latent and the key part shared by all heads
    Tensor attn_kv_a_norm;                     // (R)
    Tensor attn_k_b;                           // (H, R, Dn): latent -> each head's key (nope part)
    Tensor attn_v_b;                           // (H, Dv, R): latent -> each head's value
    engine::LinearWeight attn_output;          // (D, H*Dv)

    static MlaWeights load(const WeightLoader& L, const ModelConfig& c, int il);
    void init_state(LayerState& s, const ModelConfig& c, int n_ctx, engine::DType kv_dtype) const;
    Tensor forward(const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) const;
    // The same for a batch of sequences: each token's latent and key part into its row of `pool`
    // (n_rows, 1, R + Dr).
    Tensor forward_paged(const ModelConfig& c, const Tensor& x, const PagedBatch& b, const Tensor& pool) const;
};

// --- the recurrent mixers' state (llm/gated_delta_net.cpp) ---------------------------------------------
// Where a recurrent mixer's state lives, and its two stateful ops over it: one sequence's LayerState
// with its tokens from start_pos (a Session), or each sequence's row of the pools of a batch (PagedBatch:
// rows b.seq[t], the tokens of one sequence contiguous; updated in place).
class RecurrentState {
public:
    RecurrentState(LayerState& s, const Dim& start_pos) : one_(&s), start_pos_(start_pos) {}
    RecurrentState(const PagedBatch& b, const Tensor& conv_pool, const Tensor& ssm_pool) : batch_(&b), conv_pool_(conv_pool), ssm_pool_(ssm_pool) {}
    // engine::causal_conv1d: x (T, C), w (C, K) -> y (T, C); the state carries the last K-1 inputs.
    Tensor conv(const Tensor& x, const Tensor& w);
    // engine::delta_rule -> o (T, Hv, Dv); the state carries S.
    Tensor delta(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta, double scale,
                 engine::HeadMap head_map = engine::HeadMap::MODULO);

private:
    LayerState* one_ = nullptr;
    Dim start_pos_ = 0;
    const PagedBatch* batch_ = nullptr;
    Tensor conv_pool_, ssm_pool_;  // (S, K-1, C), (S, Hv, Dv, Dk)
};

// --- GatedDeltaNet (llm/gated_delta_net.cpp): qwen3next / qwen35 linear-attention layers ------------
// Hk = ssm.group_count q/k heads of Dk = ssm.state_size, Hv = ssm.time_step_rank v heads of Dv.
struct GatedDeltaNetWeights {
    engine::LinearWeight attn_qkv;   // (2*Hk*Dk + Hv*Dv, D): q, k, v before the short convolution
    engine::LinearWeight attn_gate;  // (Hv*Dv, D): z, the output gate
    Tensor ssm_conv1d;            // (2*Hk*Dk + Hv*Dv, K)
    Tensor ssm_dt_b;              // (Hv) ssm_dt.bias
    Tensor ssm_a;                 // (Hv) = -exp(A_log)
    engine::LinearWeight ssm_beta_alpha;  // (Hv, D) each (qwen35): the betas and the alphas side by side
    engine::LinearWeight ssm_ba;          // (2*Hv, D) (qwen3next): per k head, Hv/Hk betas then Hv/Hk alphas
    Tensor ssm_norm;                      // (Dv)
    engine::LinearWeight ssm_out;         // (D, Hv*Dv)

    static GatedDeltaNetWeights load(const WeightLoader& L, const ModelConfig& c, int il);
    void init_state(LayerState& s, const ModelConfig& c, int n_ctx, engine::DType kv_dtype) const;  // f32 state
    Tensor forward(const ModelConfig& c, const Tensor& x, RecurrentState& s) const;
    Tensor forward(const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) const;
};

// --- Kimi delta attention (llm/kda.cpp): kimi-linear's recurrent layers --------------------------------
// H = n_head heads of Dh = kda.head_dim for q, k and v alike.
struct KdaWeights {
    engine::LinearWeight attn_qkv;  // attn_q, attn_k, attn_v: (H*Dh, D) each, side by side
    Tensor ssm_conv1d_qkv;          // (3*H*Dh, K) f32: the q, k and v short convolutions side by side
    engine::LinearWeight ssm_f_a, ssm_f_b;  // (Dh, D), (H*Dh, Dh): the per-channel decay's low-rank projection
    Tensor ssm_dt_b;                // (H*Dh) ssm_dt.bias
    Tensor ssm_a;                   // (H) = -exp(A_log)
    engine::LinearWeight ssm_beta;          // (H, D)
    engine::LinearWeight ssm_g_a, ssm_g_b;  // (Dh, D), (H*Dh, Dh): the output gate
    Tensor ssm_norm;                        // (Dh)
    engine::LinearWeight attn_output;       // (D, H*Dh)

    static KdaWeights load(const WeightLoader& L, const ModelConfig& c, int il);
    void init_state(LayerState& s, const ModelConfig& c, int n_ctx, engine::DType kv_dtype) const;  // f32 state
    Tensor forward(const ModelConfig& c, const Tensor& x, RecurrentState& s) const;
    Tensor forward(const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) const;
};

// --- a layer: its mixer and its feed-forward, each one of their kinds ---------------------------------
using Mixer = std::variant<AttentionWeights, MlaWeights, GatedDeltaNetWeights, KdaWeights>;  // as LayerKind
using FeedForward = std::variant<FfnWeights, MoeWeights>;
Mixer load_mixer(const WeightLoader& L, const ModelConfig& c, int il);            // of c.layer_kind[il]
FeedForward load_feed_forward(const WeightLoader& L, const ModelConfig& c, int il);  // MoE where c.is_moe_layer(il)
// The forward of the kind held: (T, D) -> (T, D).
Tensor mix(const Mixer& m, const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s);
Tensor feed_forward(const FeedForward& f, const ModelConfig& c, const Tensor& x);

// x / max(‖x‖, eps) over the last axis (ggml_l2_norm): the q/k normalization of the delta-rule layers.
Tensor l2_norm(const Tensor& x, double eps);

}  // namespace llm
