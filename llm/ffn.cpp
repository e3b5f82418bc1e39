// The dense SwiGLU feed-forward: down(silu(gate(x)) * up(x)).
#include "llm/blocks.h"

namespace llm {

FfnWeights load_ffn(const WeightLoader& L, int il, int n_ff, int n_embd, const std::string& suffix) {
    FfnWeights w;
    w.ffn_gate = engine::pack_for_linear(L.layer(il, "ffn_gate" + suffix + ".weight", {n_ff, n_embd}));
    w.ffn_up = engine::pack_for_linear(L.layer(il, "ffn_up" + suffix + ".weight", {n_ff, n_embd}));
    w.ffn_down = engine::pack_for_linear(L.layer(il, "ffn_down" + suffix + ".weight", {n_embd, n_ff}));
    return w;
}

Tensor ffn(const FfnWeights& w, const Tensor& x) {
    Tensor h = engine::silu(engine::linear(x, w.ffn_gate)) * engine::linear(x, w.ffn_up);  // (T, F)
    return engine::linear(h, w.ffn_down);                                                   // (T, D)
}

}  // namespace llm
