// read_config: GGUF metadata -> ModelConfig. Per-architecture facts (rope layout, biases, norms,
// gating) follow llama.cpp's model definitions, which the golden files were made with.
#include "llm/config.h"

#include "gguf/gguf.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace llm {

namespace {

[[noreturn]] void fail(const gguf::File& f, const std::string& msg) {
    throw std::runtime_error("[model] " + f.path() + ": " + msg);
}

using enum LayerPattern;
using enum QkNorm;
using enum Gating;

// The architecture table: one row each, only what differs from Architecture's defaults.
const Architecture ARCHITECTURES[] = {
    {.name = "llama", .rope = RopeType::NORM, .chat_fallback = ChatFallback::LLAMA2_WITHOUT_PRE},
    {.name = "qwen2", .qkv_bias = true},
    {.name = "qwen3", .qk_norm = PER_HEAD},
    {.name = "qwen3moe", .qk_norm = PER_HEAD, .norm_topk = true, .moe_keys = false},
    {.name = "olmoe", .qk_norm = FULL_WIDTH, .moe_keys = false},
    {.name = "deepseek2", .rope = RopeType::NORM, .layers = MLA, .deepseek_yarn = true},
    {.name = "glm4moe", .qkv_bias = true, .qk_norm = PER_HEAD_IF_PRESENT, .ffn_norm = "post_attention_norm",
     .gating = SIGMOID},  // GLM-4.5-Air has no q/k norm
    {.name = "qwen3next", .layers = GATED_DELTA_NET, .qk_norm = PER_HEAD, .attn_gate = true, .ffn_norm = "post_attention_norm",
     .norm_topk = true, .moe_keys = false, .gated_shared_expert = true, .ssm_qk_interleaved = true, .ssm_fused_ba = true},
    {.name = "qwen35", .layers = GATED_DELTA_NET, .qk_norm = PER_HEAD, .attn_gate = true, .ffn_norm = "post_attention_norm"},
    {.name = "qwen35moe", .layers = GATED_DELTA_NET, .qk_norm = PER_HEAD, .attn_gate = true, .ffn_norm = "post_attention_norm",
     .norm_topk = true, .moe_keys = false, .gated_shared_expert = true},
    {.name = "kimi-linear", .rope = RopeType::NONE, .layers = KDA, .norm_topk = true},  // its MLA layers carry no RoPE
    {.name = "gpt-oss", .qkv_bias = true, .attn_out_bias = true, .attn_sinks = true, .swa_pattern = true,
     .ffn_norm = "post_attention_norm", .gating = SOFTMAX_WEIGHT, .moe_keys = false, .moe_biases = true,
     .swiglu_limit = 7.0f, .swiglu_alpha = 1.702f, .chat_fallback = ChatFallback::HARMONY},
};

// Sane bounds for sizes a GGUF declares, checked before anything is sized by them (a hostile file's
// block_count = INT32_MAX would otherwise allocate gigabytes of per-layer vectors). Real models stay
// far below: at most ~130 blocks, 16k-wide embeddings, 512 experts, 10M-token contexts.
struct Range {
    const char* key;
    int64_t min, max;
};
constexpr int64_t MAX_BLOCKS = 4096;
constexpr int64_t MAX_WIDTH = 1 << 20;     // embedding, FFN and head widths
constexpr int64_t MAX_HEADS = 1 << 14;
constexpr int64_t MAX_EXPERTS = 1 << 14;
constexpr int64_t MAX_CONTEXT = 1 << 28;

// An integer key within [min, max] (or `fallback` when absent and optional); the error names the key.
int32_t checked(const gguf::File& f, const Range& r, const int32_t* fallback = nullptr) {
    const gguf::Value* v = f.find(r.key);
    if (!v && fallback) return *fallback;
    int64_t x = f.get<int64_t>(r.key);
    if (x < r.min || x > r.max)
        fail(f, (r.key[0] == '.' ? f.architecture() : std::string()) + r.key + " = " + std::to_string(x) + " is outside " + std::to_string(r.min) + ".." +
                    std::to_string(r.max));
    return static_cast<int32_t>(x);
}
int32_t checked_or(const gguf::File& f, const Range& r, int32_t fallback) { return checked(f, r, &fallback); }

// Some keys are a scalar in most files and a per-layer array in others (kimi-linear head_count_kv).
std::vector<int> per_layer(const gguf::File& f, const std::string& key, int n_layer, int fallback) {
    const gguf::Value* v = f.find(key);
    if (!v) return std::vector<int>(n_layer, fallback);
    if (v->is_array()) {
        auto a = f.get<std::vector<int32_t>>(key);
        if (static_cast<int>(a.size()) != n_layer)
            fail(f, key + " has " + std::to_string(a.size()) + " entries for " + std::to_string(n_layer) + " layers");
        return {a.begin(), a.end()};
    }
    return std::vector<int>(n_layer, f.get<int32_t>(key));
}

// Frequency scaling as llama.cpp sets it up (llama_model::load_hparams, then llama_context): the
// scaling type defaults to linear (a no-op without a factor); YaRN's beta_fast/slow keep their defaults
// for every architecture here (llama.cpp reads them only for grok and mistral3).
void read_rope_scaling(const gguf::File& f, const Architecture& a, ModelConfig& c) {
    RopeConfig& r = c.rope;
    std::string scaling = f.get_or<std::string>(".rope.scaling.type", "linear");
    if (scaling != "none" && scaling != "linear" && scaling != "yarn")
        fail(f, "unsupported rope.scaling.type '" + scaling + "' (none, linear and yarn are)");
    float factor = f.get_or<float>(".rope.scaling.factor", f.get_or<float>(".rope.scale_linear", 0.0f));
    r.freq_scale = scaling == "none" || factor == 0.0f ? 1.0f : 1.0f / factor;
    if (!(r.freq_scale > 0.0f) || !std::isfinite(r.freq_scale)) fail(f, "rope.scaling.factor must be positive");
    r.yarn_orig_ctx = f.get_or<int32_t>(".rope.scaling.original_context_length", c.n_ctx_train);
    if (a.deepseek_yarn) r.yarn_log_mul = f.get_or<float>(".rope.scaling.yarn_log_multiplier", 0.0f) / 0.1f;  // stored × 0.1
    r.yarn = scaling == "yarn";
    r.yarn_ext_factor = r.yarn ? 1.0f : 0.0f;
    r.yarn_attn_factor = 1.0f;
    if (r.yarn) {
        if (r.yarn_orig_ctx <= 0) fail(f, "YaRN needs rope.scaling.original_context_length or context_length");
        float s = 1.0f / r.freq_scale;
        auto get_mscale = [&](float mscale) { return s <= 1.0f ? 1.0f : 0.1f * mscale * std::log(s) + 1.0f; };
        if (r.yarn_log_mul != 0.0f) {
            // DeepSeek-V2 configs set mscale = mscale_all_dim (llama.cpp assumes mscale 1 otherwise)
            float mscale = a.deepseek_yarn && r.yarn_log_mul != 1.0f ? r.yarn_log_mul : 1.0f;
            r.yarn_attn_factor = get_mscale(mscale) / get_mscale(r.yarn_log_mul);
        } else {
            r.yarn_attn_factor = get_mscale(1.0f);
        }
        r.yarn_attn_factor /= 1.0f + 0.1f * std::log(s);  // RoPE multiplies this back in when YaRN is on
    }
    r.yarn_attn_factor *= f.get_or<float>(".rope.scaling.attn_factor", 1.0f);
}

void read_rope(const gguf::File& f, const Architecture& a, ModelConfig& c) {
    c.rope.type = a.rope;  // qwen35's multi-section RoPE is NEOX-shaped
    c.rope.n_dims = checked_or(f, {".rope.dimension_count", 0, MAX_WIDTH}, c.head_dim_k);
    c.rope.freq_base = f.get_or<float>(".rope.freq_base", 10000.0f);
    if (f.has(".rope.dimension_sections")) {
        auto s = f.get<std::vector<int32_t>>(".rope.dimension_sections");
        c.rope.sections.assign(s.begin(), s.end());
    }
    read_rope_scaling(f, a, c);
}

void read_moe(const gguf::File& f, const Architecture& a, ModelConfig& c) {
    MoeConfig& m = c.moe;
    m.n_expert = checked_or(f, {".expert_count", 0, MAX_EXPERTS}, 0);
    if (m.n_expert == 0) return;
    m.n_expert_used = checked(f, {".expert_used_count", 1, m.n_expert});
    if (m.n_expert_used < 1 || m.n_expert_used > m.n_expert)
        fail(f, "expert_used_count " + std::to_string(m.n_expert_used) + " is outside 1.." + std::to_string(m.n_expert));
    m.n_ff_exp = checked_or(f, {".expert_feed_forward_length", 0, MAX_WIDTH}, c.n_ff);
    m.n_expert_shared = checked_or(f, {".expert_shared_count", 0, MAX_EXPERTS}, 0);
    m.n_leading_dense = checked_or(f, {".leading_dense_block_count", 0, c.n_layer}, 0);
    m.weights_scale = f.get_or<float>(".expert_weights_scale", 1.0f);
    if (m.weights_scale == 0.0f) m.weights_scale = 1.0f;
    m.n_group = checked_or(f, {".expert_group_count", 0, m.n_expert}, 0);
    m.n_group_used = checked_or(f, {".expert_group_used_count", 0, m.n_expert}, 0);
    if (m.n_group > 1 && (m.n_expert % m.n_group != 0 || m.n_group_used < 1 || m.n_group_used >= m.n_group))
        fail(f, "expert groups " + std::to_string(m.n_group) + " (used " + std::to_string(m.n_group_used) + ") do not divide " +
                    std::to_string(m.n_expert) + " experts");
    int gating = f.get_or<int32_t>(".expert_gating_func", 0);
    if (gating < 0 || gating > 4) fail(f, "unknown expert_gating_func " + std::to_string(gating));
    if (a.gated_shared_expert) {
        m.n_expert_shared = 1;  // always one sigmoid-gated shared expert, as wide as the dense FFN by default
        m.shared_gate = true;
        m.n_ff_shexp = checked_or(f, {".expert_shared_feed_forward_length", 0, MAX_WIDTH}, c.n_ff);
    } else {
        m.n_ff_shexp = m.n_ff_exp * std::max(1, m.n_expert_shared);
    }
    m.gating = a.moe_keys && gating ? static_cast<Gating>(gating) : a.gating;
    m.norm_topk = a.norm_topk || (a.moe_keys && f.get_or<bool>(".expert_weights_norm", false));
    m.router_bias = m.expert_bias = a.moe_biases;
    m.swiglu_limit = a.swiglu_limit;
    m.swiglu_alpha = a.swiglu_alpha;
    // DeepSeek-V3 and its descendants carry a selection bias; V2, under the same architecture, does not.
    if (a.moe_keys) m.selection_bias = f.find_tensor("blk." + std::to_string(m.n_leading_dense) + ".exp_probs_b.bias") != nullptr;
}

// Multi-head latent attention (deepseek2, kimi-linear's MLA layers), in the split form: attn_k_b and
// attn_v_b per head. key_length/value_length then describe the absorbed MQA form (kv_lora_rank + rope,
// kv_lora_rank); the per-head sizes are key_length_mla/value_length_mla.
void read_mla(const gguf::File& f, const Architecture& a, ModelConfig& c) {
    MlaConfig& m = c.mla;
    m.q_lora_rank = f.get_or<int32_t>(".attention.q_lora_rank", 0);
    m.kv_lora_rank = f.get<int32_t>(".attention.kv_lora_rank");
    if (!f.has(".attention.key_length_mla") || !f.has(".attention.value_length_mla"))
        fail(f, "MLA without key_length_mla/value_length_mla (an old GGUF with a fused attn_kv_b) is not supported; "
                "convert the model again with a current llama.cpp");
    m.head_dim_k = f.get<int32_t>(".attention.key_length_mla");
    m.head_dim_v = f.get<int32_t>(".attention.value_length_mla");
    m.rope_dim = f.get<int32_t>(".rope.dimension_count");
    if (m.q_lora_rank < 0 || m.kv_lora_rank <= 0 || m.head_dim_v <= 0 || m.rope_dim <= 0 || m.rope_dim % 2 ||
        m.head_dim_k <= m.rope_dim)
        fail(f, "MLA sizes do not fit: q_lora_rank " + std::to_string(m.q_lora_rank) + ", kv_lora_rank " + std::to_string(m.kv_lora_rank) +
                    ", key_length_mla " + std::to_string(m.head_dim_k) + ", value_length_mla " + std::to_string(m.head_dim_v) +
                    ", rope.dimension_count " + std::to_string(m.rope_dim));
    if (f.get_or<float>(".attention.temperature_scale", 0.0f) != 0.0f)  // Mistral-Large-3-style query scaling
        fail(f, "attention.temperature_scale (attention temperature tuning) is not supported");
    m.kq_scale = 1.0f / std::sqrt(float(m.head_dim_k));
    if (a.deepseek_yarn) {
        // llama.cpp folds YaRN's attention temperature into the logit scale: mscale² with
        // mscale = attn_factor · (1 + 0.1 ln s) · (1 + 0.1 · yarn_log_mul · ln s), s = 1 / freq_scale.
        float ln_s = std::log(1.0f / c.rope.freq_scale);
        float mscale = c.rope.yarn_attn_factor * (1.0f + 0.1f * ln_s) * (1.0f + 0.1f * c.rope.yarn_log_mul * ln_s);
        m.kq_scale *= mscale * mscale;
    }
}

}  // namespace

std::span<const Architecture> architectures() { return ARCHITECTURES; }

const Architecture* find_architecture(std::string_view name) {
    for (const Architecture& a : ARCHITECTURES)
        if (name == a.name) return &a;
    return nullptr;
}

ChatFallback chat_fallback_of(std::string_view name) {
    struct ChatOnly {
        const char* name;
        ChatFallback fallback;
    };
    static constexpr ChatOnly CHAT_ONLY[] = {{"gemma", ChatFallback::GEMMA}, {"gemma2", ChatFallback::GEMMA}, {"gemma3", ChatFallback::GEMMA}};
    if (const Architecture* a = find_architecture(name)) return a->chat_fallback;
    for (const ChatOnly& c : CHAT_ONLY)
        if (name == c.name) return c.fallback;
    return ChatFallback::NONE;
}

bool ModelConfig::has_recurrent_layers() const {
    return std::any_of(layer_kind.begin(), layer_kind.end(),
                       [](LayerKind k) { return k == LayerKind::GATED_DELTA_NET || k == LayerKind::KDA; });
}

const char* layer_kind_name(LayerKind k) {
    switch (k) {
    case LayerKind::ATTENTION: return "attention";
    case LayerKind::MLA: return "mla";
    case LayerKind::GATED_DELTA_NET: return "gated_delta_net";
    case LayerKind::KDA: return "kda";
    }
    return "?";
}

int64_t recurrent_state_bytes(const ModelConfig& c) {
    int64_t floats = 0;
    for (LayerKind k : c.layer_kind) {
        if (k == LayerKind::GATED_DELTA_NET) {
            const int64_t dv = c.ssm.n_v_head > 0 ? c.ssm.d_inner / c.ssm.n_v_head : 0;
            const int64_t channels = 2 * int64_t(c.ssm.n_group) * c.ssm.d_state + c.ssm.d_inner;
            floats += (c.ssm.conv_kernel - 1) * channels + int64_t(c.ssm.n_v_head) * dv * c.ssm.d_state;
        } else if (k == LayerKind::KDA) {
            const int64_t hd = int64_t(c.n_head) * c.ssm.kda_head_dim;
            floats += (c.ssm.conv_kernel - 1) * 3 * hd + hd * c.ssm.kda_head_dim;
        }
    }
    return floats * int64_t(sizeof(float));
}

ModelConfig read_config(const gguf::File& f) {
    ModelConfig c;
    c.arch = f.architecture();
    if (c.arch.empty()) fail(f, "general.architecture is missing");
    const Architecture* row = find_architecture(c.arch);
    if (!row) {
        std::string list;
        for (const Architecture& a : ARCHITECTURES) list += std::string(list.empty() ? "" : ", ") + a.name;
        fail(f, "unsupported architecture '" + c.arch + "' (supported: " + list + ")");
    }
    const Architecture& a = *row;
    c.name = f.get_or<std::string>("general.name", "");
    c.n_embd = checked(f, {".embedding_length", 1, MAX_WIDTH});
    const int n_layer_all = checked(f, {".block_count", 1, MAX_BLOCKS});
    // Next-token-prediction (MTP) blocks follow the trunk (GLM-4.x, DeepSeek-V3); generation skips them.
    c.n_layer = n_layer_all - checked_or(f, {".nextn_predict_layers", 0, n_layer_all - 1}, 0);
    c.n_head = checked(f, {".attention.head_count", 1, MAX_HEADS});
    c.n_ctx_train = checked_or(f, {".context_length", 1, MAX_CONTEXT}, 2048);
    c.n_ff = checked_or(f, {".feed_forward_length", 0, MAX_WIDTH}, 0);
    c.rms_eps = f.get_or<float>(".attention.layer_norm_rms_epsilon", 1e-5f);
    c.pooling_type = f.get_or<int32_t>(".pooling_type", 0);
    c.head_dim_k = checked_or(f, {".attention.key_length", 1, MAX_WIDTH}, std::max(1, c.n_embd / c.n_head));
    c.head_dim_v = checked_or(f, {".attention.value_length", 1, MAX_WIDTH}, c.head_dim_k);

    std::vector<int> kv = per_layer(f, c.arch + ".attention.head_count_kv", n_layer_all, c.n_head);
    for (int h : kv)
        if (h < 0 || h > c.n_head)
            fail(f, "attention.head_count_kv " + std::to_string(h) + " is outside 0.." + std::to_string(c.n_head));
    kv.resize(c.n_layer);
    c.n_head_kv = *std::max_element(kv.begin(), kv.end());

    const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
    if (!emb) fail(f, "missing tensor 'token_embd.weight'");
    int64_t n_vocab = emb->dims.size() > 1 ? emb->dims[1] : 0;
    if (n_vocab <= 0 || n_vocab > INT32_MAX) fail(f, "token_embd.weight has " + std::to_string(n_vocab) + " rows");
    c.n_vocab = static_cast<int>(n_vocab);
    c.tied_output = f.find_tensor("output.weight") == nullptr;

    c.qkv_bias = a.qkv_bias;
    c.attn_out_bias = a.attn_out_bias;
    c.qk_norm = a.qk_norm == PER_HEAD || a.qk_norm == FULL_WIDTH ||
                (a.qk_norm == PER_HEAD_IF_PRESENT && f.find_tensor("blk.0.attn_q_norm.weight"));
    c.qk_norm_full = a.qk_norm == FULL_WIDTH;
    c.attn_gate = a.attn_gate;
    c.ffn_norm = a.ffn_norm;
    c.attn_sinks = a.attn_sinks;

    read_rope(f, a, c);
    read_moe(f, a, c);

    // Sliding window: with swa_pattern (gpt-oss), of every `pattern` layers the last is full attention
    // (llama.cpp's set_swa_pattern, default 2: even layers slide).
    c.swa_layer.assign(c.n_layer, false);
    c.sliding_window = checked_or(f, {".attention.sliding_window", 0, MAX_CONTEXT}, 0);
    if (a.swa_pattern && c.sliding_window > 0) {
        int pattern = f.get_or<int32_t>(".attention.sliding_window_pattern", 2);
        if (pattern < 0) fail(f, "sliding_window_pattern must not be negative");
        for (int il = 0; il < c.n_layer; il++) c.swa_layer[il] = pattern == 0 || il % pattern < pattern - 1;
    }

    // Layer kinds, and the keys each kind reads.
    c.layer_kind.assign(c.n_layer, LayerKind::ATTENTION);
    switch (a.layers) {
    case ATTENTION: break;
    case MLA:
        c.layer_kind.assign(c.n_layer, LayerKind::MLA);
        read_mla(f, a, c);
        break;
    case GATED_DELTA_NET: {
        int interval = f.get<int32_t>(".full_attention_interval");
        if (interval <= 0) fail(f, "full_attention_interval must be positive");
        for (int il = 0; il < c.n_layer; il++)
            c.layer_kind[il] = (il + 1) % interval == 0 ? LayerKind::ATTENTION : LayerKind::GATED_DELTA_NET;
        c.ssm.conv_kernel = checked(f, {".ssm.conv_kernel", 1, 64});
        c.ssm.d_state = checked(f, {".ssm.state_size", 1, MAX_WIDTH});
        c.ssm.n_group = checked(f, {".ssm.group_count", 1, MAX_HEADS});
        c.ssm.n_v_head = checked(f, {".ssm.time_step_rank", 1, MAX_HEADS});
        c.ssm.d_inner = checked(f, {".ssm.inner_size", 1, MAX_WIDTH});
        c.ssm.qk_heads_interleaved = a.ssm_qk_interleaved;
        c.ssm.fused_ba = a.ssm_fused_ba;
        break;
    }
    case KDA:
        read_mla(f, a, c);
        for (int il = 0; il < c.n_layer; il++) c.layer_kind[il] = kv[il] == 0 ? LayerKind::KDA : LayerKind::MLA;
        c.ssm.conv_kernel = checked(f, {".ssm.conv_kernel", 1, 64});
        c.ssm.kda_head_dim = checked(f, {".kda.head_dim", 1, MAX_WIDTH});
        break;
    }
    return c;
}

}  // namespace llm
