// The transformer: weights named as in GGUF, mmap'd and never expanded, and a forward pass built on
// the engine that reads like the math. Shapes in comments: T tokens, D = n_embd, H heads of Dh.
#pragma once

#include "engine/tensor.h"
#include "llm/config.h"

#include <memory>
#include <string>
#include <vector>

namespace gguf { class File; }

namespace llm {

using engine::Tensor;

struct LayerWeights {
    Tensor attn_norm;                       // (D)
    Tensor attn_q, attn_k, attn_v;          // (H*Dk, D), (Hkv*Dk, D), (Hkv*Dv, D); q also holds the gate when attn_gate
    Tensor attn_q_b, attn_k_b, attn_v_b;    // biases (qkv_bias)
    Tensor attn_q_norm, attn_k_norm;        // (Dk) per head, or (H*Dk) / (Hkv*Dk) over the full width
    Tensor attn_output, attn_output_b;      // (D, H*Dv)
    Tensor ffn_norm;                        // (D)
    Tensor ffn_gate, ffn_up;                // (F, D)
    Tensor ffn_down;                        // (D, F)
};

// Per-sequence state the forward pass reads and writes: the KV cache of every attention layer.
struct KvCache {
    std::vector<Tensor> k;  // per layer: (C, Hkv, Dk), f16 or f32
    std::vector<Tensor> v;  // per layer: (C, Hkv, Dv)
    int n_ctx = 0;
};

class Model {
public:
    // Loads the config and maps every tensor; throws naming the file and the missing tensor.
    static std::unique_ptr<Model> load(const std::string& path);

    const ModelConfig& config() const { return config_; }
    const gguf::File& file() const { return *file_; }

    KvCache new_kv_cache(int n_ctx, engine::DType dtype) const;

    // Logits (n_out, V) f32 for tokens (T) i32 at positions start_pos..start_pos+T-1; n_out = 1 gives
    // only the last token's logits, n_out = T all of them. Writes this chunk's K/V into the cache.
    Tensor forward(const Tensor& tokens, const engine::Dim& start_pos, KvCache& cache, bool all_logits) const;

private:
    Tensor attention(int il, const Tensor& x, const engine::Dim& start_pos, KvCache& cache) const;
    Tensor feed_forward(int il, const Tensor& x) const;

    std::shared_ptr<const gguf::File> file_;
    ModelConfig config_;
    Tensor token_embd;   // (V, D)
    Tensor output_norm;  // (D)
    Tensor output;       // (V, D); token_embd when tied
    std::vector<LayerWeights> layers;
};

}  // namespace llm
