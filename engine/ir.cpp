// Node interning (hash-consing), derived shapes and integer bounds, and the small node constructors.
#include "engine/ir_impl.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <unordered_set>

namespace engine {

namespace {

const char* const OP_NAMES[] = {
    "BUFFER", "CONST", "VAR", "IOTA", "NEG", "EXP2", "LOG2", "SIN", "SQRT", "RECIP", "NOT",
    "ADD", "SUB", "MUL", "DIV", "MOD", "MAX", "CMPLT", "CMPEQ", "CMPNE", "AND", "OR", "XOR", "SHL", "SHR",
    "WHERE", "CAST", "BITCAST", "REDUCE_AXIS", "RESHAPE", "PERMUTE", "EXPAND", "SHRINK", "PAD",
    "CONTIGUOUS", "GATHER", "ASSIGN", "AFTER", "CUSTOM", "RANGE", "PARAM", "LOAD", "STORE", "REDUCE"};
static_assert(sizeof(OP_NAMES) / sizeof(OP_NAMES[0]) == size_t(Op::N_OPS), "one name per Op");

size_t mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)); }

size_t dim_hash(const Dim& d) { return d.is_const() ? std::hash<int64_t>()(d.value()) : d.node()->hash * 31 + 7; }

size_t hash_of(const Node& n) {
    size_t h = mix(size_t(n.op), size_t(n.dtype.code) * 64 + size_t(n.dtype.block));
    for (auto& s : n.srcs) h = mix(h, s->hash);
    h = mix(h, std::hash<int64_t>()(n.arg.i));
    uint64_t fbits;
    std::memcpy(&fbits, &n.arg.f, 8);
    h = mix(h, fbits);
    for (int64_t v : n.arg.ints) h = mix(h, std::hash<int64_t>()(v));
    for (auto& d : n.arg.dims) h = mix(h, dim_hash(d));
    for (double f : n.arg.floats) {
        std::memcpy(&fbits, &f, 8);
        h = mix(h, fbits);
    }
    return mix(h, std::hash<const void*>()(n.arg.obj.get()));
}

struct NodeHash {
    size_t operator()(const Node* n) const { return n->hash; }
};
struct NodeEq {
    bool operator()(const Node* a, const Node* b) const {
        if (a->op != b->op || !(a->dtype == b->dtype) || a->srcs.size() != b->srcs.size()) return false;
        for (size_t i = 0; i < a->srcs.size(); i++)
            if (a->srcs[i].get() != b->srcs[i].get()) return false;
        return a->arg == b->arg;
    }
};

struct InternTable {
    std::mutex mu;
    std::unordered_set<const Node*, NodeHash, NodeEq> nodes;
};
InternTable& table() {
    static InternTable* t = new InternTable;  // never destroyed: nodes may die during static teardown
    return *t;
}

// --- bounds ---------------------------------------------------------------------------------------
std::pair<int64_t, int64_t> dtype_range(DType d) {
    switch (d.code) {
        case DType::BOOL: return {0, 1};
        case DType::U8: return {0, 255};
        case DType::I8: return {-128, 127};
        case DType::U16: return {0, 65535};
        case DType::I16: return {-32768, 32767};
        case DType::U32: return {0, 4294967295ll};
        case DType::I32: return {INT32_MIN, INT32_MAX};
        default: return {INT64_MIN, INT64_MAX};
    }
}

int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
int64_t sat_sub(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_sub_overflow(a, b, &r) ? (b < 0 ? INT64_MAX : INT64_MIN) : r;
}
int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? (((a < 0) != (b < 0)) ? INT64_MIN : INT64_MAX) : r;
}

void derive_bounds(Node& n) {
    auto [lo, hi] = dtype_range(n.dtype);
    n.vmin = lo, n.vmax = hi;
    if (!(n.dtype.is_int() || n.dtype.code == DType::BOOL)) return;
    auto s = [&](size_t i) { return n.srcs[i].get(); };
    auto set = [&](int64_t a, int64_t b) { n.vmin = std::max(lo, a), n.vmax = std::min(hi, b); };
    switch (n.op) {
        case Op::CONST: n.vmin = n.vmax = n.arg.i; return;
        case Op::VAR: set(var_state(&n).min, var_state(&n).max); return;
        case Op::RANGE: set(0, s(0)->vmax - 1); return;
        case Op::ADD: set(sat_add(s(0)->vmin, s(1)->vmin), sat_add(s(0)->vmax, s(1)->vmax)); return;
        case Op::SUB: set(sat_sub(s(0)->vmin, s(1)->vmax), sat_sub(s(0)->vmax, s(1)->vmin)); return;
        case Op::MUL: {
            int64_t c[4] = {sat_mul(s(0)->vmin, s(1)->vmin), sat_mul(s(0)->vmin, s(1)->vmax),
                            sat_mul(s(0)->vmax, s(1)->vmin), sat_mul(s(0)->vmax, s(1)->vmax)};
            set(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
            return;
        }
        case Op::DIV:
            if (s(1)->vmin > 0 && s(0)->vmin >= 0) set(s(0)->vmin / s(1)->vmax, s(0)->vmax / s(1)->vmin);
            return;
        case Op::MOD:
            if (s(1)->vmin > 0 && s(0)->vmin >= 0) set(0, std::min(s(0)->vmax, s(1)->vmax - 1));
            else if (s(1)->vmin > 0) set(-(s(1)->vmax - 1), s(1)->vmax - 1);
            return;
        case Op::MAX: set(std::max(s(0)->vmin, s(1)->vmin), std::max(s(0)->vmax, s(1)->vmax)); return;
        case Op::WHERE: set(std::min(s(1)->vmin, s(2)->vmin), std::max(s(1)->vmax, s(2)->vmax)); return;
        case Op::CAST:
            if (s(0)->dtype.is_int() || s(0)->dtype.code == DType::BOOL)
                if (s(0)->vmin >= lo && s(0)->vmax <= hi) set(s(0)->vmin, s(0)->vmax);
            return;
        case Op::CMPLT:
            if (s(0)->vmax < s(1)->vmin) set(1, 1);
            else if (s(0)->vmin >= s(1)->vmax) set(0, 0);
            return;
        default: return;
    }
}

// --- shapes ---------------------------------------------------------------------------------------
[[noreturn]] void shape_error(Op op, const std::string& what) {
    throw Error(std::string("[engine] ") + op_name(op) + ": " + what);
}

Shape derive_shape(const Node& n) {
    auto src_shape = [&](size_t i) -> const Shape& { return n.srcs.at(i)->shape; };
    switch (n.op) {
        case Op::BUFFER: case Op::IOTA: case Op::RESHAPE: case Op::EXPAND: return n.arg.dims;
        case Op::CONST: case Op::VAR: return {};
        case Op::WHERE:
            if (!shapes_equal(src_shape(0), src_shape(1)) || !shapes_equal(src_shape(1), src_shape(2)))
                shape_error(n.op, "shapes " + shape_str(src_shape(0)) + ", " + shape_str(src_shape(1)) + ", " +
                                      shape_str(src_shape(2)) + " differ");
            return src_shape(0);
        case Op::REDUCE_AXIS: {
            Shape s = src_shape(0);
            for (int64_t a : n.arg.ints) s.at(a) = 1;
            return s;
        }
        case Op::PERMUTE: {
            Shape s;
            for (int64_t a : n.arg.ints) s.push_back(src_shape(0).at(a));
            return s;
        }
        case Op::SHRINK: {
            Shape s;
            for (size_t i = 0; i + 1 < n.arg.dims.size(); i += 2) s.push_back(n.arg.dims[i + 1] - n.arg.dims[i]);
            return s;
        }
        case Op::PAD: {
            Shape s = src_shape(0);
            for (size_t i = 0; i < s.size(); i++) s[i] = s[i] + n.arg.dims[2 * i] + n.arg.dims[2 * i + 1];
            return s;
        }
        case Op::GATHER: return src_shape(1);
        case Op::ASSIGN: case Op::AFTER: case Op::CONTIGUOUS: return src_shape(0);
        case Op::CUSTOM: return Shape(n.arg.dims.begin(), n.arg.dims.begin() + n.arg.ints.at(0));
        case Op::RANGE: case Op::PARAM: case Op::LOAD: case Op::STORE: case Op::REDUCE: return {};
        default:
            if (is_binary(n.op) && !shapes_equal(src_shape(0), src_shape(1)))
                shape_error(n.op, "shapes " + shape_str(src_shape(0)) + " and " + shape_str(src_shape(1)) + " differ");
            return n.srcs.empty() ? Shape{} : src_shape(0);
    }
}

}  // namespace

// --- op groups ------------------------------------------------------------------------------------
const char* op_name(Op op) { return OP_NAMES[size_t(op)]; }
bool is_unary(Op op) { return op >= Op::NEG && op <= Op::NOT; }
bool is_binary(Op op) { return op >= Op::ADD && op <= Op::SHR; }
bool is_alu(Op op) { return is_unary(op) || is_binary(op) || op == Op::WHERE; }
bool is_movement(Op op) { return op >= Op::RESHAPE && op <= Op::PAD; }
bool is_comparison(Op op) { return op == Op::CMPLT || op == Op::CMPEQ || op == Op::CMPNE; }
bool is_commutative(Op op) {
    return op == Op::ADD || op == Op::MUL || op == Op::MAX || op == Op::CMPEQ || op == Op::CMPNE ||
           op == Op::AND || op == Op::OR || op == Op::XOR;
}

bool Arg::operator==(const Arg& o) const {
    if (i != o.i || std::memcmp(&f, &o.f, 8) != 0 || ints != o.ints || obj != o.obj) return false;
    if (floats.size() != o.floats.size() || dims.size() != o.dims.size()) return false;
    if (!floats.empty() && std::memcmp(floats.data(), o.floats.data(), 8 * floats.size()) != 0) return false;
    for (size_t k = 0; k < dims.size(); k++)
        if (!same(dims[k], o.dims[k])) return false;
    return true;
}

// --- interning ------------------------------------------------------------------------------------
void node_retain(const Node* n) { n->refs.fetch_add(1, std::memory_order_relaxed); }

void node_release(const Node* n) {
    if (n->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    // Deleting a node releases its sources: iterate instead of recursing through long graphs, over a
    // list threaded through the dying nodes themselves. Plain thread_locals: nodes held by static objects
    // are released after a thread's thread_locals die at exit, and an allocated list leaked per thread.
    thread_local const Node* dying = nullptr;
    thread_local bool draining = false;
    n->next_dying = dying;
    dying = n;
    if (draining) return;
    draining = true;
    while (dying) {
        const Node* d = dying;
        dying = d->next_dying;
        {
            std::lock_guard lock(table().mu);
            table().nodes.erase(d);
        }
        delete d;  // releases srcs and arg nodes, which may push onto `dying`
    }
    draining = false;
}

NodeRef make(Op op, DType dtype, std::vector<NodeRef> srcs, Arg arg) {
    auto* n = new Node{op, dtype, std::move(srcs), std::move(arg), {}, 0, 0, 0, {}, nullptr};
    n->hash = hash_of(*n);
    NodeRef found;
    {
        std::lock_guard lock(table().mu);
        auto it = table().nodes.find(n);
        if (it != table().nodes.end()) found = NodeRef(*it);
    }
    if (found) {
        delete n;
        return found;
    }
    try {
        n->shape = derive_shape(*n);
    } catch (...) {
        delete n;
        throw;
    }
    derive_bounds(*n);
    NodeRef ref(n);
    {
        std::lock_guard lock(table().mu);
        auto [it, inserted] = table().nodes.insert(n);
        if (!inserted) return NodeRef(*it);  // lost a race; ours dies with `ref`
    }
    mutable_stats().nodes_built++;
    return ref;
}

// --- constructors ---------------------------------------------------------------------------------
NodeRef make_const(double value, DType dtype) {
    Arg a;
    if (dtype.is_float()) a.f = value;
    else if (dtype.code == DType::BOOL) a.i = value != 0.0;
    else a.i = int64_t(value);
    return make(Op::CONST, dtype, {}, std::move(a));
}

NodeRef make_iconst(int64_t value, DType dtype) {
    Arg a;
    a.i = dtype.code == DType::BOOL ? value != 0 : value;
    return make(Op::CONST, dtype, {}, std::move(a));
}

NodeRef cidx(int64_t v) {
    Arg a;
    a.i = v;
    return make(Op::CONST, i64, {}, std::move(a));
}

NodeRef alu(Op op, const NodeRef& a) { return make(op, a->dtype, {a}); }
NodeRef alu(Op op, const NodeRef& a, const NodeRef& b) {
    return make(op, is_comparison(op) ? bool_ : a->dtype, {a, b});
}
NodeRef where(const NodeRef& c, const NodeRef& a, const NodeRef& b) { return make(Op::WHERE, a->dtype, {c, a, b}); }
NodeRef cast(const NodeRef& x, DType dtype) { return x->dtype == dtype ? x : make(Op::CAST, dtype, {x}); }

namespace {
bool is_c(const NodeRef& n, int64_t v) { return n->op == Op::CONST && n->arg.i == v; }
}  // namespace

NodeRef iadd(const NodeRef& a, const NodeRef& b) {
    if (a->is_const() && b->is_const()) return cidx(int64_t(uint64_t(a->arg.i) + uint64_t(b->arg.i)));  // wraps like i64
    if (is_c(a, 0)) return b;
    if (is_c(b, 0)) return a;
    return alu(Op::ADD, a, b);
}
NodeRef imul(const NodeRef& a, const NodeRef& b) {
    if (a->is_const() && b->is_const()) return cidx(int64_t(uint64_t(a->arg.i) * uint64_t(b->arg.i)));
    if (is_c(a, 1)) return b;
    if (is_c(b, 1)) return a;
    if (is_c(a, 0) || is_c(b, 0)) return cidx(0);
    return alu(Op::MUL, a, b);
}
NodeRef idiv(const NodeRef& a, const NodeRef& b) {
    if (a->is_const() && b->is_const() && b->arg.i != 0) return cidx(a->arg.i / b->arg.i);
    if (is_c(b, 1)) return a;
    return alu(Op::DIV, a, b);
}
NodeRef imod(const NodeRef& a, const NodeRef& b) {
    if (a->is_const() && b->is_const() && b->arg.i != 0) return cidx(a->arg.i % b->arg.i);
    if (is_c(b, 1)) return cidx(0);
    return alu(Op::MOD, a, b);
}
NodeRef imax(const NodeRef& a, const NodeRef& b) {
    if (a->vmin >= b->vmax) return a;
    if (b->vmin >= a->vmax) return b;
    return alu(Op::MAX, a, b);
}
NodeRef imin(const NodeRef& a, const NodeRef& b) {
    if (a->vmax <= b->vmin) return a;
    if (b->vmax <= a->vmin) return b;
    return where(alu(Op::CMPLT, a, b), a, b);
}

// --- shapes ---------------------------------------------------------------------------------------
std::vector<Dim> strides_of(const Shape& shape) {
    std::vector<Dim> st(shape.size());
    Dim acc = 1;
    for (size_t i = shape.size(); i-- > 0;) {
        st[i] = acc;
        acc = acc * shape[i];
    }
    return st;
}

bool shapes_equal(const Shape& a, const Shape& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); i++)
        if (!same(a[i], b[i])) return false;
    return true;
}

std::string shape_str(const Shape& s) {
    std::string r = "(";
    for (size_t i = 0; i < s.size(); i++) r += (i ? "," : "") + s[i].str();
    return r + (s.size() == 1 ? ",)" : ")");
}

Dim numel(const Shape& s) {
    Dim n = 1;
    for (auto& d : s) n = n * d;
    return n;
}

// --- evaluation and printing ----------------------------------------------------------------------
int64_t eval_int(const Node* n) {
    auto e = [&](size_t i) { return eval_int(n->src(i)); };
    switch (n->op) {
        case Op::CONST: return n->arg.i;
        case Op::VAR: return var_state(n).value.load(std::memory_order_relaxed);
        case Op::ADD: return int64_t(uint64_t(e(0)) + uint64_t(e(1)));
        case Op::SUB: return int64_t(uint64_t(e(0)) - uint64_t(e(1)));
        case Op::MUL: return int64_t(uint64_t(e(0)) * uint64_t(e(1)));
        case Op::DIV: { int64_t d = e(1), a = e(0); return d == 0 || (d == -1 && a == INT64_MIN) ? 0 : a / d; }
        case Op::MOD: { int64_t d = e(1), a = e(0); return d == 0 || d == -1 ? 0 : a % d; }
        case Op::MAX: return std::max(e(0), e(1));
        case Op::CMPLT: return e(0) < e(1);
        case Op::CMPEQ: return e(0) == e(1);
        case Op::CMPNE: return e(0) != e(1);
        case Op::WHERE: return e(0) ? e(1) : e(2);
        case Op::CAST: return e(0);
        default: throw Error(std::string("[engine] eval: cannot evaluate ") + op_name(n->op) + " as an integer");
    }
}

std::string expr_str(const Node* n) {
    auto s = [&](size_t i) { return expr_str(n->src(i)); };
    switch (n->op) {
        case Op::CONST: return n->dtype.is_float() ? std::to_string(n->arg.f) : std::to_string(n->arg.i);
        case Op::VAR: return var_state(n).name;
        case Op::RANGE: return "r" + std::to_string(n->arg.i);
        case Op::ADD: return "(" + s(0) + "+" + s(1) + ")";
        case Op::SUB: return "(" + s(0) + "-" + s(1) + ")";
        case Op::MUL: return s(0) + "*" + s(1);
        case Op::DIV: return s(0) + "/" + s(1);
        case Op::MOD: return s(0) + "%" + s(1);
        case Op::MAX: return "max(" + s(0) + "," + s(1) + ")";
        case Op::CMPLT: return "(" + s(0) + "<" + s(1) + ")";
        case Op::WHERE: return "(" + s(0) + "?" + s(1) + ":" + s(2) + ")";
        default: return op_name(n->op);
    }
}

std::vector<const Node*> toposort(const std::vector<const Node*>& roots, bool (*stop)(const Node*)) {
    std::vector<const Node*> order;
    std::unordered_set<const Node*> seen;
    std::vector<std::pair<const Node*, size_t>> stack;
    for (const Node* r : roots) {
        if (!seen.insert(r).second) continue;
        stack.push_back({r, 0});
        while (!stack.empty()) {
            auto& [n, i] = stack.back();
            bool leaf = stop && stop(n);
            if (!leaf && i < n->srcs.size()) {
                const Node* s = n->src(i++);
                if (seen.insert(s).second) stack.push_back({s, 0});
                continue;
            }
            order.push_back(n);
            stack.pop_back();
        }
    }
    return order;
}

const VarState& var_state(const Node* var_node) { return *static_cast<const VarState*>(var_node->arg.obj.get()); }

Stats& mutable_stats() {
    static Stats s;
    return s;
}
Stats stats() { return mutable_stats(); }

}  // namespace engine
