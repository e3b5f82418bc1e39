// ModelConfig: everything the model code needs to know about an architecture, read from GGUF
// metadata in one place. Architecture switches are explicit fields, never probes for a weight.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace gguf { class File; }

namespace llm {

enum class RopeType { NONE, NORM, NEOX };  // NORM rotates adjacent pairs (llama); NEOX the two halves
enum class Gating { SOFTMAX = 1, SIGMOID = 2, SOFTMAX_WEIGHT = 3, SQRT_SOFTPLUS = 4 };  // llama.cpp's ids
enum class LayerKind { ATTENTION, MLA, GATED_DELTA_NET, KDA };

// How an architecture lays out its layers (ModelConfig::layer_kind).
enum class LayerPattern {
    ATTENTION,        // every layer attention
    MLA,              // every layer multi-head latent attention
    GATED_DELTA_NET,  // GatedDeltaNet, full attention every full_attention_interval-th layer
    KDA,              // KDA where head_count_kv is 0, MLA elsewhere (kimi-linear)
};
enum class QkNorm { NONE, PER_HEAD, FULL_WIDTH, PER_HEAD_IF_PRESENT };  // IF_PRESENT: when blk.0.attn_q_norm exists
enum class ChatFallback { NONE, HARMONY, GEMMA, LLAMA2_WITHOUT_PRE };  // template when the file has none (llm/chat_template)

// One row per GGUF architecture (general.architecture): every fact the metadata does not state, as
// llama.cpp's model definitions have it. Adding an architecture whose math exists is one row (config.cpp).
struct Architecture {
    const char* name;
    RopeType rope = RopeType::NEOX;
    LayerPattern layers = LayerPattern::ATTENTION;
    bool qkv_bias = false;
    bool attn_out_bias = false;
    QkNorm qk_norm = QkNorm::NONE;
    bool attn_gate = false;             // sigmoid output gate on the full-attention layers
    bool attn_sinks = false;
    bool swa_pattern = false;           // sliding_window_pattern: of every n layers the last is full
    const char* ffn_norm = "ffn_norm";  // GGUF name of the norm before the FFN
    // mixture of experts
    Gating gating = Gating::SOFTMAX;    // the gating function (the default of expert_gating_func when moe_keys)
    bool norm_topk = false;             // renormalize the chosen weights (or'ed with expert_weights_norm when moe_keys)
    bool moe_keys = true;               // reads expert_gating_func, expert_weights_norm and an optional exp_probs_b
    bool gated_shared_expert = false;   // one sigmoid-gated shared expert of expert_shared_feed_forward_length
    bool moe_biases = false;            // router and expert biases
    float swiglu_limit = 0.0f;          // clamped SwiGLU of the experts (0: plain)
    float swiglu_alpha = 1.0f;
    // recurrent layers
    bool ssm_qk_interleaved = false;    // see SsmConfig::qk_heads_interleaved
    bool ssm_fused_ba = false;          // GatedDeltaNet beta and alpha in one ssm_ba weight
    bool deepseek_yarn = false;         // rope.scaling.yarn_log_multiplier, folded into MLA's logit scale
    ChatFallback chat_fallback = ChatFallback::NONE;
};

// The row of `name`, or nullptr when the architecture is not supported.
const Architecture* find_architecture(std::string_view name);
// The chat template family of an architecture whose GGUF has none: its row's, or for the few
// architectures that only `tinyllm template` renders for (gemma), theirs.
ChatFallback chat_fallback_of(std::string_view name);
std::span<const Architecture> architectures();

struct RopeConfig {
    RopeType type = RopeType::NORM;
    int n_dims = 0;              // rotated dims per head (may be < head_dim)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;     // 1 / scaling factor (linear and YaRN)
    std::vector<int> sections;   // multi-section RoPE (qwen35); empty otherwise
    // YaRN (rope.scaling.type = yarn), as llama.cpp's context sets it up
    bool yarn = false;
    int yarn_orig_ctx = 0;
    float yarn_ext_factor = 0.0f;    // 1 when YaRN is on
    float yarn_attn_factor = 1.0f;   // the cos/sin magnitude handed to RoPE (before YaRN's own 1 + 0.1 ln s)
    float yarn_beta_fast = 32.0f;
    float yarn_beta_slow = 1.0f;
    float yarn_log_mul = 0.0f;       // deepseek2: mscale_all_dim (rope.scaling.yarn_log_multiplier / 0.1)
};

struct MoeConfig {
    int n_expert = 0;            // 0: dense model
    int n_expert_used = 0;
    int n_ff_exp = 0;            // width of one routed expert
    int n_expert_shared = 0;     // shared experts (their FFN width is n_ff_shexp)
    int n_ff_shexp = 0;
    bool shared_gate = false;    // sigmoid gate on the shared expert (ffn_gate_inp_shexp)
    int n_leading_dense = 0;     // the first layers use a dense FFN
    Gating gating = Gating::SOFTMAX;
    bool norm_topk = false;      // renormalize the selected weights to sum 1
    float weights_scale = 1.0f;  // routed scaling factor
    bool selection_bias = false; // exp_probs_b added to scores for selection only
    int n_group = 0;             // > 1: experts come in groups; only the n_group_used best groups compete
    int n_group_used = 0;        //      (a group's score: the sum of its two best experts)
    bool router_bias = false;    // ffn_gate_inp.bias (gpt-oss)
    bool expert_bias = false;    // ffn_*_exps.bias (gpt-oss)
    float swiglu_limit = 0.0f;   // gpt-oss clamped SwiGLU (0: plain SwiGLU)
    float swiglu_alpha = 1.0f;
};

struct MlaConfig {
    int q_lora_rank = 0;         // 0: q is projected directly (attn_q)
    int kv_lora_rank = 0;
    int head_dim_k = 0;          // nope + rope dims of one query/key head (key_length_mla)
    int head_dim_v = 0;          // value_length_mla
    int rope_dim = 0;            // the rotated part of each key/query head
    float kq_scale = 0.0f;       // attention logit scale: 1/sqrt(head_dim_k), times YaRN's mscale² (deepseek2)
};

struct SsmConfig {
    int conv_kernel = 0;         // causal conv1d width
    int d_state = 0;             // GatedDeltaNet head dim of k/q (ssm.state_size)
    int n_group = 0;             // k/q heads (ssm.group_count)
    int n_v_head = 0;            // v heads (ssm.time_step_rank)
    int d_inner = 0;             // v heads × v head dim (ssm.inner_size)
    bool qk_heads_interleaved = false;  // v head h reads q/k head h / (n_v_head / n_group) (qwen3next),
                                        // else h % n_group (qwen35: its converter orders the v heads so)
    bool fused_ba = false;              // beta and alpha projections in one ssm_ba weight (qwen3next)
    int kda_head_dim = 0;        // Kimi delta attention head dim
};

struct ModelConfig {
    std::string arch;
    std::string name;
    int n_vocab = 0;
    int n_ctx_train = 0;
    int n_embd = 0;
    int n_layer = 0;
    int n_head = 0;
    int n_head_kv = 0;           // of the attention layers
    int head_dim_k = 0;          // key_length (defaults to n_embd / n_head)
    int head_dim_v = 0;
    int n_ff = 0;                // dense FFN width
    int pooling_type = 0;        // <arch>.pooling_type, llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last (embedding models)
    float rms_eps = 1e-5f;
    bool tied_output = false;    // no output.weight: reuse token_embd
    bool qkv_bias = false;
    bool attn_out_bias = false;
    bool qk_norm = false;        // RMSNorm of q and k per head (or over the full width: qk_norm_full)
    bool qk_norm_full = false;
    bool attn_gate = false;      // gated attention output (qwen3next/qwen35 full-attention layers)
    std::string ffn_norm = "ffn_norm";  // GGUF name of the norm before the FFN (or post_attention_norm)
    bool attn_sinks = false;
    int sliding_window = 0;      // 0: none
    std::vector<bool> swa_layer; // per layer: sliding-window attention
    RopeConfig rope;
    MoeConfig moe;
    MlaConfig mla;
    SsmConfig ssm;
    std::vector<LayerKind> layer_kind;

    bool is_moe_layer(int il) const { return moe.n_expert > 0 && il >= moe.n_leading_dense; }
    bool has_recurrent_layers() const;
};

// Reads the config of `file`; throws naming the architecture when it is not supported and naming the
// key when a required key is missing.
ModelConfig read_config(const gguf::File& file);

const char* layer_kind_name(LayerKind k);

// Bytes of recurrent state (short-convolution inputs + delta-rule state, f32) one sequence carries in
// the GatedDeltaNet / KDA layers; 0 for attention-only models. A session's checkpoints cost this each.
int64_t recurrent_state_bytes(const ModelConfig& c);

}  // namespace llm
