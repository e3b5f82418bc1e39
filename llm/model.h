// The transformer: a stack of layers, each a token mixer (attention, MLA, GatedDeltaNet, KDA) and a
// feed-forward (dense or mixture of experts), composed from the blocks in llm/blocks.h. Weights stay in
// the mmap'd GGUF; the forward pass only builds engine graphs.
#pragma once

#include "llm/blocks.h"

#include <memory>
#include <string>
#include <vector>

namespace gguf { class File; }

namespace llm {

// Everything one sequence carries between forward passes.
struct State {
    std::vector<LayerState> layers;
    int n_ctx = 0;
};

// Keys and values of many sequences (llm/batch.h hands out its blocks): per attention layer one pool of
// n_blocks * block_size rows that every sequence's block table points into; per recurrent layer one
// state per block table row (a sequence's state is not paged: it has no positions).
struct KvPool {
    std::vector<Tensor> k, v;  // per layer: (n_blocks * block_size, Hkv, Dk), (.., Hkv, Dv) f16/f32; an MLA
                               // layer's k is (.., 1, R + Dr) and its v is unset
    std::vector<Tensor> conv, ssm;  // per layer: recurrent (n_seqs + n_checkpoints, K-1, C), (.., Hv, Dv, Dk) f32;
                                    // else unset. Rows past n_seqs keep saved states (checkpoints).
    int n_blocks = 0, block_size = 0, n_seqs = 0, n_checkpoints = 0;
    bool recurrent() const;  // any recurrent layer: blocks alone do not hold a sequence's state
};

struct Layer {
    Tensor attn_norm;            // (D)
    Tensor ffn_norm;             // (D)
    Mixer mixer;                 // of config.layer_kind[il]
    FeedForward ffn;             // mixture of experts where config.is_moe_layer(il), else dense
};

class Model {
public:
    // Loads the config and maps every tensor; throws naming the file and what is missing or unsupported.
    static std::unique_ptr<Model> load(const std::string& path);

    const ModelConfig& config() const { return config_; }
    const gguf::File& file() const { return *file_; }

    // Throws when this model's attention caches cannot be `kv_dtype` (f16, f32, or q8_0 / q4_0 blocks on a
    // device that reads them, engine::kv_cache_type): head dims that are not whole blocks, MLA's latent
    // cache (f16 or f32 only).
    void check_kv_cache(engine::DType kv_dtype) const;
    // State for `n_ctx` positions; attention caches in `kv_dtype` (check_kv_cache).
    State new_state(int n_ctx, engine::DType kv_dtype) const;

    // Logits for tokens (T) i32 at positions start_pos..start_pos+T-1: (1, V) for the last token, or
    // (T, V) with all_logits. Writes this chunk into the state.
    Tensor forward(const Tensor& tokens, const Dim& start_pos, State& state, bool all_logits) const;
    // A batch of sequences in one forward: tokens (T) i32 at the positions, slots and block table rows
    // of `b` (each sequence's tokens contiguous and in position order), writing their keys and values
    // and recurrent states into `pool`. Logits (R, V) of the tokens at rows logit_rows (R) i32.
    Tensor forward_batch(const Tensor& tokens, const PagedBatch& b, const Tensor& logit_rows, const KvPool& pool) const;
    // A pool for n_seqs block table rows (and n_checkpoints saved recurrent states, for a model with
    // recurrent layers); attention layers' rows in `kv_dtype` (check_kv_cache).
    KvPool new_kv_pool(int n_blocks, int block_size, int n_seqs, engine::DType kv_dtype, int n_checkpoints = 0) const;
    // The final hidden states (T, D) after output_norm, without the output matmul: what embeddings pool.
    Tensor hidden(const Tensor& tokens, const Dim& start_pos, State& state) const;

private:
    Tensor blocks(const Tensor& tokens, const Dim& start_pos, State& state) const;  // (T, D) before output_norm

    std::shared_ptr<const gguf::File> file_;
    ModelConfig config_;
    Tensor token_embd;   // (V, D)
    Tensor output_norm;  // (D)
    engine::LinearWeight output;  // (V, D); token_embd when tied
    std::vector<Layer> layers;
};

}  // namespace llm
