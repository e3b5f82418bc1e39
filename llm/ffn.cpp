// The dense SwiGLU feed-forward: down(silu(gate(x)) * up(x)).
#include "llm/blocks.h"

namespace llm {

FfnWeights load_ffn(const WeightLoader& L, int il, int n_ff, int n_embd, const std::string& suffix) {
    FfnWeights w;
    w.ffn_gate_up = engine::linear_weight({L.layer_matrix(il, "ffn_gate" + suffix + ".weight", {n_ff, n_embd}),
                                           L.layer_matrix(il, "ffn_up" + suffix + ".weight", {n_ff, n_embd})});
    w.ffn_down = engine::linear_weight({L.layer_matrix(il, "ffn_down" + suffix + ".weight", {n_embd, n_ff})});
    return w;
}

Tensor ffn(const FfnWeights& w, const Tensor& x) {
    std::vector<Tensor> gate_up = engine::linear_split(x, w.ffn_gate_up);  // (T, F) each
    return engine::linear(engine::silu(gate_up[0]) * gate_up[1], w.ffn_down);  // (T, D)
}

FfnWeights FfnWeights::load(const WeightLoader& L, const ModelConfig& c, int il) { return load_ffn(L, il, c.n_ff, c.n_embd); }
Tensor FfnWeights::forward(const ModelConfig&, const Tensor& x) const { return ffn(*this, x); }

}  // namespace llm
