// The symbolic rule set: constant folding, identities, and index math over linear forms so that
// movement ops folded into indices (reshape = flatten then unflatten) simplify back to plain strides.
#include "engine/rewrite.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace engine {

namespace {

using M = Match;
Pat x = Pat::any('x'), y = Pat::any('y');
Pat c1 = Pat::cst('c'), c2 = Pat::cst('d');

bool is_int(const Node* n) { return n->dtype.is_int(); }

// --- constant folding -----------------------------------------------------------------------------
double round_to(double v, DType d) {
    switch (d.code) {
        case DType::F32: return double(float(v));
        case DType::F16: return gguf::f16_to_f32(gguf::f32_to_f16(float(v)));
        case DType::BF16: return gguf::bf16_to_f32(gguf::f32_to_bf16(float(v)));
        default: return v;
    }
}

int64_t wrap_int(int64_t v, DType d) {
    switch (d.code) {
        case DType::BOOL: return v != 0;
        case DType::U8: return uint8_t(v);
        case DType::I8: return int8_t(v);
        case DType::U16: return uint16_t(v);
        case DType::I16: return int16_t(v);
        case DType::U32: return uint32_t(v);
        case DType::I32: return int32_t(v);
        default: return v;
    }
}

NodeRef fold_constants(const M& m) {
    const Node* n = m.root;
    if (!(is_alu(n->op) || n->op == Op::CAST) || n->srcs.empty()) return {};
    for (auto& s : n->srcs)
        if (!s->is_const()) return {};
    DType sd = n->src(0)->dtype;
    if (n->op == Op::WHERE) return n->src(0)->arg.i ? n->srcs[1] : n->srcs[2];
    if (n->op == Op::CAST) {
        if (n->dtype.is_float()) return make_const(round_to(n->src(0)->const_value(), n->dtype), n->dtype);
        if (!sd.is_float()) return make_iconst(wrap_int(n->src(0)->arg.i, n->dtype), n->dtype);
        double v = std::trunc(n->src(0)->arg.f);  // saturating, as the kernels convert (NaN -> 0)
        if (std::isnan(v)) return make_iconst(0, n->dtype);
        auto lim = [&](int64_t lo, int64_t hi) { return make_iconst(v <= double(lo) ? lo : v >= double(hi) ? hi : int64_t(v), n->dtype); };
        switch (n->dtype.code) {
            case DType::BOOL: return make_iconst(n->src(0)->arg.f != 0.0, n->dtype);
            case DType::U8: return lim(0, 255);
            case DType::I8: return lim(-128, 127);
            case DType::U16: return lim(0, 65535);
            case DType::I16: return lim(-32768, 32767);
            case DType::U32: return lim(0, 4294967295ll);
            case DType::I32: return lim(INT32_MIN, INT32_MAX);
            default: return lim(INT64_MIN, INT64_MAX);
        }
    }
    if (sd.is_float()) {
        double a = n->src(0)->arg.f, b = n->srcs.size() > 1 ? n->src(1)->arg.f : 0.0, r;
        switch (n->op) {
            case Op::NEG: r = -a; break;
            case Op::SQRT: r = std::sqrt(a); break;
            case Op::RECIP: r = 1.0 / a; break;
            case Op::EXP2: r = std::exp2(a); break;
            case Op::LOG2: r = std::log2(a); break;
            case Op::SIN: r = std::sin(a); break;
            case Op::ADD: r = a + b; break;
            case Op::SUB: r = a - b; break;
            case Op::MUL: r = a * b; break;
            case Op::DIV: r = a / b; break;
            case Op::MAX: r = std::fmax(a, b); break;
            case Op::CMPLT: return make_const(a < b, bool_);
            case Op::CMPEQ: return make_const(a == b, bool_);
            case Op::CMPNE: return make_const(a != b, bool_);
            default: return {};
        }
        return make_const(round_to(r, n->dtype), n->dtype);
    }
    int64_t a = n->src(0)->arg.i, b = n->srcs.size() > 1 ? n->src(1)->arg.i : 0, r;
    uint64_t ua = uint64_t(a), ub = uint64_t(b);
    switch (n->op) {
        case Op::NEG: r = int64_t(0 - ua); break;
        case Op::NOT: r = n->dtype.code == DType::BOOL ? !a : ~a; break;
        case Op::ADD: r = int64_t(ua + ub); break;
        case Op::SUB: r = int64_t(ua - ub); break;
        case Op::MUL: r = int64_t(ua * ub); break;
        case Op::DIV: if (b == 0 || (b == -1 && a == INT64_MIN)) return {}; r = a / b; break;
        case Op::MOD: if (b == 0 || b == -1) return {}; r = a % b; break;
        case Op::MAX: r = std::max(a, b); break;
        case Op::AND: r = a & b; break;
        case Op::OR: r = a | b; break;
        case Op::XOR: r = a ^ b; break;
        case Op::SHL: if (b < 0 || b > 63) return {}; r = int64_t(ua << b); break;
        case Op::SHR: if (b < 0 || b > 63) return {}; r = sd.is_signed() ? a >> b : int64_t(ua >> b); break;
        case Op::CMPLT: return make_const(a < b, bool_);
        case Op::CMPEQ: return make_const(a == b, bool_);
        case Op::CMPNE: return make_const(a != b, bool_);
        default: return {};
    }
    return make_iconst(wrap_int(r, n->dtype), n->dtype);
}

// Integer and bool nodes whose bounds pin a single value are that value (size-1 loops, decided compares).
NodeRef fold_bounds(const M& m) {
    const Node* n = m.root;
    if (n->op == Op::CONST || n->op == Op::LOAD || n->op == Op::REDUCE || n->op == Op::PARAM) return {};
    if (!(n->dtype.is_int() || n->dtype.code == DType::BOOL) || n->vmin != n->vmax) return {};
    return make_iconst(n->vmin, n->dtype);
}

// --- linear forms: sum of coefficient * term + constant ---------------------------------------------
// Coefficients wrap like the i64 arithmetic they describe; bounds are computed wide and clamped.
int64_t wrap_mul(int64_t a, int64_t b) { return int64_t(uint64_t(a) * uint64_t(b)); }
int64_t wrap_add(int64_t a, int64_t b) { return int64_t(uint64_t(a) + uint64_t(b)); }
int64_t clamp128(__int128 v) { return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : int64_t(v); }

struct Linear {
    std::vector<std::pair<NodeRef, int64_t>> terms;
    int64_t c = 0;
    int leaves = 0;  // terms and constants before merging (a rebuild is simpler when it has fewer)

    void add(const Node* n, int64_t k) {
        if (n->op == Op::ADD) return add(n->src(0), k), add(n->src(1), k);
        if (n->op == Op::SUB) return add(n->src(0), k), add(n->src(1), wrap_mul(k, -1));
        if (n->op == Op::CONST) return (void)(c = wrap_add(c, wrap_mul(k, n->arg.i)), leaves++);
        if (n->op == Op::MUL && n->src(1)->is_const()) return add(n->src(0), wrap_mul(k, n->src(1)->arg.i));
        if (n->op == Op::MUL && n->src(0)->is_const()) return add(n->src(1), wrap_mul(k, n->src(0)->arg.i));
        leaves++;
        for (auto& [t, kk] : terms)
            if (t.get() == n) return (void)(kk = wrap_add(kk, k));
        terms.push_back({NodeRef(n), k});
    }
    // (x / c) * c + x % c -> x
    void merge_divmod() {
        for (size_t i = 0; i < terms.size(); i++) {
            const Node* mod = terms[i].first.get();
            if (mod->op != Op::MOD || !mod->src(1)->is_const() || terms[i].second == 0) continue;
            int64_t d = mod->src(1)->arg.i, k = terms[i].second;
            for (auto& [t, kk] : terms) {
                if (t->op == Op::DIV && t->src(0) == mod->src(0) && t->src(1) == mod->src(1) && kk == k * d && mod->src(0)->vmin >= 0) {
                    kk = 0;
                    terms[i].second = 0;
                    add(mod->src(0), k);
                    break;
                }
            }
        }
        std::erase_if(terms, [](auto& t) { return t.second == 0; });
    }
    NodeRef build() const {
        auto sorted = terms;
        std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.first->hash < b.first->hash; });
        NodeRef acc;
        for (auto& [t, k] : sorted) {
            if (k == 0) continue;
            NodeRef term = k == 1 ? t : alu(Op::MUL, t, cidx(k));
            acc = acc ? alu(Op::ADD, acc, term) : term;
        }
        if (!acc) return cidx(c);
        return c ? alu(Op::ADD, acc, cidx(c)) : acc;
    }
    int64_t vmin() const {
        __int128 lo = c;
        for (auto& [t, k] : terms) lo += __int128(k) * (k >= 0 ? t->vmin : t->vmax);
        return clamp128(lo);
    }
    int64_t vmax() const {
        __int128 hi = c;
        for (auto& [t, k] : terms) hi += __int128(k) * (k >= 0 ? t->vmax : t->vmin);
        return clamp128(hi);
    }
};

bool small_bounds(const Node* n) { return n->vmin > -(int64_t(1) << 40) && n->vmax < (int64_t(1) << 40); }

// Sums of i64 index terms: merge equal terms, fold constants, (x/c)*c + x%c -> x.
NodeRef canonical_sum(const M& m) {
    const Node* n = m.root;
    if (n->dtype.code != DType::I64 || !small_bounds(n)) return {};
    Linear lin;
    lin.add(n, 1);
    lin.merge_divmod();
    int consts = lin.c != 0;
    if (int(lin.terms.size()) + consts >= lin.leaves) return {};
    return lin.build();
}

// x / d and x % d for a constant d > 0 over a non-negative linear form x = d*Q + R:
// x / d -> Q + R / d and x % d -> R % d when R >= 0; R / d -> 0 and R % d -> R when R < d.
NodeRef fold_divmod(const M& m) {
    const Node* n = m.root;
    if (n->dtype.code != DType::I64 || m['x']->vmin < 0 || !small_bounds(m['x'])) return {};
    int64_t d = m.i('c');
    if (d <= 0) return {};
    Linear lin, q, r;
    lin.add(m['x'], 1);
    for (auto& [t, k] : lin.terms) {
        if (t->vmin < 0) return {};
        (k % d == 0 ? q.terms.emplace_back(t, k / d) : r.terms.emplace_back(t, k));
    }
    int64_t cq = lin.c / d - (lin.c % d < 0);  // floor division: the remainder's constant is in [0, d)
    q.c = cq, r.c = lin.c % d + (lin.c % d < 0 ? d : 0);
    if (r.vmin() < 0) return {};
    bool is_div = n->op == Op::DIV;
    if (r.vmax() < d) return is_div ? q.build() : r.build();
    // Common factor: (g*y)/d -> y/(d/g) and (g*y)%d -> g*(y%(d/g)).
    int64_t g = d;
    for (auto& [t, k] : r.terms) g = std::gcd(g, k);
    g = std::gcd(g, r.c);
    if (g > 1) {
        Linear rg = r;
        for (auto& [t, k] : rg.terms) k /= g;
        rg.c /= g;
        NodeRef inner = rg.build();
        if (is_div) return iadd(q.build(), idiv(inner, cidx(d / g)));
        return imul(imod(inner, cidx(d / g)), cidx(g));
    }
    if (q.terms.empty() && q.c == 0) return {};  // nothing to take out
    return is_div ? iadd(q.build(), idiv(r.build(), cidx(d))) : imod(r.build(), cidx(d));
}

bool nonneg(const M& m, char name) { return m[name]->vmin >= 0; }

}  // namespace

const RuleSet& symbolic_rules() {
    static const RuleSet rules("symbolic", {
        {x, fold_constants},                                                          // op(c1, c2) -> c3
        {x, fold_bounds},                                                             // x in [c, c] -> c
        {x + Pat::val(0), [](const M& m) { return m.ref('x'); }},                    // x + 0 -> x
        {x - Pat::val(0), [](const M& m) { return m.ref('x'); }},                    // x - 0 -> x
        {x * Pat::val(1), [](const M& m) { return m.ref('x'); }},                    // x * 1 -> x
        {x / Pat::val(1), [](const M& m) { return is_int(m['x']) ? m.ref('x') : NodeRef(); }},  // x / 1 -> x
        {x * Pat::val(0), [](const M& m) { return is_int(m['x']) ? cidx(0) : NodeRef(); }},     // x * 0 -> 0
        {x % Pat::val(1), [](const M& m) { return is_int(m['x']) ? cidx(0) : NodeRef(); }},     // x % 1 -> 0
        {Pat::node(Op::ADD, {}), canonical_sum},                                      // a + b - a -> b, c1 + c2 -> c3
        {Pat::node(Op::SUB, {}), canonical_sum},                                      // x - x -> 0
        {(x + c1) * c2, [](const M& m) {                                              // (x + c1) * c2 -> x*c2 + c1*c2
             return m['x']->dtype.code == DType::I64 ? iadd(imul(m.ref('x'), m.ref('d')), cidx(wrap_mul(m.i('c'), m.i('d')))) : NodeRef();
         }},
        {(x * c1) * c2, [](const M& m) {                                              // (x * c1) * c2 -> x * (c1*c2)
             return is_int(m['x']) ? alu(Op::MUL, m.ref('x'), make_iconst(wrap_mul(m.i('c'), m.i('d')), m['x']->dtype)) : NodeRef();
         }},
        {x / c1, fold_divmod},                                                        // (d*q + r) / d -> q + r/d
        {x % c1, fold_divmod},                                                        // (d*q + r) % d -> r % d
        {(x / c1) / c2, [](const M& m) {                                              // (x / c1) / c2 -> x / (c1*c2)
             int64_t cd;
             if (!nonneg(m, 'x') || m.i('c') <= 0 || m.i('d') <= 0 || __builtin_mul_overflow(m.i('c'), m.i('d'), &cd)) return NodeRef();
             return idiv(m.ref('x'), cidx(cd));
         }},
        {(x % c1) % c2, [](const M& m) {                                              // (x % c1) % c2 -> x % c2 if c2 | c1
             return nonneg(m, 'x') && m.i('d') > 0 && m.i('c') % m.i('d') == 0 ? imod(m.ref('x'), m.ref('d')) : NodeRef();
         }},
        {Pat::node(Op::WHERE, {x, y, y}), [](const M& m) { return m.ref('y'); }},     // c ? y : y -> y
        {Pat::node(Op::NOT, {Pat::node(Op::NOT, {x})}), [](const M& m) { return m.ref('x'); }},  // !!x -> x
        {Pat::node(Op::AND, {x, Pat::val(1)}), [](const M& m) {                       // x & true -> x
             return m['x']->dtype.code == DType::BOOL ? m.ref('x') : NodeRef();
         }},
        {Pat::node(Op::AND, {x, Pat::val(0)}), [](const M& m) { return make_const(0, m['x']->dtype); }},  // x & 0 -> 0
        {Pat::node(Op::OR, {x, Pat::val(0)}), [](const M& m) { return m.ref('x'); }},  // x | 0 -> x
        {Pat::node(Op::MAX, {x, x}), [](const M& m) { return m.ref('x'); }},           // max(x, x) -> x
        {Pat::node(Op::CAST, {x}), [](const M& m) {                                    // cast(x: T) to T -> x
             return m.root->dtype == m['x']->dtype ? m.ref('x') : NodeRef();
         }},
    });
    return rules;
}

}  // namespace engine
