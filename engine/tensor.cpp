// Tensor handles: creation, properties, movement (views that only build nodes), and state
// (assign, realize, host copies). Elementwise math and reductions are in ops.cpp.
#include "engine/ir_impl.h"
#include "engine/realize_impl.h"

#include "devices/device.h"
#include "gguf/gguf.h"
#include "devices/env.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace engine {

using detail::TensorImpl;

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

bool is_buffer_backed(const Node* n) { return n->op == Op::BUFFER || n->op == Op::AFTER; }

int norm_axis(int axis, int ndim, const char* op) {
    int a = axis < 0 ? axis + ndim : axis;
    if (a < 0 || a >= ndim) fail(op, "axis " + std::to_string(axis) + " out of range for " + std::to_string(ndim) + " dims");
    return a;
}

}  // namespace

Tensor make_tensor(NodeRef n, const std::string& device) {
    return Tensor(std::make_shared<TensorImpl>(TensorImpl{std::move(n), device, nullptr}));
}

// A view keeps a link to the tensor owning its buffer, so assign() through the view updates it.
Tensor make_view(const Tensor& src, NodeRef n) {
    Tensor t = make_tensor(std::move(n), src.device());
    const auto& si = src.impl();
    if (si->base) t.impl()->base = si->base;
    else if (is_buffer_backed(si->node.get())) t.impl()->base = si;
    return t;
}

// --- creation -------------------------------------------------------------------------------------
namespace {
std::string& default_device_name() {
    static std::string name = devices::env::device();
    return name;
}
}  // namespace

const std::string& default_device() { return default_device_name(); }

void set_default_device(const std::string& name) {
    devices::get(name);  // opens it: an unknown name or a missing GPU throws here
    // Sessions of a server all name the same device: only a real change writes (graphs may be building).
    if (default_device_name() != name) default_device_name() = name;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, const std::string& device_in) {
    const std::string& device = device_in.empty() ? default_device() : device_in;
    auto buf = make_buffer(device, dtype, engine::numel(shape).max());
    return make_tensor(buffer_node(std::move(buf), shape), device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
    if (dtype.is_quantized()) fail("full", "cannot fill a " + dtype.name() + " tensor");
    Tensor c = make_tensor(make_const(value, dtype), default_device());
    if (shape.empty()) return c;
    return c.reshape(Shape(shape.size(), 1)).expand(shape);
}

Tensor Tensor::from_dim(const Dim& d, DType dtype) { return make_tensor(engine::cast(d.node(), dtype), default_device()); }

Tensor Tensor::arange(const Dim& n, DType dtype) {
    Arg a;
    a.dims = {n};
    return make_tensor(make(Op::IOTA, dtype, {}, std::move(a)), default_device());
}

Tensor Tensor::from_data(const void* data, size_t bytes, const Shape& shape, DType dtype, const std::string& device) {
    int64_t n = engine::numel(shape).max();
    if (bytes != dtype.nbytes(n))
        fail("from_data", std::to_string(bytes) + " bytes given for " + shape_str(shape) + " " + dtype.name() +
                              " (needs " + std::to_string(dtype.nbytes(n)) + ")");
    Tensor t = empty(shape, dtype, device);
    Buffer& b = buffer_of(t.node().get());
    b.device->copy_in(*b.mem, 0, data, bytes);
    return t;
}

Tensor Tensor::external(const void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> owner, bool sparse) {
    auto buf = std::make_shared<Buffer>();
    buf->device = &devices::get(default_device());
    buf->dtype = dtype;
    buf->numel = engine::numel(shape).value();
    buf->external = true;
    buf->sparse = sparse;
    buf->owner = std::move(owner);
    buf->host_data = data;
    devices::Device* dev = buf->device;
    devices::Memory m = dev->wrap(data, dtype.nbytes(buf->numel), sparse ? devices::Access::SPARSE : devices::Access::STREAMED);
    // the device frees an uploaded copy, or lets go of wrapped memory (the CPU releases its file pages)
    buf->mem = std::shared_ptr<devices::Memory>(new devices::Memory(m), [dev](devices::Memory* p) {
        dev->free(*p);
        delete p;
    });
    return make_tensor(buffer_node(std::move(buf), shape), default_device());
}

Tensor Tensor::from_gguf(const gguf::TensorInfo& info, std::shared_ptr<const void> owner) {
    Shape shape(info.dims.rbegin(), info.dims.rend());
    DType dt = DType::from_gguf(info.type);
    if (dt.is_quantized() && (shape.empty() || shape.back().value() % gguf::type_traits(info.type).block_size))
        fail("from_gguf", "tensor '" + info.name + "': rows are not whole " + dt.name() + " blocks");
    if (dt.nbytes(engine::numel(shape).value()) != info.n_bytes)
        fail("from_gguf", "tensor '" + info.name + "': " + std::to_string(info.n_bytes) + " bytes for " + shape_str(shape) + " " + dt.name());
    return external(info.data, shape, dt, std::move(owner));
}

// --- properties -----------------------------------------------------------------------------------
const Shape& Tensor::shape() const {
    if (!impl_) fail("shape", "undefined tensor");
    return impl_->node->shape;
}
Dim Tensor::dim(int axis) const { return shape()[norm_axis(axis, ndim(), "dim")]; }
DType Tensor::dtype() const { return impl_->node->dtype; }
const std::string& Tensor::device() const { return impl_->device; }
bool Tensor::is_realized() const { return impl_ && impl_->node->op == Op::BUFFER; }
NodeRef Tensor::node() const { return impl_->node; }

// --- movement -------------------------------------------------------------------------------------
Tensor Tensor::reshape(const Shape& new_shape_in) const {
    Shape ns = new_shape_in;
    int infer = -1;
    for (size_t i = 0; i < ns.size(); i++) {
        if (ns[i].is_const() && ns[i].value() == -1) {
            if (infer >= 0) fail("reshape", "more than one -1 in " + shape_str(ns));
            infer = int(i);
        } else if (ns[i].max() < 0) {
            fail("reshape", "negative dimension in " + shape_str(ns));
        }
    }
    if (infer >= 0) {
        Dim known = 1;
        for (size_t i = 0; i < ns.size(); i++)
            if (int(i) != infer) known = known * ns[i];
        if (!numel().is_const() || !known.is_const() || known.value() == 0 || numel().value() % known.value())
            fail("reshape", "cannot infer -1 reshaping " + shape_str(shape()) + " to " + shape_str(ns));
        ns[infer] = numel().value() / known.value();
    }
    if (!same(engine::numel(ns), numel()))
        fail("reshape", "cannot reshape " + shape_str(shape()) + " to " + shape_str(ns) + " (element counts differ)");
    if (shapes_equal(ns, shape())) return *this;
    if (dtype().is_quantized()) {
        // Block types reshape only while rows stay whole blocks: the innermost dimension is kept.
        if (ns.empty() || shape().empty() || !same(ns.back(), shape().back()))
            fail("reshape", dtype().name() + " tensors keep their innermost dimension");
    }
    Arg a;
    a.dims = ns;
    return make_view(*this, make(Op::RESHAPE, dtype(), {node()}, std::move(a)));
}

Tensor Tensor::permute(const std::vector<int>& order) const {
    if (int(order.size()) != ndim()) fail("permute", "order has " + std::to_string(order.size()) + " axes for " + std::to_string(ndim()) + " dims");
    std::vector<int64_t> o;
    std::vector<bool> used(ndim());
    for (int a : order) {
        int n = norm_axis(a, ndim(), "permute");
        if (used[n]) fail("permute", "axis " + std::to_string(a) + " repeated");
        used[n] = true;
        o.push_back(n);
    }
    bool identity = true;
    for (size_t i = 0; i < o.size(); i++) identity &= o[i] == int64_t(i);
    if (identity) return *this;
    if (dtype().is_quantized()) fail("permute", dtype().name() + " tensors cannot be permuted");
    Arg a;
    a.ints = o;
    return make_view(*this, make(Op::PERMUTE, dtype(), {node()}, std::move(a)));
}

Tensor Tensor::transpose(int a, int b) const {
    std::vector<int> order(ndim());
    std::iota(order.begin(), order.end(), 0);
    std::swap(order[norm_axis(a, ndim(), "transpose")], order[norm_axis(b, ndim(), "transpose")]);
    return permute(order);
}

Tensor Tensor::expand(const Shape& target) const {
    if (int(target.size()) < ndim()) fail("expand", "cannot expand " + shape_str(shape()) + " to " + shape_str(target));
    Tensor t = *this;
    if (int(target.size()) > ndim()) {
        Shape s(target.size() - ndim(), 1);
        s.insert(s.end(), shape().begin(), shape().end());
        t = reshape(s);
    }
    for (size_t i = 0; i < target.size(); i++) {
        const Dim& d = t.shape()[i];
        if (!same(d, target[i]) && !(d.is_const() && d.value() == 1))
            fail("expand", "cannot expand " + shape_str(shape()) + " to " + shape_str(target));
    }
    if (shapes_equal(t.shape(), target)) return t;
    if (dtype().is_quantized()) fail("expand", dtype().name() + " tensors cannot be broadcast");
    Arg a;
    a.dims = target;
    return make_view(t, make(Op::EXPAND, dtype(), {t.node()}, std::move(a)));
}

Tensor Tensor::shrink(const std::vector<std::pair<Dim, Dim>>& ranges) const {
    if (int(ranges.size()) != ndim()) fail("shrink", "needs one range per dimension of " + shape_str(shape()));
    Arg a;
    bool identity = true;
    for (int i = 0; i < ndim(); i++) {
        auto& [b, e] = ranges[i];
        // Symbolic windows that may fit are checked again at launch, with the Vars bound (lower.cpp).
        if (b.min() < 0 || e.min() > shape()[i].max() || (b.is_const() && e.is_const() && b.value() > e.value()) ||
            (e.is_const() && shape()[i].is_const() && e.value() > shape()[i].value()))
            fail("shrink", "range [" + b.str() + ", " + e.str() + ") outside dimension " + std::to_string(i) + " of " + shape_str(shape()));
        identity &= b.is_const() && b.value() == 0 && same(e, shape()[i]);
        a.dims.push_back(b);
        a.dims.push_back(e);
    }
    if (identity) return *this;
    if (dtype().is_quantized() && !(same(ranges.back().first, 0) && same(ranges.back().second, shape().back())))
        fail("shrink", dtype().name() + " tensors keep whole rows");
    return make_view(*this, make(Op::SHRINK, dtype(), {node()}, std::move(a)));
}

Tensor Tensor::pad(const std::vector<std::pair<Dim, Dim>>& widths, double value) const {
    if (int(widths.size()) != ndim()) fail("pad", "needs one (before, after) pair per dimension of " + shape_str(shape()));
    if (dtype().is_quantized()) fail("pad", dtype().name() + " tensors cannot be padded");
    Arg a;
    bool identity = true;
    for (auto& [b, e] : widths) {
        if (b.min() < 0 || e.min() < 0) fail("pad", "negative pad width");
        identity &= b.is_const() && b.value() == 0 && e.is_const() && e.value() == 0;
        a.dims.push_back(b);
        a.dims.push_back(e);
    }
    if (identity) return *this;
    a.f = value;
    return make_view(*this, make(Op::PAD, dtype(), {node()}, std::move(a)));
}

Tensor Tensor::slice(int axis, const Dim& start, const Dim& length) const {
    int ax = norm_axis(axis, ndim(), "slice");
    std::vector<std::pair<Dim, Dim>> r;
    for (int i = 0; i < ndim(); i++) r.push_back(i == ax ? std::pair<Dim, Dim>{start, start + length} : std::pair<Dim, Dim>{0, shape()[i]});
    return shrink(r);
}

Tensor Tensor::unsqueeze(int axis) const {
    int ax = axis < 0 ? axis + ndim() + 1 : axis;
    if (ax < 0 || ax > ndim()) fail("unsqueeze", "axis " + std::to_string(axis) + " out of range");
    Shape s = shape();
    s.insert(s.begin() + ax, 1);
    return reshape(s);
}

Tensor Tensor::squeeze(int axis) const {
    int ax = norm_axis(axis, ndim(), "squeeze");
    if (!same(shape()[ax], 1)) fail("squeeze", "dimension " + std::to_string(axis) + " of " + shape_str(shape()) + " is not 1");
    Shape s = shape();
    s.erase(s.begin() + ax);
    return reshape(s);
}

Tensor Tensor::flatten(int start, int end) const {
    if (ndim() == 0) return reshape({1});
    int s = norm_axis(start, ndim(), "flatten"), e = norm_axis(end, ndim(), "flatten");
    Shape ns(shape().begin(), shape().begin() + s);
    Dim m = 1;
    for (int i = s; i <= e; i++) m = m * shape()[i];
    ns.push_back(m);
    ns.insert(ns.end(), shape().begin() + e + 1, shape().end());
    return reshape(ns);
}

// --- type -----------------------------------------------------------------------------------------
Tensor Tensor::cast(DType dt) const {
    if (dt == dtype()) return *this;
    if (dt.is_quantized() || dtype().is_quantized()) fail("cast", "cannot cast " + dtype().name() + " to " + dt.name() + " (use dequantize)");
    return make_tensor(engine::cast(node(), dt), device());
}

Tensor Tensor::bitcast(DType dt) const {
    if (dt == dtype()) return *this;
    if (dt.is_quantized() || dtype().is_quantized() || dt.itemsize() != dtype().itemsize() || dt.code == DType::BOOL ||
        dtype().code == DType::BOOL)
        fail("bitcast", "cannot bitcast " + dtype().name() + " to " + dt.name() + " (sizes differ)");
    return make_tensor(make(Op::BITCAST, dt, {node()}), device());
}

Tensor Tensor::contiguous() const {
    if (is_realized() || node()->op == Op::CONTIGUOUS) return *this;
    if (dtype().is_quantized()) fail("contiguous", dtype().name() + " tensors cannot be copied by generated kernels");
    return make_tensor(make(Op::CONTIGUOUS, dtype(), {node()}), device());
}

// --- state ----------------------------------------------------------------------------------------
namespace {
// Rebuilds the movement chain `view` (ending at `from`) on top of `to`.
NodeRef rebase(const NodeRef& view, const Node* from, const NodeRef& to) {
    if (view.get() == from) return to;
    if (!is_movement(view->op)) return view;
    return make(view->op, view->dtype, {rebase(view->srcs[0], from, to)}, view->arg);
}
}  // namespace

Tensor& Tensor::assign(const Tensor& value_in) {
    if (!impl_) fail("assign", "undefined tensor");
    std::shared_ptr<TensorImpl> base = impl_->base ? impl_->base : impl_;
    if (!is_buffer_backed(base->node.get()))
        fail("assign", "the target must be a realized buffer or a view of one (realize it first)");
    for (const Node* n = node().get(); n != base->node.get(); n = n->src(0)) {
        if (!is_movement(n->op)) fail("assign", "the target must be a view of a realized buffer");
        if (n->op == Op::EXPAND || n->op == Op::PAD) fail("assign", std::string("cannot write through ") + op_name(n->op));
    }
    const Node* buf = base->node->op == Op::AFTER ? base->node->src(0) : base->node.get();
    if (buffer_of(buf).external) fail("assign", "external (mapped) buffers are read-only");
    if (dtype().is_quantized()) fail("assign", "cannot write " + dtype().name() + " tensors");
    Tensor value = value_in.cast(dtype()).expand(shape());
    NodeRef store = make(Op::ASSIGN, dtype(), {node(), value.node()});
    NodeRef old_base = base->node;
    base->node = make(Op::AFTER, buf->dtype, {NodeRef(buf), store});
    if (impl_ != base) impl_->node = rebase(impl_->node, old_base.get(), base->node);
    note_pending_assign(base);
    return *this;
}

Tensor& Tensor::realize() {
    engine::realize({*this});
    return *this;
}

void Tensor::copy_from(const void* data, size_t bytes) {
    if (!is_realized()) fail("copy_from", "the tensor is not a realized buffer");
    Buffer& b = buffer_of(node().get());
    if (bytes > b.mem->size) fail("copy_from", std::to_string(bytes) + " bytes exceed the " + std::to_string(b.mem->size) + "-byte buffer");
    b.device->copy_in(*b.mem, 0, data, bytes);
}

namespace detail {

namespace {
int64_t to_int(double f) {
    if (!(f > -9.2e18 && f < 9.2e18)) return f > 0 ? INT64_MAX : (f < 0 ? INT64_MIN : 0);
    return int64_t(f);
}

template <class F> void host_values(const Tensor& t_in, F&& each) {
    Tensor t = t_in;
    if (t.dtype().is_quantized()) fail("to_vector", "cannot read " + t.dtype().name() + " values (dequantize first)");
    t.realize();
    Buffer& b = buffer_of(t.node().get());
    int64_t n = t.numel().eval();
    std::vector<uint8_t> raw(t.dtype().nbytes(n));
    b.device->copy_out(raw.data(), *b.mem, 0, raw.size());
    const uint8_t* p = raw.data();
    for (int64_t i = 0; i < n; i++) {
        switch (t.dtype().code) {
            case DType::BOOL: each(double(p[i] != 0), int64_t(p[i] != 0)); break;
            case DType::U8: each(double(p[i]), int64_t(p[i])); break;
            case DType::I8: each(double(int8_t(p[i])), int64_t(int8_t(p[i]))); break;
            case DType::U16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); each(double(v), int64_t(v)); break; }
            case DType::I16: { int16_t v; std::memcpy(&v, p + 2 * i, 2); each(double(v), int64_t(v)); break; }
            case DType::U32: { uint32_t v; std::memcpy(&v, p + 4 * i, 4); each(double(v), int64_t(v)); break; }
            case DType::I32: { int32_t v; std::memcpy(&v, p + 4 * i, 4); each(double(v), int64_t(v)); break; }
            case DType::I64: { int64_t v; std::memcpy(&v, p + 8 * i, 8); each(double(v), v); break; }
            case DType::F16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); float f = gguf::f16_to_f32(v); each(double(f), to_int(f)); break; }
            case DType::BF16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); float f = gguf::bf16_to_f32(v); each(double(f), to_int(f)); break; }
            case DType::F32: { float v; std::memcpy(&v, p + 4 * i, 4); each(double(v), to_int(v)); break; }
            case DType::GGUF: break;
        }
    }
}
}  // namespace

std::vector<double> to_f64(const Tensor& t) {
    std::vector<double> out;
    host_values(t, [&](double d, int64_t) { out.push_back(d); });
    return out;
}
std::vector<float> f32_values(const Tensor& t_in) {
    Tensor t = t_in;
    t.realize();
    Buffer& b = buffer_of(t.node().get());
    std::vector<float> out(size_t(t.numel().eval()));
    b.device->copy_out(out.data(), *b.mem, 0, out.size() * sizeof(float));
    return out;
}
std::vector<int64_t> to_i64(const Tensor& t) {
    std::vector<int64_t> out;
    host_values(t, [&](double, int64_t i) { out.push_back(i); });
    return out;
}

}  // namespace detail

}  // namespace engine
