// The rewrite engine: pattern matching (commutative-aware) and bottom-up application to a fixpoint.
#include "engine/rewrite.h"

#include <unordered_map>

namespace engine {

bool match(const Pat& p, const Node* n, Match& m) {
    switch (p.kind) {
        case Pat::ANY: break;
        case Pat::CONST:
            if (n->op != Op::CONST) return false;
            if (p.has_value && n->const_value() != p.value) return false;
            break;
        case Pat::OP: {
            if (n->op != p.op) return false;
            if (!p.srcs.empty()) {
                if (p.srcs.size() != n->srcs.size()) return false;
                Match saved = m;
                bool ok = true;
                for (size_t i = 0; ok && i < p.srcs.size(); i++) ok = match(p.srcs[i], n->src(i), m);
                if (!ok && p.srcs.size() == 2 && is_commutative(p.op)) {
                    m = saved;
                    ok = match(p.srcs[0], n->src(1), m) && match(p.srcs[1], n->src(0), m);
                }
                if (!ok) {
                    m = saved;
                    return false;
                }
            }
            break;
        }
    }
    if (p.slot >= 0) {
        if (m.slots[p.slot] && m.slots[p.slot] != n) return false;  // same name, same node
        m.slots[p.slot] = n;
    }
    return true;
}

RuleSet::RuleSet(std::string name, std::vector<Rule> rules)
    : name_(std::move(name)), rules_(std::move(rules)), by_op_(size_t(Op::N_OPS) + 1) {
    for (const Rule& r : rules_) by_op_[r.pat.kind == Pat::OP ? size_t(r.pat.op) : size_t(Op::N_OPS)].push_back(&r);
}

NodeRef RuleSet::apply_once(const Node* n) const {
    for (size_t list : {size_t(n->op), size_t(Op::N_OPS)}) {
        for (const Rule* r : by_op_[list]) {
            Match m;
            m.root = n;
            if (!match(r->pat, n, m)) continue;
            NodeRef out = r->fn(m);
            if (out && out.get() != n) return out;
        }
    }
    return {};
}

namespace {

struct Rewriter {
    const RuleSet& rules;
    std::unordered_map<const Node*, NodeRef> done;

    NodeRef run(const NodeRef& root) {
        // Iterative post-order so deep graphs do not overflow the stack.
        std::vector<std::pair<const Node*, bool>> stack{{root.get(), false}};
        while (!stack.empty()) {
            auto [n, expanded] = stack.back();
            if (done.count(n)) {
                stack.pop_back();
                continue;
            }
            if (!expanded) {
                stack.back().second = true;
                for (auto& s : n->srcs)
                    if (!done.count(s.get())) stack.push_back({s.get(), false});
                continue;
            }
            stack.pop_back();
            done[n] = settle(rebuilt(n));
        }
        return done.at(root.get());
    }

    NodeRef rebuilt(const Node* n) {
        bool changed = false;
        std::vector<NodeRef> srcs;
        srcs.reserve(n->srcs.size());
        for (auto& s : n->srcs) {
            srcs.push_back(done.at(s.get()));
            changed |= srcs.back().get() != s.get();
        }
        return changed ? make(n->op, n->dtype, std::move(srcs), n->arg) : NodeRef(n);
    }

    // Applies rules at one node until none fires; a replacement's new parts are rewritten first.
    NodeRef settle(NodeRef n) {
        for (int guard = 0; guard < 1000; guard++) {
            NodeRef r = rules.apply_once(n.get());
            if (!r) return n;
            n = run(r);
        }
        throw Error("[engine] rewrite: rule set '" + rules.name() + "' does not reach a fixpoint");
    }
};

}  // namespace

NodeRef rewrite(const NodeRef& root, const RuleSet& rules) {
    Rewriter rw{rules, {}};
    return rw.run(root);
}

std::vector<NodeRef> rewrite(const std::vector<NodeRef>& roots, const RuleSet& rules) {
    Rewriter rw{rules, {}};
    std::vector<NodeRef> out;
    for (auto& r : roots) out.push_back(rw.run(r));
    return out;
}

NodeRef simplify(const NodeRef& n) { return rewrite(n, symbolic_rules()); }

}  // namespace engine
