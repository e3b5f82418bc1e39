// Model loading and the forward pass: h = x + mixer(norm(x)); x = h + ffn(norm(h)), then the head.
#include "llm/model.h"

#include "gguf/gguf.h"

#include <algorithm>
#include <stdexcept>
#include <type_traits>

namespace llm {

// The one place a layer kind picks its weights' type; state and forward then follow the variant.
Mixer load_mixer(const WeightLoader& L, const ModelConfig& c, int il) {
    switch (c.layer_kind[il]) {
        case LayerKind::ATTENTION: return AttentionWeights::load(L, c, il);
        case LayerKind::MLA: return MlaWeights::load(L, c, il);
        case LayerKind::GATED_DELTA_NET: return GatedDeltaNetWeights::load(L, c, il);
        case LayerKind::KDA: return KdaWeights::load(L, c, il);
    }
    throw std::logic_error("[model] unknown layer kind");
}

FeedForward load_feed_forward(const WeightLoader& L, const ModelConfig& c, int il) {
    if (c.is_moe_layer(il)) return MoeWeights::load(L, c, il);
    return FfnWeights::load(L, c, il);
}

Tensor mix(const Mixer& m, const ModelConfig& c, const Tensor& x, const Dim& start_pos, LayerState& s) {
    return std::visit([&](const auto& w) { return w.forward(c, x, start_pos, s); }, m);
}

Tensor feed_forward(const FeedForward& f, const ModelConfig& c, const Tensor& x) {
    return std::visit([&](const auto& w) { return w.forward(c, x); }, f);
}

std::unique_ptr<Model> Model::load(const std::string& path) {
    auto m = std::make_unique<Model>();
    std::shared_ptr<const gguf::File> file = gguf::File::open(path);
    m->file_ = file;
    m->config_ = read_config(*file);
    const ModelConfig& c = m->config_;

    WeightLoader L(file);
    const int D = c.n_embd, V = c.n_vocab;
    // the lookup table stays in the file mapping: a token reads one row of it
    m->token_embd = L.get("token_embd.weight", {V, D}, /*sparse=*/true);
    m->output_norm = L.get("output_norm.weight", {D});
    // tied: the output matmul reads its own copy of the table, laid out from the mapping, and where the
    // device's lookups read that layout the lookups do too (the mapping's pages of the table stay out)
    m->output = engine::linear_weight({c.tied_output ? L.get("token_embd.weight", {V, D}, /*sparse=*/true) : L.get("output.weight", {V, D}, /*sparse=*/true)});
    if (c.tied_output && m->output.parts.size() == 1 && engine::embeds_from(m->output.parts[0])) m->token_embd = m->output.parts[0];
    m->layers.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; il++) {
        Layer& l = m->layers[il];
        l.attn_norm = L.layer(il, "attn_norm.weight", {D});
        l.ffn_norm = L.layer(il, c.ffn_norm + ".weight", {D});
        l.mixer = load_mixer(L, c, il);
        l.ffn = load_feed_forward(L, c, il);
    }
    return m;
}

void Model::check_kv_cache(engine::DType kv) const {
    const ModelConfig& c = config_;
    for (int il = 0; il < c.n_layer; il++) {
        if (c.layer_kind[il] == LayerKind::MLA && !(kv == engine::f16 || kv == engine::f32))
            throw std::invalid_argument("[model] KV cache " + kv.name() + ": " + c.arch + "'s MLA layers keep their latent cache in f16 or f32");
        if (c.layer_kind[il] == LayerKind::ATTENTION)
            for (int d : {c.head_dim_k, c.head_dim_v}) engine::kv_cache_type(kv, d);
    }
}

State Model::new_state(int n_ctx, engine::DType kv_dtype) const {
    check_kv_cache(kv_dtype);
    State s;
    s.n_ctx = n_ctx;
    s.layers.resize(config_.n_layer);
    for (int il = 0; il < config_.n_layer; il++)
        std::visit([&](const auto& m) { m.init_state(s.layers[il], config_, n_ctx, kv_dtype); }, layers[il].mixer);
    return s;
}

Tensor Model::blocks(const Tensor& tokens, const Dim& start_pos, State& state) const {
    const ModelConfig& c = config_;
    Tensor x = engine::embedding(token_embd, tokens);  // (T, D)
    for (int il = 0; il < c.n_layer; il++) {
        const Layer& l = layers[il];
        Tensor h = x + mix(l.mixer, c, engine::rms_norm(x, l.attn_norm, c.rms_eps), start_pos, state.layers[il]);
        x = h + feed_forward(l.ffn, c, engine::rms_norm(h, l.ffn_norm, c.rms_eps));
    }
    return x;
}

Tensor Model::forward(const Tensor& tokens, const Dim& start_pos, State& state, bool all_logits) const {
    Tensor x = blocks(tokens, start_pos, state);  // (T, D)
    if (!all_logits) x = x.slice(0, x.dim(0) - 1, 1);  // (1, D): only the last token's logits are needed
    return engine::linear(engine::rms_norm(x, output_norm, config_.rms_eps), output);  // (n_out, V)
}

bool KvPool::recurrent() const {
    return std::any_of(conv.begin(), conv.end(), [](const Tensor& t) { return t.defined(); });
}

KvPool Model::new_kv_pool(int n_blocks, int block_size, int n_seqs, engine::DType kv_dtype, int n_checkpoints) const {
    if (n_blocks <= 0 || block_size <= 0 || n_seqs <= 0 || n_checkpoints < 0)
        throw std::invalid_argument("[model] new_kv_pool: n_blocks, block_size and n_seqs must be positive");
    check_kv_cache(kv_dtype);
    KvPool p;
    p.n_blocks = n_blocks, p.block_size = block_size, p.n_seqs = n_seqs;
    const int64_t rows = int64_t(n_blocks) * block_size;
    auto per_seq = [&](const Tensor& one) {  // a sequence's state, per sequence and checkpoint
        engine::Shape shape = one.shape();
        shape.insert(shape.begin(), n_seqs + n_checkpoints);
        return Tensor::empty(shape, one.dtype());
    };
    p.k.resize(size_t(config_.n_layer)), p.v.resize(size_t(config_.n_layer));
    p.conv.resize(size_t(config_.n_layer)), p.ssm.resize(size_t(config_.n_layer));
    for (int il = 0; il < config_.n_layer; il++) {
        switch (config_.layer_kind[il]) {
            case LayerKind::MLA:  // one row per token: the latent, then the rotated key part
                p.k[il] = Tensor::empty({rows, 1, config_.mla.kv_lora_rank + config_.mla.rope_dim}, kv_dtype);
                break;
            case LayerKind::ATTENTION:
                p.k[il] = Tensor::empty({rows, config_.n_head_kv, config_.head_dim_k}, kv_dtype);
                p.v[il] = Tensor::empty({rows, config_.n_head_kv, config_.head_dim_v}, kv_dtype);
                break;
            default: {  // recurrent: the shapes of one sequence's state
                LayerState one;
                std::visit([&](const auto& m) { m.init_state(one, config_, 1, kv_dtype); }, layers[il].mixer);
                p.conv[il] = per_seq(one.conv), p.ssm[il] = per_seq(one.ssm);
            }
        }
    }
    if (p.recurrent()) p.n_checkpoints = n_checkpoints;
    return p;
}

Tensor Model::forward_batch(const Tensor& tokens, const PagedBatch& b, const Tensor& logit_rows, const KvPool& pool) const {
    const ModelConfig& c = config_;
    if (int(pool.k.size()) != c.n_layer || b.block_size != pool.block_size) throw std::invalid_argument("[model] forward_batch: the pool is not this model's");
    Tensor x = engine::embedding(token_embd, tokens);  // (T, D)
    for (int il = 0; il < c.n_layer; il++) {
        const Layer& l = layers[il];
        const Tensor xn = engine::rms_norm(x, l.attn_norm, c.rms_eps);
        const Tensor m = std::visit(
            [&](const auto& w) {
                using W = std::decay_t<decltype(w)>;
                if constexpr (std::is_same_v<W, AttentionWeights>) return w.forward_paged(c, xn, b, pool.k[il], pool.v[il]);
                else if constexpr (std::is_same_v<W, MlaWeights>) return w.forward_paged(c, xn, b, pool.k[il]);
                else {
                    RecurrentState state(b, pool.conv[il], pool.ssm[il]);
                    return w.forward(c, xn, state);
                }
            },
            l.mixer);
        Tensor h = x + m;
        x = h + feed_forward(l.ffn, c, engine::rms_norm(h, l.ffn_norm, c.rms_eps));
    }
    const Dim R = logit_rows.dim(0), D = x.dim(1);
    x = engine::gather(x, 0, logit_rows.cast(engine::i32).reshape({R, 1}).expand({R, D}));  // (R, D)
    return engine::linear(engine::rms_norm(x, output_norm, c.rms_eps), output);              // (R, V)
}

Tensor Model::hidden(const Tensor& tokens, const Dim& start_pos, State& state) const {
    return engine::rms_norm(blocks(tokens, start_pos, state), output_norm, config_.rms_eps);  // (T, D)
}

}  // namespace llm
