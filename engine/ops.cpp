// Elementwise math with broadcasting and dtype promotion, reductions, concatenation, gather and
// custom-kernel calls. Every function only builds nodes.
#include "engine/ir_impl.h"
#include "engine/realize_impl.h"
#include "engine/op_call_impl.h"

#include <cmath>
#include <map>
#include <mutex>
#include <numbers>

namespace engine {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

int rank(DType d) {  // promotion order: bool < ints (by size, unsigned first) < f16/bf16 < f32
    switch (d.code) {
        case DType::BOOL: return 0;
        case DType::U8: return 1;
        case DType::I8: return 2;
        case DType::U16: return 3;
        case DType::I16: return 4;
        case DType::U32: return 5;
        case DType::I32: return 6;
        case DType::I64: return 7;
        case DType::F16: case DType::BF16: return 8;
        case DType::F32: return 9;
        default: return -1;
    }
}

DType promote(DType a, DType b) {
    if (a == b) return a;
    if ((a.code == DType::F16 && b.code == DType::BF16) || (a.code == DType::BF16 && b.code == DType::F16)) return f32;
    return rank(a) >= rank(b) ? a : b;
}

void check_numeric(const Tensor& t, const char* op) {
    if (!t.defined()) fail(op, "undefined tensor");
    if (t.dtype().is_quantized()) fail(op, t.dtype().name() + " tensors are opaque (dequantize first)");
}

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
    size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; i++) {
        const Dim* da = i < n - a.size() ? nullptr : &a[i - (n - a.size())];
        const Dim* db = i < n - b.size() ? nullptr : &b[i - (n - b.size())];
        if (!da) out[i] = *db;
        else if (!db) out[i] = *da;
        else if (same(*da, *db)) out[i] = *da;
        else if (same(*da, 1)) out[i] = *db;
        else if (same(*db, 1)) out[i] = *da;
        else fail(op, "cannot broadcast " + shape_str(a) + " with " + shape_str(b));
    }
    return out;
}

Tensor binary(Op op, const Tensor& a_in, const Tensor& b_in, const char* name) {
    check_numeric(a_in, name);
    check_numeric(b_in, name);
    DType dt = promote(a_in.dtype(), b_in.dtype());
    Shape s = broadcast_shape(a_in.shape(), b_in.shape(), name);
    Tensor a = a_in.cast(dt).expand(s), b = b_in.cast(dt).expand(s);
    return make_tensor(alu(op, a.node(), b.node()), a_in.device());
}

Tensor unary(Op op, const Tensor& x, const char* name, bool float_only = true) {
    check_numeric(x, name);
    Tensor t = float_only && !x.dtype().is_float() ? x.cast(f32) : x;
    return make_tensor(alu(op, t.node()), x.device());
}

// A scalar operand takes the tensor's dtype, unless that would lose it (0.5 next to an int tensor).
Tensor scalar_like(const Tensor& t, double v) {
    if (!t.dtype().is_float() && v != std::trunc(v)) return Tensor::scalar(v, f32);
    return Tensor::scalar(v, t.dtype());
}

void require_int(const Tensor& t, const char* op) {
    if (!(t.dtype().is_int() || t.dtype().code == DType::BOOL)) fail(op, "needs integer or bool operands, got " + t.dtype().name());
}

std::vector<int64_t> norm_axes(const std::vector<int>& axes, int ndim, const char* op) {
    std::vector<int64_t> out;
    for (int a : axes) {
        int n = a < 0 ? a + ndim : a;
        if (n < 0 || n >= ndim) fail(op, "axis " + std::to_string(a) + " out of range for " + std::to_string(ndim) + " dims");
        if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
    std::sort(out.begin(), out.end());
    return out;
}

Tensor reduce(ReduceOp rop, const Tensor& x_in, const std::vector<int>& axes_in, bool keepdim, const char* name) {
    check_numeric(x_in, name);
    Tensor x = x_in;
    // Half-precision inputs accumulate in f32; bool sums count in i32.
    if (x.dtype().code == DType::F16 || x.dtype().code == DType::BF16) return reduce(rop, x.cast(f32), axes_in, keepdim, name).cast(x_in.dtype());
    if (x.dtype().code == DType::BOOL) x = x.cast(rop == ReduceOp::SUM ? i32 : u8);
    std::vector<int64_t> axes = norm_axes(axes_in, x.ndim(), name);
    Tensor r = x;
    if (!axes.empty()) {
        Arg a;
        a.i = int64_t(rop);
        a.ints = axes;
        r = make_tensor(make(Op::REDUCE_AXIS, x.dtype(), {x.node()}, std::move(a)), x.device());
    }
    if (x_in.dtype().code == DType::BOOL && rop == ReduceOp::MAX) r = r.cast(bool_);
    if (keepdim) return r;
    Shape s;
    for (int i = 0; i < x.ndim(); i++)
        if (std::find(axes.begin(), axes.end(), i) == axes.end()) s.push_back(x.shape()[i]);
    return r.reshape(s);
}

}  // namespace

// --- arithmetic -----------------------------------------------------------------------------------
Tensor operator+(const Tensor& a, const Tensor& b) { return binary(Op::ADD, a, b, "add"); }
Tensor operator-(const Tensor& a, const Tensor& b) { return binary(Op::SUB, a, b, "sub"); }
Tensor operator*(const Tensor& a, const Tensor& b) { return binary(Op::MUL, a, b, "mul"); }
Tensor operator/(const Tensor& a, const Tensor& b) { return binary(Op::DIV, a, b, "div"); }
Tensor operator%(const Tensor& a, const Tensor& b) { return binary(Op::MOD, a, b, "mod"); }
Tensor operator-(const Tensor& a) {
    check_numeric(a, "neg");
    return make_tensor(alu(Op::NEG, a.node()), a.device());
}
Tensor operator+(const Tensor& a, double b) { return a + scalar_like(a, b); }
Tensor operator-(const Tensor& a, double b) { return a - scalar_like(a, b); }
Tensor operator*(const Tensor& a, double b) { return a * scalar_like(a, b); }
Tensor operator/(const Tensor& a, double b) { return a / scalar_like(a, b); }
Tensor operator%(const Tensor& a, double b) { return a % scalar_like(a, b); }
Tensor operator+(double a, const Tensor& b) { return scalar_like(b, a) + b; }
Tensor operator-(double a, const Tensor& b) { return scalar_like(b, a) - b; }
Tensor operator*(double a, const Tensor& b) { return scalar_like(b, a) * b; }
Tensor operator/(double a, const Tensor& b) { return scalar_like(b, a) / b; }

// --- unary math (ints are computed in f32) ---------------------------------------------------------
Tensor exp2(const Tensor& x) { return unary(Op::EXP2, x, "exp2"); }
Tensor log2(const Tensor& x) { return unary(Op::LOG2, x, "log2"); }
// Half-precision inputs scale in f32: rounding x * log2(e) to f16 would cost most of the result's bits.
Tensor exp(const Tensor& x) {
    if (x.dtype().code == DType::F16 || x.dtype().code == DType::BF16) return exp(x.cast(f32)).cast(x.dtype());
    return exp2(x * std::numbers::log2e);
}
Tensor log(const Tensor& x) {
    if (x.dtype().code == DType::F16 || x.dtype().code == DType::BF16) return log(x.cast(f32)).cast(x.dtype());
    return log2(x) * std::numbers::ln2;
}
Tensor sqrt(const Tensor& x) { return unary(Op::SQRT, x, "sqrt"); }
Tensor reciprocal(const Tensor& x) { return unary(Op::RECIP, x, "reciprocal"); }
Tensor rsqrt(const Tensor& x) { return reciprocal(sqrt(x)); }
Tensor sin(const Tensor& x) { return unary(Op::SIN, x, "sin"); }
Tensor cos(const Tensor& x) {
    // SIN's phase is added in double precision, so cos stays exact for large arguments (RoPE angles).
    Tensor t = x.dtype().is_float() ? x : x.cast(f32);
    check_numeric(t, "cos");
    Arg a;
    a.f = std::numbers::pi / 2;
    return make_tensor(make(Op::SIN, t.dtype(), {t.node()}, std::move(a)), x.device());
}
Tensor abs(const Tensor& x) { return where(lt(x, scalar_like(x, 0)), -x, x); }

Tensor maximum(const Tensor& a, const Tensor& b) { return binary(Op::MAX, a, b, "maximum"); }
Tensor minimum(const Tensor& a, const Tensor& b) { return where(lt(b, a), b, a); }
Tensor maximum(const Tensor& a, double b) { return maximum(a, scalar_like(a, b)); }
Tensor minimum(const Tensor& a, double b) { return minimum(a, scalar_like(a, b)); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
    check_numeric(cond, "where");
    check_numeric(a, "where");
    check_numeric(b, "where");
    DType dt = promote(a.dtype(), b.dtype());
    Shape s = broadcast_shape(broadcast_shape(cond.shape(), a.shape(), "where"), b.shape(), "where");
    Tensor c = (cond.dtype().code == DType::BOOL ? cond : ne(cond, scalar_like(cond, 0))).expand(s);
    return make_tensor(engine::where(c.node(), a.cast(dt).expand(s).node(), b.cast(dt).expand(s).node()), a.device());
}
Tensor where(const Tensor& cond, double a, const Tensor& b) { return where(cond, scalar_like(b, a), b); }
Tensor where(const Tensor& cond, const Tensor& a, double b) { return where(cond, a, scalar_like(a, b)); }

Tensor lt(const Tensor& a, const Tensor& b) { return binary(Op::CMPLT, a, b, "lt"); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(Op::CMPLT, b, a, "gt"); }
Tensor le(const Tensor& a, const Tensor& b) { return logical_not(gt(a, b)); }
Tensor ge(const Tensor& a, const Tensor& b) { return logical_not(lt(a, b)); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(Op::CMPEQ, a, b, "eq"); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(Op::CMPNE, a, b, "ne"); }
Tensor logical_not(const Tensor& a) {
    check_numeric(a, "logical_not");
    Tensor b = a.dtype().code == DType::BOOL ? a : ne(a, scalar_like(a, 0));
    return make_tensor(alu(Op::NOT, b.node()), a.device());
}
Tensor bitwise_and(const Tensor& a, const Tensor& b) { require_int(a, "bitwise_and"), require_int(b, "bitwise_and"); return binary(Op::AND, a, b, "bitwise_and"); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { require_int(a, "bitwise_or"), require_int(b, "bitwise_or"); return binary(Op::OR, a, b, "bitwise_or"); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { require_int(a, "bitwise_xor"), require_int(b, "bitwise_xor"); return binary(Op::XOR, a, b, "bitwise_xor"); }
Tensor shl(const Tensor& a, const Tensor& b) { require_int(a, "shl"), require_int(b, "shl"); return binary(Op::SHL, a, b.cast(a.dtype()), "shl"); }
Tensor shr(const Tensor& a, const Tensor& b) { require_int(a, "shr"), require_int(b, "shr"); return binary(Op::SHR, a, b.cast(a.dtype()), "shr"); }

// --- reductions -----------------------------------------------------------------------------------
Tensor Tensor::sum(const std::vector<int>& axes, bool keepdim) const { return reduce(ReduceOp::SUM, *this, axes, keepdim, "sum"); }
Tensor Tensor::max(const std::vector<int>& axes, bool keepdim) const { return reduce(ReduceOp::MAX, *this, axes, keepdim, "max"); }
Tensor Tensor::mean(const std::vector<int>& axes, bool keepdim) const {
    Tensor x = dtype().is_float() ? *this : cast(f32);
    Dim n = 1;
    for (int64_t a : norm_axes(axes, ndim(), "mean")) n = n * shape()[a];
    Tensor s = x.sum(axes, keepdim);
    if (n.is_const()) return s * (1.0 / double(n.value()));
    return s / Tensor::from_dim(n, f32).cast(s.dtype());
}

// --- structure ------------------------------------------------------------------------------------
Tensor concat(const std::vector<Tensor>& parts, int axis) {
    if (parts.empty()) fail("concat", "no tensors");
    if (parts.size() == 1) return parts[0];
    int nd = parts[0].ndim();
    int ax = axis < 0 ? axis + nd : axis;
    if (ax < 0 || ax >= nd) fail("concat", "axis " + std::to_string(axis) + " out of range");
    DType dt = parts[0].dtype();
    Dim total = 0;
    for (auto& p : parts) {
        check_numeric(p, "concat");
        if (p.ndim() != nd) fail("concat", "ranks differ: " + shape_str(parts[0].shape()) + " and " + shape_str(p.shape()));
        for (int i = 0; i < nd; i++)
            if (i != ax && !same(p.shape()[i], parts[0].shape()[i]))
                fail("concat", "shapes " + shape_str(parts[0].shape()) + " and " + shape_str(p.shape()) + " differ off the axis");
        dt = promote(dt, p.dtype());
        total = total + p.shape()[ax];
    }
    // Each part padded into place with zeros; the sum selects exactly one part per element.
    Tensor out;
    Dim offset = 0;
    for (auto& p : parts) {
        std::vector<std::pair<Dim, Dim>> w(nd, {0, 0});
        w[ax] = {offset, total - offset - p.shape()[ax]};
        Tensor padded = p.cast(dt).pad(w);
        offset = offset + p.shape()[ax];
        out = out.defined() ? (dt.code == DType::BOOL ? bitwise_or(out, padded) : out + padded) : padded;
    }
    return out;
}

Tensor stack(const std::vector<Tensor>& parts, int axis) {
    std::vector<Tensor> u;
    for (auto& p : parts) u.push_back(p.unsqueeze(axis));
    return concat(u, axis);
}

Tensor gather(const Tensor& x, int axis, const Tensor& index) {
    check_numeric(x, "gather");
    check_numeric(index, "gather");
    if (!index.dtype().is_int()) fail("gather", "index must be an integer tensor, got " + index.dtype().name());
    if (index.ndim() != x.ndim()) fail("gather", "index rank " + std::to_string(index.ndim()) + " != input rank " + std::to_string(x.ndim()));
    int ax = axis < 0 ? axis + x.ndim() : axis;
    if (ax < 0 || ax >= x.ndim()) fail("gather", "axis out of range");
    for (int i = 0; i < x.ndim(); i++)
        if (i != ax && !same(index.shape()[i], x.shape()[i]))
            fail("gather", "index shape " + shape_str(index.shape()) + " does not match " + shape_str(x.shape()) + " off the axis");
    Arg a;
    a.i = ax;
    return make_tensor(make(Op::GATHER, x.dtype(), {x.node(), index.node()}, std::move(a)), x.device());
}

// --- hot ops (op_call_impl.h) ---------------------------------------------------------------------
Tensor make_op(const OpSpec& spec, const std::vector<Tensor>& inputs, const Shape& out_shape, DType out_dtype,
               const std::vector<Dim>& dims) {
    const char* name = devices::ops::name(spec.kind);
    std::vector<NodeRef> srcs;
    for (auto& t : inputs) {
        if (!t.defined()) fail(name, "undefined input");
        srcs.push_back(t.node());
    }
    // Intern by content: the node's identity is its spec's address.
    static std::mutex mu;
    static std::map<std::string, std::shared_ptr<const OpSpec>> specs;
    std::string key(reinterpret_cast<const char*>(spec.fixed.data()), spec.fixed.size());
    for (uint32_t v : {uint32_t(spec.kind), uint32_t(spec.type), spec.out}) key.append(reinterpret_cast<const char*>(&v), 4);
    for (auto* list : {&spec.ins, &spec.dims}) {
        key.push_back('|');
        key.append(reinterpret_cast<const char*>(list->data()), list->size() * 4);
    }
    std::shared_ptr<const OpSpec> interned;
    {
        std::lock_guard lock(mu);
        auto& slot = specs[key];
        if (!slot) slot = std::make_shared<const OpSpec>(spec);
        interned = slot;
    }
    Arg a;
    a.obj = interned;
    a.ints = {int64_t(out_shape.size())};
    a.dims = out_shape;
    a.dims.insert(a.dims.end(), dims.begin(), dims.end());
    return make_tensor(make(Op::CUSTOM, out_dtype, std::move(srcs), std::move(a)), inputs.at(0).device());
}

}  // namespace engine
