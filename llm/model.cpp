// Model loading and the forward pass: h = x + mixer(norm(x)); x = h + ffn(norm(h)), then the head.
#include "llm/model.h"

#include "gguf/gguf.h"

#include <stdexcept>

namespace llm {

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
    if (c.tied_output) {
        // the output matmul streams a copy: packed straight from the mapping (whose pages go once the
        // source tensor is dropped), or, where it does not pack, the rows copied into huge pages
        m->output = engine::pack_for_linear(std::vector<Tensor>{L.get("token_embd.weight", {V, D}, /*sparse=*/true)});
        if (!m->output.defined()) m->output = L.get("token_embd.weight", {V, D});
    } else {
        m->output = engine::pack_for_linear(L.get("output.weight", {V, D}));
    }
    m->layers.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; il++) {
        Layer& l = m->layers[il];
        l.attn_norm = L.layer(il, "attn_norm.weight", {D});
        l.ffn_norm = L.layer(il, c.post_attn_norm_is_ffn_norm ? "post_attention_norm.weight" : "ffn_norm.weight", {D});
        switch (c.layer_kind[il]) {
            case LayerKind::ATTENTION: l.attn = load_attention(L, c, il); break;
            case LayerKind::MLA: l.mla = load_mla(L, c, il); break;
            case LayerKind::GATED_DELTA_NET: l.gdn = load_gated_delta_net(L, c, il); break;
            case LayerKind::KDA: l.kda = load_kda(L, c, il); break;
        }
        if (c.is_moe_layer(il)) l.moe = load_moe(L, c.moe, il, D);
        else l.ffn = load_ffn(L, il, c.n_ff, D);
    }
    return m;
}

State Model::new_state(int n_ctx, engine::DType kv_dtype) const {
    State s;
    s.n_ctx = n_ctx;
    s.layers.resize(config_.n_layer);
    for (int il = 0; il < config_.n_layer; il++) {
        switch (config_.layer_kind[il]) {
            case LayerKind::ATTENTION: init_attention_state(s.layers[il], config_, n_ctx, kv_dtype); break;
            case LayerKind::MLA: init_mla_state(s.layers[il], config_, n_ctx, kv_dtype); break;
            case LayerKind::GATED_DELTA_NET: init_gated_delta_net_state(s.layers[il], config_); break;
            case LayerKind::KDA: init_kda_state(s.layers[il], config_); break;
        }
    }
    return s;
}

Tensor Model::mixer(int il, const Tensor& x, const Dim& start_pos, LayerState& s) const {
    switch (config_.layer_kind[il]) {
        case LayerKind::MLA: return mla_attention(layers[il].mla, config_, x, start_pos, s);
        case LayerKind::GATED_DELTA_NET: return gated_delta_net(layers[il].gdn, config_, x, start_pos, s);
        case LayerKind::KDA: return kda(layers[il].kda, config_, x, start_pos, s);
        default: return attention(layers[il].attn, config_, x, start_pos, s);
    }
}

Tensor Model::feed_forward(int il, const Tensor& x) const {
    if (config_.is_moe_layer(il)) return moe_ffn(layers[il].moe, config_.moe, x);
    return ffn(layers[il].ffn, x);
}

Tensor Model::blocks(const Tensor& tokens, const Dim& start_pos, State& state) const {
    const ModelConfig& c = config_;
    Tensor x = engine::embedding(token_embd, tokens);  // (T, D)
    for (int il = 0; il < c.n_layer; il++) {
        const Layer& l = layers[il];
        Tensor h = x + mixer(il, engine::rms_norm(x, l.attn_norm, c.rms_eps), start_pos, state.layers[il]);
        x = h + feed_forward(il, engine::rms_norm(h, l.ffn_norm, c.rms_eps));
    }
    return x;
}

Tensor Model::forward(const Tensor& tokens, const Dim& start_pos, State& state, bool all_logits) const {
    Tensor x = blocks(tokens, start_pos, state);  // (T, D)
    if (!all_logits) x = x.slice(0, x.dim(0) - 1, 1);  // (1, D): only the last token's logits are needed
    return engine::linear(engine::rms_norm(x, output_norm, config_.rms_eps), output);  // (n_out, V)
}

Tensor Model::hidden(const Tensor& tokens, const Dim& start_pos, State& state) const {
    return engine::rms_norm(blocks(tokens, start_pos, state), output_norm, config_.rms_eps);  // (T, D)
}

}  // namespace llm
