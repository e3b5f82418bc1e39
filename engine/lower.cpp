// Lowering: one kernel's part of the graph -> kernel IR. Output coordinates become RANGE loops;
// movement ops become index math on those coordinates (views never copy), reductions become REDUCE
// loops, materialized inputs become LOADs. The per-op coordinate transforms are the table below.
#include "engine/realize_impl.h"
#include "engine/rewrite.h"

#include <map>

namespace engine {

namespace {

using Coords = std::vector<NodeRef>;

[[noreturn]] void fail(const std::string& what) { throw Error("[engine] lower: " + what); }

NodeRef contiguous_index(const Shape& shape, const Coords& c) {
    std::vector<Dim> st = strides_of(shape);
    NodeRef idx = cidx(0);
    for (size_t i = 0; i < shape.size(); i++) idx = iadd(idx, imul(c[i], st[i].node()));
    return idx;
}

// Source coordinates of a movement op. PAD also yields the validity of the element.
Coords reshape_coords(const Node* n, const Coords& c, NodeRef&) {
    const Shape& src = n->src(0)->shape;
    NodeRef flat = contiguous_index(n->shape, c);
    std::vector<Dim> st = strides_of(src);
    Coords out(src.size());
    for (size_t j = 0; j < src.size(); j++) {
        if (same(src[j], 1)) { out[j] = cidx(0); continue; }
        NodeRef q = idiv(flat, st[j].node());
        out[j] = j == 0 ? q : imod(q, src[j].node());
    }
    return out;
}
Coords permute_coords(const Node* n, const Coords& c, NodeRef&) {
    Coords out(c.size());
    for (size_t k = 0; k < c.size(); k++) out[n->arg.ints[k]] = c[k];
    return out;
}
Coords expand_coords(const Node* n, const Coords& c, NodeRef&) {
    Coords out = c;
    const Shape& src = n->src(0)->shape;
    for (size_t k = 0; k < c.size(); k++)
        if (same(src[k], 1) && !same(n->shape[k], 1)) out[k] = cidx(0);
    return out;
}
Coords shrink_coords(const Node* n, const Coords& c, NodeRef&) {
    Coords out = c;
    for (size_t k = 0; k < c.size(); k++) out[k] = iadd(c[k], n->arg.dims[2 * k].node());
    return out;
}
// Out-of-range coordinates are clamped so the load stays inside the source; `valid` selects the pad value.
Coords pad_coords(const Node* n, const Coords& c, NodeRef& valid) {
    Coords out = c;
    const Shape& src = n->src(0)->shape;
    for (size_t k = 0; k < c.size(); k++) {
        const Dim& before = n->arg.dims[2 * k];
        const Dim& after = n->arg.dims[2 * k + 1];
        if (before.is_const() && before.value() == 0 && after.is_const() && after.value() == 0) continue;
        NodeRef s = iadd(c[k], imul(before.node(), cidx(-1)));
        NodeRef ok = alu(Op::AND, alu(Op::NOT, alu(Op::CMPLT, s, cidx(0))), alu(Op::CMPLT, s, src[k].node()));
        valid = valid ? alu(Op::AND, valid, ok) : ok;
        out[k] = imin(imax(s, cidx(0)), iadd(src[k].node(), cidx(-1)));
    }
    return out;
}

using CoordFn = Coords (*)(const Node*, const Coords&, NodeRef&);
CoordFn movement_table(Op op) {
    switch (op) {
        case Op::RESHAPE: return reshape_coords;
        case Op::PERMUTE: return permute_coords;
        case Op::EXPAND: return expand_coords;
        case Op::SHRINK: return shrink_coords;
        case Op::PAD: return pad_coords;
        default: return nullptr;
    }
}

struct Lowerer {
    const Node* root;
    const std::function<bool(const Node*)>& materialized;
    std::vector<const Node*> params;
    std::map<const Node*, int> param_of;
    std::map<std::pair<const Node*, std::vector<const Node*>>, NodeRef> memo;
    int next_reduce_range = 0;
    bool has_reduce = false;
    std::vector<std::pair<NodeRef, NodeRef>> checks;

    // A symbolic shrink is checked at launch: the window must stay inside its source for the bound Vars.
    void note_bounds(const Node* n) {
        if (n->op != Op::SHRINK) return;
        for (size_t k = 0; k + 1 < n->arg.dims.size(); k += 2) {
            const Dim& end = n->arg.dims[k + 1];
            const Dim& src = n->src(0)->shape[k / 2];
            if (end.max() > src.min()) checks.push_back({end.node(), src.node()});
        }
    }

    // One parameter per buffer: a write through AFTER and a read of the BUFFER share it (no aliasing).
    NodeRef param(const Node* storage) {
        if (storage->op == Op::AFTER) storage = storage->src(0);
        auto [it, fresh] = param_of.try_emplace(storage, int(params.size()));
        if (fresh) params.push_back(storage);
        Arg a;
        a.i = it->second;
        return make(Op::PARAM, storage->dtype, {}, std::move(a));
    }

    NodeRef load(const Node* n, const Coords& c) {
        if (n->dtype.is_quantized()) fail(n->dtype.name() + " data can only be read by custom kernels (use linear/embedding/dequantize)");
        return make(Op::LOAD, n->dtype, {param(n), contiguous_index(n->shape, c)});
    }

    NodeRef value(const Node* n, const Coords& c) {
        if (n != root && (materialized(n) || is_buffer_like(n))) return load(n, c);
        std::pair<const Node*, std::vector<const Node*>> key{n, {}};
        for (auto& x : c) key.second.push_back(x.get());
        if (auto it = memo.find(key); it != memo.end()) return it->second;
        NodeRef r = compute(n, c);
        memo.emplace(std::move(key), r);
        return r;
    }

    NodeRef compute(const Node* n, const Coords& c) {
        if (CoordFn fn = movement_table(n->op)) {
            note_bounds(n);
            NodeRef valid;
            Coords sc = fn(n, c, valid);
            NodeRef v = value(n->src(0), sc);
            return valid ? where(valid, v, make_const(n->arg.f, n->dtype)) : v;
        }
        switch (n->op) {
            case Op::CONST: case Op::VAR: return NodeRef(n);
            case Op::IOTA: return cast(c[0], n->dtype);
            case Op::CONTIGUOUS: return value(n->src(0), c);
            case Op::CAST: case Op::BITCAST: return make(n->op, n->dtype, {value(n->src(0), c)}, n->arg);
            case Op::REDUCE_AXIS: return reduce(n, c);
            case Op::GATHER: {
                const Node* x = n->src(0);
                int ax = int(n->arg.i);
                NodeRef idx = cast(value(n->src(1), c), i64);
                idx = imin(imax(idx, cidx(0)), iadd(x->shape[ax].node(), cidx(-1)));  // bad ids read a valid row
                Coords xc = c;
                xc[ax] = idx;
                return value(x, xc);
            }
            default: break;
        }
        if (is_alu(n->op)) {
            std::vector<NodeRef> srcs;
            for (auto& s : n->srcs) srcs.push_back(value(s.get(), c));
            return make(n->op, n->dtype, std::move(srcs), n->arg);
        }
        fail(std::string("no lowering for ") + op_name(n->op));
    }

    NodeRef reduce(const Node* n, const Coords& c) {
        const Node* src = n->src(0);
        Coords sc = c;
        std::vector<NodeRef> srcs{NodeRef()};
        for (int64_t ax : n->arg.ints) {
            if (same(src->shape[ax], 1)) { sc[ax] = cidx(0); continue; }
            Arg a;
            a.i = 1000 + next_reduce_range++;
            NodeRef r = make(Op::RANGE, i64, {src->shape[ax].node()}, std::move(a));
            sc[ax] = r;
            srcs.push_back(r);
        }
        NodeRef v = value(src, sc);
        if (srcs.size() == 1) return v;
        has_reduce = true;
        srcs[0] = v;
        Arg a;
        a.i = n->arg.i;
        return make(Op::REDUCE, n->dtype, std::move(srcs), std::move(a));
    }

    // Where the kernel writes: walks a view of a buffer (ASSIGN target) down to its storage.
    std::pair<const Node*, Coords> store_target(const Node* view, Coords c) {
        while (!is_buffer_like(view)) {
            CoordFn fn = movement_table(view->op);
            NodeRef valid;
            if (!fn || view->op == Op::PAD || view->op == Op::EXPAND) fail("assign target is not a plain view of a buffer");
            note_bounds(view);
            c = fn(view, c, valid);
            view = view->src(0);
        }
        return {view, c};
    }
};

std::string kernel_name(const Node* root, const std::vector<NodeRef>& loops, bool reduce) {
    std::string name = root->op == Op::ASSIGN ? "A" : reduce ? "r" : "E";
    for (auto& l : loops) name += "_" + (l->src(0)->is_const() ? std::to_string(l->src(0)->arg.i) : std::string("s"));
    return name;
}

}  // namespace

LoweredKernel lower_kernel(const Node* root, const std::function<bool(const Node*)>& materialized) {
    Lowerer lw{root, materialized, {}, {}, {}, 0, false, {}};
    const Node* out = root->op == Op::ASSIGN ? root->src(1) : root;
    LoweredKernel k;
    Coords c;
    for (size_t i = 0; i < out->shape.size(); i++) {
        const Dim& d = out->shape[i];
        if (same(d, 1)) { c.push_back(cidx(0)); continue; }
        Arg a;
        a.i = int64_t(i);
        NodeRef r = make(Op::RANGE, i64, {d.node()}, std::move(a));
        c.push_back(r);
        k.loops.push_back(r);
    }
    NodeRef target, index, value;
    if (root->op == Op::ASSIGN) {
        auto [storage, sc] = lw.store_target(root->src(0), c);
        target = lw.param(storage);
        index = contiguous_index(storage->shape, sc);
        value = lw.value(root->src(1), c);
    } else {
        target = lw.param(root);
        index = contiguous_index(root->shape, c);
        value = lw.compute(root, c);
    }
    k.ast = simplify(make(Op::STORE, value->dtype, {target, index, value}));
    k.params = lw.params;
    k.checks = std::move(lw.checks);
    k.name = kernel_name(root, k.loops, lw.has_reduce);
    return k;
}

}  // namespace engine
