// Model helpers built from engine ops (softmax, norms, activations, RoPE, matmul) and the hot-op builders
// for weights (linear, embedding, dequantize) and attention.
#include "engine/ir_impl.h"
#include "engine/op_call_impl.h"
#include "engine/realize_impl.h"

#include <cmath>
#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <tuple>

namespace engine {

namespace ops = devices::ops;

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

// A weight laid out by pack_for_linear() (a buffer in its device's layout for linear).
bool is_packed(const Tensor& w) {
    const Node* n = w.node().get();
    return (n->op == Op::BUFFER || n->op == Op::AFTER) && buffer_of(n).packed;
}

void check_weight(const Tensor& w, const char* op) {
    if (!w.defined() || w.ndim() != 2) fail(op, "weights must be 2-d (rows, cols)");
    if (!w.dtype().weight_type()) fail(op, "unsupported weight dtype " + w.dtype().name());
    if (w.dtype().is_quantized() && !gguf::type_traits(w.dtype().block).dequantize)
        fail(op, "no dequantizer for " + w.dtype().name() + " yet");
}

// A weight left in its file mapping for sparse reads (WeightLoader::layer_matrix) that stays in rows: the
// device wrapped the mapping without a copy, and it is read whole from now on (the CPU copies it into
// huge pages).
Tensor read_whole(const Tensor& w) {
    const Node* n = w.node().get();
    if (n->op != Op::BUFFER || !buffer_of(n).sparse || !buffer_of(n).mem->external) return w;
    const Buffer& b = buffer_of(n);
    return Tensor::external(b.host_data, w.shape(), w.dtype(), b.owner);
}

// The inputs of y = rms_norm(x, w, eps) (x f32, w an f32 vector along x's last axis), found by walking
// the graph rms_norm builds (x · rsqrt(mean(x²) + eps) · w) and confirmed by building it again: nodes
// are interned, so the same inputs give the very same node, and anything else is not a match.
struct NormInputs {
    Tensor x, w;
    double eps = 0;
};
std::optional<NormInputs> as_rms_norm(const Tensor& y) {
    auto under_views = [](const Node* m) {
        while (m->op == Op::EXPAND || m->op == Op::RESHAPE) m = m->src(0);
        return m;
    };
    const Node* n = y.node().get();
    if (n->op != Op::MUL || !(n->dtype == f32)) return std::nullopt;
    const Node* scaled = n->src(0);
    const Node* w = under_views(n->src(1));
    if (scaled->op != Op::MUL || w->shape.size() != 1 || !(w->dtype == f32)) return std::nullopt;
    const Node* recip = under_views(scaled->src(1));
    if (recip->op != Op::RECIP || recip->src(0)->op != Op::SQRT) return std::nullopt;
    const Node* plus_eps = recip->src(0)->src(0);
    if (plus_eps->op != Op::ADD) return std::nullopt;
    const Node* eps = under_views(plus_eps->src(1));
    if (!eps->is_const()) return std::nullopt;
    NormInputs in{make_tensor(NodeRef(scaled->src(0)), y.device()), make_tensor(NodeRef(w), y.device()), eps->arg.f};
    if (rms_norm(in.x, in.w, in.eps).node().get() != n) return std::nullopt;
    return in;
}

// The stacked gate | up output p (T, 2F) of y = silu(p[:, :F]) · p[:, F:] (a SwiGLU over linear_split
// of a stacked weight), found and confirmed as as_rms_norm does.
std::optional<Tensor> as_swiglu(const Tensor& y) {
    const Node* n = y.node().get();
    if (n->op != Op::MUL || !(n->dtype == f32) || n->shape.size() != 2 || !n->shape[1].is_const()) return std::nullopt;
    const Node* act = n->src(0);
    const Node* up = n->src(1);
    if (act->op != Op::MUL || up->op != Op::SHRINK || act->src(0)->op != Op::SHRINK || act->src(0)->src(0) != up->src(0))
        return std::nullopt;
    Tensor p = make_tensor(NodeRef(up->src(0)), y.device());
    const int64_t F = n->shape[1].value();
    if (p.ndim() != 2 || !(p.dtype() == f32) || p.dim(1).max() != 2 * F) return std::nullopt;
    if ((silu(p.slice(-1, 0, F)) * p.slice(-1, F, F)).node().get() != n) return std::nullopt;
    return p;
}

// x (R, K) as activations in `act`; with a norm, x normalized first; with glu, x is (R, 2K) [gate | up]
// and its SwiGLU is quantized (ops::Quantize).
Tensor quantize(const Tensor& x, const Dim& K, gguf::Type act, int64_t row_bytes, const NormInputs* norm, bool glu) {
    using A = ops::Quantize;
    OpCall<A> q(act);
    q.args().act = act;
    q.args().glu = glu;
    if (norm) {
        q.args().rms_norm = true;
        q.args().eps = static_cast<float>(norm->eps);
        q.in(&A::norm, norm->w);
    }
    const Dim R = x.dim(0);
    if (!row_bytes) row_bytes = int64_t(*gguf::row_bytes(act, K.value()));
    return q.in(&A::x, x).dim(&A::rows, R).dim(&A::n_cols, K).out(&A::out, {R, row_bytes}, u8);
}

}  // namespace

Tensor quantize_activations(const Tensor& x, gguf::Type act, int64_t row_bytes) {
    if (act == gguf::Type::F32) return x;
    return quantize(x, x.dim(1), act, row_bytes, nullptr, false);
}

Tensor linear(const Tensor& x, const Tensor& w) {
    check_weight(w, "linear");
    if (x.dim(-1).max() != w.dim(1).max() || !same(x.dim(-1), w.dim(1)))
        fail("linear", "input " + shape_str(x.shape()) + " does not match weight " + shape_str(w.shape()));
    Shape out_shape(x.shape().begin(), x.shape().end() - 1);
    Dim T = numel(out_shape), N = w.dim(0), K = w.dim(1);
    out_shape.push_back(N);
    Tensor xf = x.cast(f32).reshape({T, K});
    // The device's plan for this weight: the format x goes in (Q8_0, Q8_K, F16, ...), or a generated kernel.
    const gguf::Type type = *w.dtype().weight_type();
    const devices::LinearPlan plan = devices::get(x.device()).linear_plan(type, K.max(), T.max());
    if (plan.generated && !is_packed(w))  // one work-item per output
        return (xf.reshape({T, 1, K}) * w.cast(f32).reshape({1, N, K})).sum(-1).reshape(out_shape);
    // An RMS-normalized x, or a SwiGLU of a stacked gate | up, is made by the quantization itself
    // where the device fuses them (their own kernels then run only if something else reads them).
    std::optional<NormInputs> norm;
    std::optional<Tensor> gate_up;
    if (plan.fuse_norm && !plan.cast && plan.act != gguf::Type::F32 && !(norm = as_rms_norm(x))) gate_up = as_swiglu(xf);
    Tensor xa = plan.cast  ? xf.cast(DType::from_gguf(plan.act))
                : norm     ? quantize(norm->x.reshape({T, K}), K, plan.act, plan.act_row_bytes, &*norm, false)
                : gate_up  ? quantize(*gate_up, K, plan.act, plan.act_row_bytes, nullptr, true)
                           : quantize_activations(xf, plan.act, plan.act_row_bytes);
    OpCall<ops::Linear> call(type);
    call.args().type = type;
    call.args().act = plan.act;
    call.args().packed = is_packed(w);
    return call.in(&ops::Linear::x, xa).in(&ops::Linear::w, w).dim(&ops::Linear::T, T).dim(&ops::Linear::N, N).dim(&ops::Linear::K, K)
        .out(&ops::Linear::y, {T, N}, f32).reshape(out_shape);
}

Tensor pack_for_linear(const std::vector<Tensor>& ws) {
    if (ws.empty()) return {};
    const int64_t cols = ws[0].defined() && ws[0].ndim() == 2 ? ws[0].dim(1).max() : 0;
    int64_t rows = 0;
    for (const Tensor& w : ws) {
        check_weight(w, "pack_for_linear");
        const Node* n = w.node().get();
        if (!w.dtype().is_quantized() || !(w.dtype() == ws[0].dtype()) || n->op != Op::BUFFER || buffer_of(n).packed ||
            buffer_of(n).device != buffer_of(ws[0].node().get()).device || w.dim(1).max() != cols ||
            !buffer_of(n).device->can_pack(w.dtype().block, w.dim(0).max(), cols))
            return {};
        rows += w.dim(0).max();
    }
    const gguf::Type type = ws[0].dtype().block;
    Tensor out = Tensor::empty({rows, cols}, ws[0].dtype(), ws[0].device());
    Buffer& dst = buffer_of(out.node().get());
    const size_t bytes = dst.device->packed_bytes(type, rows, cols);
    if (bytes > dst.mem->size) dst.mem = alloc_memory(dst.device, bytes, true);  // a layout larger than the rows
    int64_t at = 0;
    for (const Tensor& w : ws) {  // the stack's rows are each weight's, in order
        const int64_t n = w.dim(0).max();
        uint8_t* to = static_cast<uint8_t*>(dst.mem->host) + dst.device->packed_bytes(type, at, cols);
        dst.device->pack(type, buffer_of(w.node().get()).mem->host, n, cols, to);
        at += n;
    }
    dst.packed = true;
    return out;
}

Tensor pack_for_linear(const Tensor& w) {
    Tensor packed = pack_for_linear(std::vector<Tensor>{w});
    return packed.defined() ? packed : w;
}

LinearWeight linear_weight(const std::vector<Tensor>& ws) {
    LinearWeight lw;
    for (const Tensor& w : ws) {
        check_weight(w, "linear_weight");
        if (w.dim(1).max() != ws[0].dim(1).max())
            fail("linear_weight", "weights of one input differ in columns: " + shape_str(w.shape()) + ", " + shape_str(ws[0].shape()));
        lw.rows.push_back(w.dim(0).max());
    }
    Tensor stack = ws.size() > 1 ? pack_for_linear(ws) : Tensor();
    if (stack.defined()) {
        lw.parts = {stack};
        return lw;
    }
    for (const Tensor& w : ws) {
        Tensor part = pack_for_linear(w);
        lw.parts.push_back(part.node() == w.node() ? read_whole(w) : part);
    }
    return lw;
}

Tensor pack_experts(const Tensor& w) {
    const Node* n = w.node().get();
    if (!w.defined() || w.ndim() != 3 || !w.dtype().is_quantized() || n->op != Op::BUFFER || buffer_of(n).packed)
        return w.defined() ? read_whole(w) : w;
    const Buffer& src = buffer_of(n);
    const gguf::Type type = w.dtype().block;
    const int64_t E = w.dim(0).max(), N = w.dim(1).max(), K = w.dim(2).max();
    if (!src.device->can_pack_experts(type, E, N, K)) return read_whole(w);
    Tensor out = Tensor::empty(w.shape(), w.dtype(), w.device());
    Buffer& dst = buffer_of(out.node().get());
    const size_t bytes = dst.device->packed_bytes(type, E * N, K);
    if (bytes > dst.mem->size) dst.mem = alloc_memory(dst.device, bytes, true);
    dst.device->pack(type, src.mem->host, E * N, K, dst.mem->host);
    dst.packed = true;
    return out;
}

std::vector<Tensor> linear_split(const Tensor& x, const LinearWeight& w) {
    if (w.parts.empty()) fail("linear", "no weights (declare them with linear_weight)");
    std::vector<Tensor> ys;
    if (w.parts.size() == w.rows.size()) {
        for (const Tensor& p : w.parts) ys.push_back(linear(x, p));
        return ys;
    }
    Tensor y = linear(x, w.parts[0]);  // the stack: each weight's outputs in order
    int64_t at = 0;
    for (int64_t n : w.rows) ys.push_back(y.slice(-1, at, n)), at += n;
    return ys;
}

Tensor linear(const Tensor& x, const LinearWeight& w) {
    if (w.parts.size() == 1) return linear(x, w.parts[0]);
    return concat(linear_split(x, w), -1);
}

bool embeds_from(const Tensor& w) { return !is_packed(w) || devices::get(w.device()).rows_read_packed(); }

Tensor embedding(const Tensor& table, const Tensor& ids) {
    check_weight(table, "embedding");
    if (!embeds_from(table)) fail("embedding", "the table is packed for linear() (pack_for_linear) in a layout this device's lookups do not read");
    if (!ids.dtype().is_int()) fail("embedding", "ids must be integers, got " + ids.dtype().name());
    Shape out_shape = ids.shape();
    out_shape.push_back(table.dim(1));
    Dim n = ids.numel();
    if (!table.dtype().is_quantized()) {
        Tensor idx = ids.reshape({n, 1}).expand({n, table.dim(1)});
        return gather(table, 0, idx).cast(f32).reshape(out_shape);
    }
    using A = ops::Rows;
    const gguf::Type type = *table.dtype().weight_type();
    OpCall<A> call(type);
    call.args().type = type;
    call.args().packed = is_packed(table);
    return call.in(&A::table, table).in(&A::ids, ids.cast(i32).reshape({n})).dim(&A::n, n).dim(&A::V, table.dim(0)).dim(&A::D, table.dim(1))
        .out(&A::out, {n, table.dim(1)}, f32).reshape(out_shape);
}

Tensor dequantize(const Tensor& w) {
    if (!w.dtype().is_quantized()) return w.cast(f32);
    check_weight(w, "dequantize");
    if (is_packed(w)) fail("dequantize", "the weight is packed for linear() (pack_for_linear) and serves nothing else");
    using A = ops::Rows;  // every row in order
    const gguf::Type type = *w.dtype().weight_type();
    OpCall<A> call(type);
    call.args().type = type;
    return call.in(&A::table, w).dim(&A::n, w.dim(0)).dim(&A::V, w.dim(0)).dim(&A::D, w.dim(1)).out(&A::out, w.shape(), f32);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
    if (a.ndim() < 2 || b.ndim() < 2) fail("matmul", "needs at least 2-d operands");
    if (!same(a.dim(-1), b.dim(-2))) fail("matmul", "inner dimensions differ: " + shape_str(a.shape()) + " @ " + shape_str(b.shape()));
    // (..., M, K, 1) * (..., 1, K, N) summed over K; b is read transposed so K is the inner stride.
    Tensor p = a.unsqueeze(-1) * b.unsqueeze(-3);
    return p.sum(-2);
}

Tensor softmax(const Tensor& x_in, int axis) {
    Tensor x = x_in.dtype().is_float() ? x_in : x_in.cast(f32);
    Tensor e = exp(x - x.max(axis, true));
    return e / e.sum(axis, true);
}

Tensor rms_norm(const Tensor& x_in, double eps) {
    Tensor x = x_in.cast(f32);
    return x * rsqrt((x * x).mean(-1, true) + eps);
}
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) { return rms_norm(x, eps) * weight.cast(f32); }

Tensor sigmoid(const Tensor& x) { return reciprocal(exp(-x) + 1.0); }
Tensor silu(const Tensor& x) { return x * sigmoid(x); }
Tensor softplus(const Tensor& x) {
    // log(1 + e^x) loses everything to rounding for large x, where it equals x.
    return where(gt(x, Tensor::scalar(20.0, x.dtype())), x, log(exp(x) + 1.0));
}

Tensor cumsum(const Tensor& x_in, int axis) {
    Tensor x = x_in.transpose(axis, -1);
    Dim n = x.dim(-1);
    // out[..., i] = sum over j <= i of x[..., j]: a masked sum over an (i, j) square.
    Tensor i = Tensor::arange(n).reshape({n, 1}), j = Tensor::arange(n).reshape({1, n});
    Tensor masked = where(le(j, i), x.unsqueeze(-2), Tensor::scalar(0, x.dtype()));
    return masked.sum(-1).transpose(axis, -1);
}

std::pair<Tensor, Tensor> topk(const Tensor& x_in, int k) {
    Tensor x = x_in.cast(f32);
    Dim n = x.dim(-1);
    if (k < 1 || k > n.min()) fail("topk", "k = " + std::to_string(k) + " outside [1, " + n.str() + "]");
    Shape out_shape = x.shape();
    out_shape.back() = k;
    Dim rows = numel(Shape(x.shape().begin(), x.shape().end() - 1));
    OpCall<ops::TopK> call(gguf::Type::F32);
    Tensor idx = call.in(&ops::TopK::x, x.reshape({rows, n})).dim(&ops::TopK::rows, rows).dim(&ops::TopK::n, n).dim(&ops::TopK::k, k)
                     .out(&ops::TopK::out, {rows, k}, i32).reshape(out_shape);
    return {gather(x, -1, idx), idx};
}

namespace {
// theta^(-2i/rope_dim) as ggml computes it (a running float product of powf(theta, -2/rope_dim)), with
// YaRN's per-dimension blend of interpolated (· freq_scale) and original frequencies folded in.
Tensor inv_freqs(int rope_dim, double theta, const RopeScaling& sc, const std::string& device) {
    static std::mutex mu;
    static std::map<std::tuple<int, double, float, float, int, float, float, std::string>, Tensor> cache;
    std::lock_guard lock(mu);
    auto& t = cache[{rope_dim, theta, sc.freq_scale, sc.ext_factor, sc.n_ctx_orig, sc.beta_fast, sc.beta_slow, device}];
    if (!t.defined()) {
        // ggml_rope_yarn_corr_dims: the dims where the wavelength crosses n_ctx_orig / beta turns.
        auto corr_dim = [&](float beta) {
            return float(rope_dim) * std::log(float(sc.n_ctx_orig) / (beta * 2.0f * float(M_PI))) / (2.0f * std::log(float(theta)));
        };
        float low = 0, high = 0;
        if (sc.ext_factor != 0.0f) {
            low = std::max(0.0f, std::floor(corr_dim(sc.beta_fast)));
            high = std::min(float(rope_dim - 1), std::ceil(corr_dim(sc.beta_slow)));
        }
        std::vector<float> f(size_t(rope_dim / 2));
        float scale = std::pow(float(theta), -2.0f / float(rope_dim)), v = 1.0f;
        for (size_t i = 0; i < f.size(); i++, v *= scale) {
            float mix = 0.0f;  // rope_yarn_ramp(low, high, 2i) · ext_factor: 1 keeps the original frequency
            if (sc.ext_factor != 0.0f)
                mix = (1.0f - std::min(1.0f, std::max(0.0f, (float(i) - low) / std::max(0.001f, high - low)))) * sc.ext_factor;
            f[i] = v * (sc.freq_scale * (1.0f - mix) + mix);
        }
        t = Tensor::from_data(f.data(), f.size() * sizeof(float), {rope_dim / 2}, f32, device);
    }
    return t;
}
}  // namespace

namespace {
// x (T, H, Dh) rotated at positions pos_of(T) (T) f32.
Tensor rope_at(const Tensor& x_in, const std::function<Tensor(const Dim&)>& pos_of, int rope_dim, double theta, RopeLayout layout,
               const Tensor& freq_factors, const RopeScaling& scaling) {
    if (x_in.ndim() != 3) fail("rope", "expects (T, H, Dh), got " + shape_str(x_in.shape()));
    Tensor x = x_in.cast(f32);
    Dim T = x.dim(0), H = x.dim(1), Dh = x.dim(2);
    if (rope_dim <= 0 || rope_dim % 2 || rope_dim > Dh.max()) fail("rope", "rope_dim " + std::to_string(rope_dim) + " invalid for head size " + Dh.str());
    if (scaling.ext_factor != 0.0f && (scaling.n_ctx_orig <= 0 || scaling.freq_scale <= 0.0f))
        fail("rope", "YaRN needs the original context length and a positive freq_scale");
    int half = rope_dim / 2;
    Tensor freq = inv_freqs(rope_dim, theta, scaling, x.device());
    if (freq_factors.defined()) freq = freq / freq_factors.cast(f32);
    Tensor pos = pos_of(T).reshape({T, 1});
    Tensor angle = pos * freq.reshape({1, half});             // (T, half)
    Tensor c = cos(angle), s = sin(angle);
    float mscale = scaling.attn_factor;
    if (scaling.ext_factor != 0.0f) mscale *= 1.0f + 0.1f * std::log(1.0f / scaling.freq_scale);
    if (mscale != 1.0f) c = c * double(mscale), s = s * double(mscale);
    c = c.reshape({T, 1, half}), s = s.reshape({T, 1, half});
    Tensor x0, x1;
    if (layout == RopeLayout::NEOX) {
        x0 = x.slice(2, 0, half), x1 = x.slice(2, half, half);
    } else {
        Tensor pairs = x.slice(2, 0, rope_dim).reshape({T, H, half, 2});
        x0 = pairs.slice(3, 0, 1).squeeze(3), x1 = pairs.slice(3, 1, 1).squeeze(3);
    }
    Tensor r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;         // (T, H, half)
    Tensor rotated = layout == RopeLayout::NEOX ? concat({r0, r1}, 2) : stack({r0, r1}, 3).reshape({T, H, rope_dim});
    if (rope_dim == Dh.max() && Dh.is_const()) return rotated;
    return concat({rotated, x.slice(2, rope_dim, Dh - rope_dim)}, 2);
}
}  // namespace

Tensor rope(const Tensor& x, const Dim& start_pos, int rope_dim, double theta, RopeLayout layout, const Tensor& freq_factors,
            const RopeScaling& scaling) {
    auto pos_of = [&](const Dim& T) { return (Tensor::arange(T) + Tensor::from_dim(start_pos)).cast(f32); };
    return rope_at(x, pos_of, rope_dim, theta, layout, freq_factors, scaling);
}

Tensor rope(const Tensor& x, const Tensor& positions, int rope_dim, double theta, RopeLayout layout, const Tensor& freq_factors,
            const RopeScaling& scaling) {
    if (positions.ndim() != 1 || !positions.dtype().is_int() || x.ndim() < 1 || !same(positions.dim(0), x.dim(0)))
        fail("rope", "positions must be (T) integers for x " + shape_str(x.shape()) + ", got " + shape_str(positions.shape()));
    return rope_at(x, [&](const Dim&) { return positions.cast(f32); }, rope_dim, theta, layout, freq_factors, scaling);
}

Tensor attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Dim& start_pos, double scale, int window,
                 const Tensor& sinks) {
    if (q.ndim() != 3 || k_cache.ndim() != 3 || v_cache.ndim() != 3) fail("attention", "expects q (T, H, Dk), caches (C, Hkv, D)");
    Dim T = q.dim(0), H = q.dim(1), Dk = q.dim(2), Hkv = k_cache.dim(1), Dv = v_cache.dim(2);
    if (!same(k_cache.dim(2), Dk) || !same(v_cache.dim(1), Hkv) || !same(k_cache.dim(0), v_cache.dim(0)))
        fail("attention", "cache shapes " + shape_str(k_cache.shape()) + ", " + shape_str(v_cache.shape()) + " do not match q " + shape_str(q.shape()));
    if (!H.is_const() || !Hkv.is_const() || H.value() % Hkv.value()) fail("attention", "n_head must be a multiple of n_head_kv");
    if (window < 0) fail("attention", "negative window");
    if (sinks.defined() && (sinks.ndim() != 1 || !same(sinks.dim(0), H))) fail("attention", "sinks must be (n_head), got " + shape_str(sinks.shape()));
    if (!(k_cache.dtype() == v_cache.dtype())) fail("attention", "the caches must have one dtype");
    const gguf::Type kv_type = kv_cache_type(k_cache.dtype(), Dk.max(), k_cache.device(), "attention");
    kv_cache_type(v_cache.dtype(), Dv.max(), v_cache.device(), "attention");
    using A = ops::Attention;
    OpCall<A> call(kv_type);
    call.args().kv_type = kv_type;
    call.args().window = window;
    call.args().scale = float(scale);
    call.in(&A::q, q.cast(f32)).in(&A::k, k_cache).in(&A::v, v_cache);
    if (sinks.defined()) call.in(&A::sinks, sinks.cast(f32));
    call.dim(&A::T, T).dim(&A::H, H).dim(&A::Hkv, Hkv).dim(&A::Dk, Dk).dim(&A::Dv, Dv).dim(&A::start_pos, start_pos).dim(&A::C, k_cache.dim(0));
    call.dim(&A::v_pos_stride, Hkv * Dv).dim(&A::v_head_stride, Dv);
    return call.out(&A::out, {T, H, Dv}, f32);
}

}  // namespace engine
