// Model loading (GGUF tensors -> engine tensors over the mmap, no copies) and the forward pass.
#include "llm/model.h"

#include "gguf/gguf.h"

#include <cmath>
#include <stdexcept>

namespace llm {

namespace {

using engine::Dim;

// GGUF lists dims innermost first; the engine is row-major with the outermost first.
engine::Shape engine_shape(const gguf::TensorInfo& t) {
    engine::Shape s;
    for (auto it = t.dims.rbegin(); it != t.dims.rend(); ++it) s.push_back(*it);
    return s;
}

class Loader {
public:
    Loader(std::shared_ptr<const gguf::File> f) : f_(std::move(f)) {}

    // The tensor `name`, checked against the shape the config implies (engine order).
    Tensor get(const std::string& name, const engine::Shape& expect, bool required = true) const {
        const gguf::TensorInfo* t = f_->find_tensor(name);
        if (!t) {
            if (required) throw std::runtime_error("[model] " + f_->path() + ": missing tensor '" + name + "'");
            return {};
        }
        engine::Shape shape = engine_shape(*t);
        bool ok = shape.size() == expect.size();
        for (size_t i = 0; ok && i < shape.size(); i++) ok = shape[i].value() == expect[i].value();
        if (!ok)
            throw std::runtime_error("[model] " + f_->path() + ": tensor '" + name + "' has shape " +
                                     engine::shape_str(shape) + ", expected " + engine::shape_str(expect));
        return Tensor::external(t->data, shape, engine::DType::from_gguf(t->type), f_);
    }

private:
    std::shared_ptr<const gguf::File> f_;
};

std::string blk(int il, const char* name) { return "blk." + std::to_string(il) + "." + name; }

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path) {
    auto m = std::make_unique<Model>();
    std::shared_ptr<const gguf::File> file = gguf::File::open(path);
    m->file_ = file;
    m->config_ = read_config(*file);
    const ModelConfig& c = m->config_;
    for (LayerKind k : c.layer_kind)
        if (k != LayerKind::ATTENTION)
            throw std::runtime_error("[model] " + path + ": layer kind '" + layer_kind_name(k) + "' of architecture '" +
                                     c.arch + "' is not supported yet");
    if (c.moe.n_expert > 0)
        throw std::runtime_error("[model] " + path + ": mixture-of-experts layers (" + c.arch + ") are not supported yet");

    Loader L(file);
    const int D = c.n_embd, V = c.n_vocab, H = c.n_head, Hkv = c.n_head_kv, Dk = c.head_dim_k, Dv = c.head_dim_v;
    m->token_embd = L.get("token_embd.weight", {V, D});
    m->output_norm = L.get("output_norm.weight", {D});
    m->output = c.tied_output ? m->token_embd : L.get("output.weight", {V, D});
    m->layers.resize(c.n_layer);
    for (int il = 0; il < c.n_layer; il++) {
        LayerWeights& w = m->layers[il];
        w.attn_norm = L.get(blk(il, "attn_norm.weight"), {D});
        w.attn_q = L.get(blk(il, "attn_q.weight"), {H * Dk * (c.attn_gate ? 2 : 1), D});
        w.attn_k = L.get(blk(il, "attn_k.weight"), {Hkv * Dk, D});
        w.attn_v = L.get(blk(il, "attn_v.weight"), {Hkv * Dv, D});
        w.attn_output = L.get(blk(il, "attn_output.weight"), {D, H * Dv});
        if (c.qkv_bias) {
            w.attn_q_b = L.get(blk(il, "attn_q.bias"), {H * Dk});
            w.attn_k_b = L.get(blk(il, "attn_k.bias"), {Hkv * Dk});
            w.attn_v_b = L.get(blk(il, "attn_v.bias"), {Hkv * Dv});
        }
        if (c.attn_out_bias) w.attn_output_b = L.get(blk(il, "attn_output.bias"), {D});
        if (c.qk_norm) {
            w.attn_q_norm = L.get(blk(il, "attn_q_norm.weight"), {c.qk_norm_full ? H * Dk : Dk});
            w.attn_k_norm = L.get(blk(il, "attn_k_norm.weight"), {c.qk_norm_full ? Hkv * Dk : Dk});
        }
        w.ffn_norm = L.get(blk(il, c.post_attn_norm_is_ffn_norm ? "post_attention_norm.weight" : "ffn_norm.weight"), {D});
        w.ffn_gate = L.get(blk(il, "ffn_gate.weight"), {c.n_ff, D});
        w.ffn_up = L.get(blk(il, "ffn_up.weight"), {c.n_ff, D});
        w.ffn_down = L.get(blk(il, "ffn_down.weight"), {D, c.n_ff});
    }
    return m;
}

KvCache Model::new_kv_cache(int n_ctx, engine::DType dtype) const {
    KvCache cache;
    cache.n_ctx = n_ctx;
    const ModelConfig& c = config_;
    for (int il = 0; il < c.n_layer; il++) {
        cache.k.push_back(Tensor::empty({n_ctx, c.n_head_kv, c.head_dim_k}, dtype));
        cache.v.push_back(Tensor::empty({n_ctx, c.n_head_kv, c.head_dim_v}, dtype));
    }
    return cache;
}

Tensor Model::attention(int il, const Tensor& x, const Dim& start_pos, KvCache& cache) const {
    const ModelConfig& c = config_;
    const LayerWeights& w = layers[il];
    const Dim T = x.dim(0);
    const int H = c.n_head, Hkv = c.n_head_kv, Dk = c.head_dim_k, Dv = c.head_dim_v;

    Tensor q = engine::linear(x, w.attn_q);  // (T, H*Dk)
    Tensor k = engine::linear(x, w.attn_k);  // (T, Hkv*Dk)
    Tensor v = engine::linear(x, w.attn_v);  // (T, Hkv*Dv)
    if (c.qkv_bias) q = q + w.attn_q_b, k = k + w.attn_k_b, v = v + w.attn_v_b;
    if (c.qk_norm_full) q = engine::rms_norm(q, w.attn_q_norm, c.rms_eps), k = engine::rms_norm(k, w.attn_k_norm, c.rms_eps);
    q = q.reshape({T, H, Dk});
    k = k.reshape({T, Hkv, Dk});
    v = v.reshape({T, Hkv, Dv});
    if (c.qk_norm && !c.qk_norm_full)
        q = engine::rms_norm(q, w.attn_q_norm, c.rms_eps), k = engine::rms_norm(k, w.attn_k_norm, c.rms_eps);
    if (c.rope.type != RopeType::NONE) {
        auto layout = c.rope.type == RopeType::NEOX ? engine::RopeLayout::NEOX : engine::RopeLayout::NORM;
        q = engine::rope(q, start_pos, c.rope.n_dims, c.rope.freq_base, layout);
        k = engine::rope(k, start_pos, c.rope.n_dims, c.rope.freq_base, layout);
    }
    cache.k[il].slice(0, start_pos, T).assign(k);
    cache.v[il].slice(0, start_pos, T).assign(v);
    Tensor out = engine::attention(q, cache.k[il], cache.v[il], start_pos, 1.0 / std::sqrt(double(Dk)));  // (T, H, Dv)
    out = engine::linear(out.reshape({T, H * Dv}), w.attn_output);
    return c.attn_out_bias ? out + w.attn_output_b : out;
}

Tensor Model::feed_forward(int il, const Tensor& x) const {
    const LayerWeights& w = layers[il];
    Tensor h = engine::silu(engine::linear(x, w.ffn_gate)) * engine::linear(x, w.ffn_up);  // (T, F)
    return engine::linear(h, w.ffn_down);
}

Tensor Model::forward(const Tensor& tokens, const Dim& start_pos, KvCache& cache, bool all_logits) const {
    const ModelConfig& c = config_;
    Tensor x = engine::embedding(token_embd, tokens);  // (T, D)
    for (int il = 0; il < c.n_layer; il++) {
        const LayerWeights& w = layers[il];
        Tensor h = x + attention(il, engine::rms_norm(x, w.attn_norm, c.rms_eps), start_pos, cache);
        x = h + feed_forward(il, engine::rms_norm(h, w.ffn_norm, c.rms_eps));
    }
    if (!all_logits) x = x.slice(0, x.dim(0) - 1, 1);  // (1, D): only the last token's logits are needed
    return engine::linear(engine::rms_norm(x, output_norm, c.rms_eps), output);  // (n_out, V)
}

}  // namespace llm
