// The recurrent token mixers' op builders: the causal short convolution that carries its last inputs
// between calls, and the gated delta rule (hot ops CONV1D and DELTA_RULE, devices/ops.h), each in its
// single-sequence form (the state in, the new state out) and its batch form (per-sequence rows of a
// state pool, updated in place).
#include "engine/op_call_impl.h"

namespace engine {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

Tensor as_f32(const Tensor& t) { return t.dtype() == f32 ? t : t.cast(f32); }  // the kernels read f32

// One sequence's state shape: the single form's state, or a row of the batch form's pool.
Shape state_row(const Tensor& state, bool pool) {
    return pool && state.ndim() > 0 ? Shape(state.shape().begin() + 1, state.shape().end()) : pool ? Shape{} : state.shape();
}

// The batch form's pool, token indices and checkpoint rows, common to both ops.
template <class A>
void batch_inputs(OpCall<A>& call, const char* op, const Tensor& states, const SeqRows& rows, const Dim& T) {
    if (!states.is_realized()) fail(op, "the state pool must be a realized buffer (it is updated in place)");
    if (!states.dim(0).is_const()) fail(op, "the state pool's row count must be a constant");
    if (rows.load.defined() != rows.save.defined()) fail(op, "load and save come together");
    for (const Tensor* t : {&rows.pos, &rows.seq, &rows.load, &rows.save})
        if (t->defined() && (t->ndim() != 1 || !t->dtype().is_int() || !same(t->dim(0), T)))
            fail(op, "pos, seq, load and save must be (T) integers, T = " + T.str() + ", got " + shape_str(t->shape()));
    call.in(&A::pos, rows.pos.cast(i32)).in(&A::seq, rows.seq.cast(i32)).in(&A::states, states).dim(&A::S, states.dim(0));
    if (rows.load.defined()) call.in(&A::load, rows.load.cast(i32)).in(&A::save, rows.save.cast(i32));
}

using Conv = devices::ops::Conv1d;
OpCall<Conv> conv_call(const Tensor& x, const Tensor& state, bool pool, const Tensor& w, const char* op) {
    const Shape st = state_row(state, pool);
    if (x.ndim() != 2 || st.size() != 2 || w.ndim() != 2)
        fail(op, pool ? "expects x (T, C), states (S, K-1, C), w (C, K)" : "expects x (T, C), state (K-1, C), w (C, K)");
    Dim T = x.dim(0), C = x.dim(1), K = w.dim(1);
    if (!C.is_const() || !K.is_const() || !same(w.dim(0), C) || !same(st[1], C) || !same(st[0], K - 1))
        fail(op, "shapes x " + shape_str(x.shape()) + ", state " + shape_str(state.shape()) + ", w " + shape_str(w.shape()) +
                     " do not fit together");
    if (state.dtype() != f32) fail(op, "the state must be f32");
    OpCall<Conv> call(gguf::Type::F32);
    call.in(&Conv::x, as_f32(x)).in(&Conv::w, as_f32(w)).dim(&Conv::T, T).dim(&Conv::C, C).dim(&Conv::K, K);
    return call;
}

using Delta = devices::ops::DeltaRule;
OpCall<Delta> delta_call(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                         const Tensor& state, bool pool, double scale, HeadMap head_map, const char* op) {
    const Shape st = state_row(state, pool);
    if (q.ndim() != 3 || k.ndim() != 3 || v.ndim() != 3 || g.ndim() != 3 || beta.ndim() != 2 || st.size() != 3)
        fail(op, std::string("expects q, k (T, Hk, Dk), v (T, Hv, Dv), g (T, Hv, 1|Dk), beta (T, Hv), ") +
                     (pool ? "states (S, Hv, Dv, Dk)" : "state (Hv, Dv, Dk)"));
    Dim T = q.dim(0), Hk = q.dim(1), Dk = q.dim(2), Hv = v.dim(1), Dv = v.dim(2), Dg = g.dim(2);
    for (const Dim* d : {&Hk, &Dk, &Hv, &Dv, &Dg})
        if (!d->is_const()) fail(op, "head counts and sizes must be constants");
    bool ok = same(k.dim(0), T) && same(v.dim(0), T) && same(g.dim(0), T) && same(beta.dim(0), T) && same(k.dim(1), Hk) &&
              same(k.dim(2), Dk) && same(g.dim(1), Hv) && (Dg.value() == 1 || same(Dg, Dk)) && same(beta.dim(1), Hv) &&
              same(st[0], Hv) && same(st[1], Dv) && same(st[2], Dk) && Hv.value() % Hk.value() == 0;
    if (!ok)
        fail(op, "shapes q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape()) + ", g " +
                     shape_str(g.shape()) + ", beta " + shape_str(beta.shape()) + ", state " + shape_str(state.shape()) +
                     " do not fit together");
    if (state.dtype() != f32) fail(op, "the state must be f32");
    OpCall<Delta> call(gguf::Type::F32);
    call.args().interleave = head_map == HeadMap::INTERLEAVE;
    call.args().scale = float(scale);
    call.in(&Delta::q, as_f32(q)).in(&Delta::k, as_f32(k)).in(&Delta::v, as_f32(v)).in(&Delta::g, as_f32(g)).in(&Delta::beta, as_f32(beta));
    call.dim(&Delta::T, T).dim(&Delta::Hk, Hk).dim(&Delta::Hv, Hv).dim(&Delta::Dk, Dk).dim(&Delta::Dv, Dv).dim(&Delta::Dg, Dg);
    return call;
}

}  // namespace

ConvResult causal_conv1d(const Tensor& x, const Tensor& state, const Tensor& w, const Dim& start_pos) {
    OpCall<Conv> call = conv_call(x, state, false, w, "causal_conv1d");
    const Dim T = x.dim(0), K = w.dim(1), C = x.dim(1);
    Tensor out = call.in(&Conv::state, state).dim(&Conv::start_pos, start_pos).out(&Conv::out, {T + K - 1, C}, f32);
    return {out.slice(0, 0, T), out.slice(0, T, K - 1)};
}

Tensor causal_conv1d_seqs(const Tensor& x, const Tensor& states, const Tensor& w, const SeqRows& rows) {
    OpCall<Conv> call = conv_call(x, states, true, w, "causal_conv1d_seqs");
    batch_inputs(call, "causal_conv1d_seqs", states, rows, x.dim(0));
    return call.out(&Conv::out, x.shape(), f32);
}

DeltaResult delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                       const Tensor& state, const Dim& start_pos, double scale, HeadMap head_map) {
    OpCall<Delta> call = delta_call(q, k, v, g, beta, state, false, scale, head_map, "delta_rule");
    const Dim T = q.dim(0), Hv = v.dim(1), Dv = v.dim(2), Dk = q.dim(2);
    call.in(&Delta::state, state).dim(&Delta::start_pos, start_pos);
    Dim n_out = T * Hv * Dv;
    Tensor out = call.out(&Delta::out, {n_out + Hv * Dv * Dk}, f32);
    return {out.slice(0, 0, n_out).reshape({T, Hv, Dv}), out.slice(0, n_out, Hv * Dv * Dk).reshape({Hv, Dv, Dk})};
}

Tensor delta_rule_seqs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& states,
                       const SeqRows& rows, double scale, HeadMap head_map) {
    OpCall<Delta> call = delta_call(q, k, v, g, beta, states, true, scale, head_map, "delta_rule_seqs");
    batch_inputs(call, "delta_rule_seqs", states, rows, q.dim(0));
    return call.out(&Delta::out, v.shape(), f32);
}

}  // namespace engine
