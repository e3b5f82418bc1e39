// The scheduler: which nodes of the graph become kernels. Everything else is inlined into its
// consumers: elementwise producers are recomputed, movement ops become index math. DESIGN.md §3.
#include "engine/realize_impl.h"
#include "engine/rewrite.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace engine {

bool is_buffer_like(const Node* n) { return n->op == Op::BUFFER || n->op == Op::AFTER; }

const Node* storage_node(const Node* n) {
    while (n->op == Op::RESHAPE) n = n->src(0);
    return n;
}

namespace {

bool is_leaf(const Node* n) { return is_buffer_like(n) || n->op == Op::CONST || n->op == Op::VAR || n->op == Op::IOTA; }
bool is_costly(const Node* n) { return n->op == Op::EXP2 || n->op == Op::LOG2 || n->op == Op::SIN || n->op == Op::GATHER; }

// What a kernel region below a node contains, stopping at materialized nodes.
struct Region {
    std::vector<const Node*> reduces;  // unmaterialized REDUCE_AXIS nodes
    bool costly = false;               // transcendental math or gathers worth not repeating
    std::vector<const Node*> inputs;   // the materialized nodes (buffers, kernels) it reads, each once
};

// An elementwise node read by more than one consumer is recomputed by each, unless its region reads more
// inputs than this: the residual stream x_l = x_(l-1) + h_l is such a node, and recomputed it grew by two
// inputs a layer (the last layer's norm read all 33 outputs of a 16-layer model, which stayed alive for
// the whole forward). Cut, a chain reads at most this many buffers.
constexpr size_t kMaxRecomputedInputs = 4;

void add_input(std::vector<const Node*>& inputs, const Node* n) {
    if (std::find(inputs.begin(), inputs.end(), n) == inputs.end()) inputs.push_back(n);
}

}  // namespace

std::vector<const Node*> schedule_kernels(const std::vector<const Node*>& roots) {
    std::vector<const Node*> order = toposort(roots, [](const Node* n) { return n->op == Op::BUFFER; });
    std::unordered_map<const Node*, int> consumers;
    for (const Node* n : order)
        for (auto& s : n->srcs) consumers[s.get()]++;

    std::unordered_set<const Node*> kernels;
    auto mark = [&](const Node* n) {
        if (!is_buffer_like(n)) kernels.insert(n);
    };
    for (const Node* r : roots) mark(r);
    for (const Node* n : order) {
        if (n->op == Op::CONTIGUOUS || n->op == Op::ASSIGN || n->op == Op::CUSTOM) mark(n);
        if (n->op == Op::CUSTOM)  // custom kernels read whole buffers: their inputs are materialized
            for (auto& s : n->srcs) mark(storage_node(s.get()));
    }

    // Fusion boundaries, leaves first: at most one reduce per kernel, and no reduce (or costly
    // elementwise work) recomputed for every element an expand or a second consumer would repeat it for.
    std::unordered_map<const Node*, Region> region;
    for (const Node* n : order) {
        if (is_leaf(n) || n->op == Op::ASSIGN) continue;
        Region r;
        for (auto& s : n->srcs) {
            if (kernels.count(s.get()) || is_buffer_like(s.get())) {
                add_input(r.inputs, s.get());
                continue;
            }
            if (is_leaf(s.get())) continue;
            const Region& sr = region[s.get()];
            r.reduces.insert(r.reduces.end(), sr.reduces.begin(), sr.reduces.end());
            r.costly |= sr.costly;
            for (const Node* in : sr.inputs) add_input(r.inputs, in);
        }
        r.costly |= is_costly(n);
        if (n->op == Op::REDUCE_AXIS) {
            for (const Node* inner : r.reduces) mark(inner);
            r.reduces = {n};
        }
        if (r.reduces.size() > 1) {
            std::unordered_set<const Node*> uniq(r.reduces.begin(), r.reduces.end());
            if (uniq.size() > 1) {
                for (const Node* extra : uniq)
                    if (extra != r.reduces.front()) mark(extra);
            }
            r.reduces = {r.reduces.front()};
        }
        if (n->op == Op::EXPAND) {
            const Node* d = n->src(0);
            while (is_movement(d->op)) d = d->src(0);
            if (!kernels.count(d) && !is_leaf(d) && (!region[d].reduces.empty() || region[d].costly)) {
                mark(d);
                r = Region{};
            }
        }
        if (consumers[n] > 1 && (!r.reduces.empty() || r.inputs.size() > kMaxRecomputedInputs)) mark(n);
        if (kernels.count(n)) r = Region{};
        region[n] = std::move(r);
    }

    std::vector<const Node*> out;
    for (const Node* n : order)
        if (kernels.count(n)) out.push_back(n);
    return out;
}

}  // namespace engine

namespace engine {

namespace {
NodeRef with_src(const Match& m, char src, Op op, Arg arg) {
    return make(op, m.root->dtype, {m.ref(src)}, std::move(arg));
}
}  // namespace

const RuleSet& view_rules() {
    Pat x = Pat::any('x');
    static const RuleSet rules("views", {
        {Pat::node(Op::RESHAPE, {Pat::node(Op::RESHAPE, {x})}), [](const Match& m) {   // reshape(reshape(x)) -> reshape(x)
             return shapes_equal(m.root->shape, m['x']->shape) ? m.ref('x') : with_src(m, 'x', Op::RESHAPE, m.root->arg);
         }},
        {Pat::node(Op::RESHAPE, {x}), [](const Match& m) {                              // reshape(x) to x's shape -> x
             return shapes_equal(m.root->shape, m['x']->shape) ? m.ref('x') : NodeRef();
         }},
        {Pat::node(Op::PERMUTE, {Pat::node(Op::PERMUTE, {x}, 'p')}), [](const Match& m) {  // permute(permute(x)) -> permute(x)
             Arg a;
             bool identity = true;
             for (int64_t k : m.root->arg.ints) {
                 a.ints.push_back(m['p']->arg.ints[k]);
                 identity &= a.ints.back() == int64_t(a.ints.size() - 1);
             }
             return identity ? m.ref('x') : with_src(m, 'x', Op::PERMUTE, std::move(a));
         }},
        {Pat::node(Op::EXPAND, {Pat::node(Op::EXPAND, {x})}), [](const Match& m) {      // expand(expand(x)) -> expand(x)
             return with_src(m, 'x', Op::EXPAND, m.root->arg);
         }},
        {Pat::node(Op::CONTIGUOUS, {Pat::node(Op::CONTIGUOUS, {x}, 'c')}), [](const Match& m) {  // contiguous twice -> once
             return m.ref('c');
         }},
    });
    return rules;
}

}  // namespace engine
