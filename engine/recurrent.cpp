// The recurrent token mixers' op builders: the causal short convolution that carries its last inputs
// between calls, and the gated delta rule (hot ops CONV1D and DELTA_RULE, devices/ops.h).
#include "engine/op_call_impl.h"

namespace engine {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

Tensor as_f32(const Tensor& t) { return t.dtype() == f32 ? t : t.cast(f32); }  // the kernels read f32

}  // namespace

ConvResult causal_conv1d(const Tensor& x, const Tensor& state, const Tensor& w, const Dim& start_pos) {
    if (x.ndim() != 2 || state.ndim() != 2 || w.ndim() != 2) fail("causal_conv1d", "expects x (T, C), state (K-1, C), w (C, K)");
    Dim T = x.dim(0), C = x.dim(1), K = w.dim(1);
    if (!C.is_const() || !K.is_const() || !same(w.dim(0), C) || !same(state.dim(1), C) || !same(state.dim(0), K - 1))
        fail("causal_conv1d", "shapes x " + shape_str(x.shape()) + ", state " + shape_str(state.shape()) + ", w " +
                                  shape_str(w.shape()) + " do not fit together");
    if (state.dtype() != f32) fail("causal_conv1d", "the state must be f32");
    using A = devices::ops::Conv1d;
    OpCall<A> call(gguf::Type::F32);
    Tensor out = call.in(&A::x, as_f32(x)).in(&A::state, state).in(&A::w, as_f32(w))
                     .dim(&A::T, T).dim(&A::C, C).dim(&A::K, K).dim(&A::start_pos, start_pos)
                     .out(&A::out, {T + K - 1, C}, f32);
    return {out.slice(0, 0, T), out.slice(0, T, K - 1)};
}

DeltaResult delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                       const Tensor& state, const Dim& start_pos, double scale, HeadMap head_map) {
    if (q.ndim() != 3 || k.ndim() != 3 || v.ndim() != 3 || g.ndim() != 3 || beta.ndim() != 2 || state.ndim() != 3)
        fail("delta_rule", "expects q, k (T, Hk, Dk), v (T, Hv, Dv), g (T, Hv, 1|Dk), beta (T, Hv), state (Hv, Dv, Dk)");
    Dim T = q.dim(0), Hk = q.dim(1), Dk = q.dim(2), Hv = v.dim(1), Dv = v.dim(2), Dg = g.dim(2);
    for (const Dim* d : {&Hk, &Dk, &Hv, &Dv, &Dg})
        if (!d->is_const()) fail("delta_rule", "head counts and sizes must be constants");
    bool ok = same(k.dim(0), T) && same(v.dim(0), T) && same(g.dim(0), T) && same(beta.dim(0), T) && same(k.dim(1), Hk) &&
              same(k.dim(2), Dk) && same(g.dim(1), Hv) && (Dg.value() == 1 || same(Dg, Dk)) && same(beta.dim(1), Hv) &&
              same(state.dim(0), Hv) && same(state.dim(1), Dv) && same(state.dim(2), Dk) && Hv.value() % Hk.value() == 0;
    if (!ok)
        fail("delta_rule", "shapes q " + shape_str(q.shape()) + ", k " + shape_str(k.shape()) + ", v " + shape_str(v.shape()) +
                               ", g " + shape_str(g.shape()) + ", beta " + shape_str(beta.shape()) + ", state " +
                               shape_str(state.shape()) + " do not fit together");
    if (state.dtype() != f32) fail("delta_rule", "the state must be f32");
    using A = devices::ops::DeltaRule;
    OpCall<A> call(gguf::Type::F32);
    call.args().interleave = head_map == HeadMap::INTERLEAVE;
    call.args().scale = float(scale);
    call.in(&A::q, as_f32(q)).in(&A::k, as_f32(k)).in(&A::v, as_f32(v)).in(&A::g, as_f32(g)).in(&A::beta, as_f32(beta)).in(&A::state, state);
    call.dim(&A::T, T).dim(&A::Hk, Hk).dim(&A::Hv, Hv).dim(&A::Dk, Dk).dim(&A::Dv, Dv).dim(&A::Dg, Dg).dim(&A::start_pos, start_pos);
    Dim n_out = T * Hv * Dv;
    Tensor out = call.out(&A::out, {n_out + Hv * Dv * Dk}, f32);
    return {out.slice(0, 0, n_out).reshape({T, Hv, Dv}), out.slice(0, n_out, Hv * Dv * Dk).reshape({Hv, Dv, Dk})};
}

}  // namespace engine
