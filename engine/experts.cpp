// Mixture-of-experts products (ggml's mul_mat_id) and ggml-ordered top-k. A plan groups the (token,
// slot) rows by expert once per layer; each product then reads only the selected experts' weights, and
// every expert's weight rows are streamed once for all the tokens that chose it.
#include "engine/op_call_impl.h"

namespace engine {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

}  // namespace

Tensor top_k_ggml(const Tensor& x_in, int k) {
    Tensor x = x_in.cast(f32);
    Dim n = x.dim(-1);
    if (k < 1 || k > n.min()) fail("top_k_ggml", "k = " + std::to_string(k) + " outside [1, " + n.str() + "]");
    Shape out_shape = x.shape();
    out_shape.back() = k;
    Dim rows = numel(Shape(x.shape().begin(), x.shape().end() - 1));
    using A = devices::ops::TopK;
    OpCall<A> call(gguf::Type::F32);
    call.args().ggml_order = true;
    return call.in(&A::x, x.reshape({rows, n})).dim(&A::rows, rows).dim(&A::n, n).dim(&A::k, k).out(&A::out, {rows, k}, i32).reshape(out_shape);
}

ExpertSelection select_experts(const Tensor& ids, int n_expert) {
    if (ids.ndim() != 2 || !ids.dtype().is_int()) fail("select_experts", "ids must be (tokens, k) integers, got " + shape_str(ids.shape()));
    if (n_expert < 1) fail("select_experts", "needs at least one expert");
    ExpertSelection s;
    s.ids = ids.cast(i32);
    s.n_expert = n_expert;
    Dim n_rows = ids.dim(0) * ids.dim(1);
    using A = devices::ops::ExpertPlan;
    OpCall<A> call(gguf::Type::I32);
    s.plan = call.in(&A::ids, s.ids.reshape({n_rows})).dim(&A::n_rows, n_rows).dim(&A::E, n_expert).out(&A::plan, {n_expert + 1 + n_rows}, i32);
    return s;
}

Tensor linear_experts(const Tensor& x_in, const Tensor& w, const ExpertSelection& sel) {
    if (!sel.plan.defined()) fail("linear_experts", "no expert selection");
    if (w.ndim() != 3) fail("linear_experts", "expert weights must be (experts, rows, cols), got " + shape_str(w.shape()));
    const std::optional<gguf::Type> type = w.dtype().weight_type();
    if (!type) fail("linear_experts", "unsupported weight dtype " + w.dtype().name());
    if (w.dtype().is_quantized() && !gguf::type_traits(w.dtype().block).dequantize)
        fail("linear_experts", "no dequantizer for " + w.dtype().name() + " yet");
    Dim T = sel.ids.dim(0), k = sel.ids.dim(1), E = w.dim(0), N = w.dim(1), K = w.dim(2);
    if (E.value() != sel.n_expert) fail("linear_experts", "weights hold " + E.str() + " experts, the selection " + std::to_string(sel.n_expert));
    if (!same(x_in.dim(-1), K)) fail("linear_experts", "input " + shape_str(x_in.shape()) + " does not match weights " + shape_str(w.shape()));
    // x is (T, K): one row per token, used by each of its experts; or (T, k, K): one row per slot.
    bool per_slot = x_in.ndim() == 3;
    if (!(x_in.ndim() == 2 && same(x_in.dim(0), T)) && !(per_slot && same(x_in.dim(0), T) && same(x_in.dim(1), k)))
        fail("linear_experts", "input " + shape_str(x_in.shape()) + " is neither (tokens, cols) nor (tokens, k, cols) for ids " +
                                   shape_str(sel.ids.shape()));
    Dim n_x = per_slot ? T * k : T;
    // MXFP4 multiplies Q8_0 activations (ggml's pairing, its own dot product); the rest the device's format.
    const gguf::Type act = *type == gguf::Type::MXFP4 ? gguf::Type::Q8_0 : devices::get(x_in.device()).activation_type(*type);
    if (K.value() % gguf::type_traits(act).block_size)
        fail("linear_experts", K.str() + " columns do not fill " + std::string(gguf::type_name(act)) + " blocks");
    Tensor xa = quantize_activations(x_in.cast(f32).reshape({n_x, K}), act);
    using A = devices::ops::LinearExperts;
    OpCall<A> call(*type);
    call.args().type = *type;
    call.args().act = act;
    call.args().per_slot = per_slot;
    const Node* wn = w.node().get();
    call.args().packed = (wn->op == Op::BUFFER || wn->op == Op::AFTER) && buffer_of(wn).packed;
    call.in(&A::x, xa).in(&A::w, w).in(&A::plan, sel.plan);
    call.dim(&A::T, T).dim(&A::k, k).dim(&A::N, N).dim(&A::K, K).dim(&A::E, E);
    return call.out(&A::out, {T, k, N}, f32);
}

}  // namespace engine
