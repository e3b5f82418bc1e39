// The dense SwiGLU feed-forward: down(silu(gate(x)) * up(x)).
#include "llm/blocks.h"

namespace llm {

FfnWeights load_ffn(const WeightLoader& L, int il, int n_ff, int n_embd, const std::string& suffix) {
    FfnWeights w;
    Tensor gate = L.layer(il, "ffn_gate" + suffix + ".weight", {n_ff, n_embd});
    Tensor up = L.layer(il, "ffn_up" + suffix + ".weight", {n_ff, n_embd});
    w.ffn_gate_up = engine::pack_for_linear(std::vector<Tensor>{gate, up});  // one matmul for both, where it packs
    if (!w.ffn_gate_up.defined()) w.ffn_gate = engine::pack_for_linear(gate), w.ffn_up = engine::pack_for_linear(up);
    w.ffn_down = engine::pack_for_linear(L.layer(il, "ffn_down" + suffix + ".weight", {n_embd, n_ff}));
    return w;
}

Tensor ffn(const FfnWeights& w, const Tensor& x) {
    Tensor h;  // (T, F)
    if (w.ffn_gate_up.defined()) {
        const int64_t F = w.ffn_gate_up.dim(0).value() / 2;
        Tensor gu = engine::linear(x, w.ffn_gate_up);
        h = engine::silu(gu.slice(1, 0, F)) * gu.slice(1, F, F);
    } else {
        h = engine::silu(engine::linear(x, w.ffn_gate)) * engine::linear(x, w.ffn_up);
    }
    return engine::linear(h, w.ffn_down);                                                   // (T, D)
}

FfnWeights FfnWeights::load(const WeightLoader& L, const ModelConfig& c, int il) { return load_ffn(L, il, c.n_ff, c.n_embd); }
Tensor FfnWeights::forward(const ModelConfig&, const Tensor& x) const { return ffn(*this, x); }

}  // namespace llm
