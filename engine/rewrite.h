// Rewrite rules as data: a Pat (pattern over nodes) plus a callback, grouped in named RuleSets and
// applied bottom-up to a fixpoint. A rule reads like its algebra: {x + 0, [](M& m) { return m.x; }}.
#pragma once

#include "engine/ir.h"

#include <functional>
#include <string>
#include <vector>

namespace engine {

struct Pat {
    enum Kind : uint8_t { ANY, OP, CONST };
    Kind kind = ANY;
    Op op = Op::N_OPS;
    int8_t slot = -1;       // binds the matched node; slots are named by letters ('x' -> m['x'])
    bool has_value = false;
    double value = 0.0;
    std::vector<Pat> srcs;  // OP: must match these (both orders for commutative ops)

    static Pat any(char name) { Pat p; p.slot = int8_t(name - 'a'); return p; }
    static Pat cst(char name) { Pat p = any(name); p.kind = CONST; return p; }  // any constant
    static Pat val(double v) { Pat p; p.kind = CONST; p.has_value = true; p.value = v; return p; }
    static Pat node(Op op, std::vector<Pat> srcs, char name = 0) {
        Pat p;
        p.kind = OP, p.op = op, p.srcs = std::move(srcs);
        if (name) p.slot = int8_t(name - 'a');
        return p;
    }
};
inline Pat operator+(Pat a, Pat b) { return Pat::node(Op::ADD, {std::move(a), std::move(b)}); }
inline Pat operator-(Pat a, Pat b) { return Pat::node(Op::SUB, {std::move(a), std::move(b)}); }
inline Pat operator*(Pat a, Pat b) { return Pat::node(Op::MUL, {std::move(a), std::move(b)}); }
inline Pat operator/(Pat a, Pat b) { return Pat::node(Op::DIV, {std::move(a), std::move(b)}); }
inline Pat operator%(Pat a, Pat b) { return Pat::node(Op::MOD, {std::move(a), std::move(b)}); }

// What a pattern bound: m['x'] is the node matched by Pat::any('x'); m.root the whole match.
struct Match {
    const Node* root = nullptr;
    const Node* slots[26] = {};
    const Node* operator[](char name) const { return slots[name - 'a']; }
    NodeRef ref(char name) const { return NodeRef(slots[name - 'a']); }
    int64_t i(char name) const { return slots[name - 'a']->arg.i; }    // an int constant's value
    double f(char name) const { return slots[name - 'a']->const_value(); }
};

// A callback returns the replacement, or an empty NodeRef to decline.
struct Rule {
    Pat pat;
    std::function<NodeRef(const Match&)> fn;
};

class RuleSet {
public:
    RuleSet(std::string name, std::vector<Rule> rules);
    const std::string& name() const { return name_; }
    // The first rule that matches `n` and does not decline, applied once; empty if none.
    NodeRef apply_once(const Node* n) const;

private:
    std::string name_;
    std::vector<Rule> rules_;
    std::vector<std::vector<const Rule*>> by_op_;  // rules rooted at each op, then the ANY-rooted ones
};

bool match(const Pat& p, const Node* n, Match& m);
// Rewrites bottom-up until no rule applies anywhere (rule results are rewritten too).
NodeRef rewrite(const NodeRef& root, const RuleSet& rules);
std::vector<NodeRef> rewrite(const std::vector<NodeRef>& roots, const RuleSet& rules);  // shared work

// Graph rules applied before scheduling (engine/schedule.cpp): chains of views fold into one view.
const RuleSet& view_rules();

// The symbolic rule set (engine/symbolic.cpp): constant folding, algebraic identities, index math
// (div/mod over linear forms using bounds), comparisons decided by bounds.
const RuleSet& symbolic_rules();
NodeRef simplify(const NodeRef& n);  // rewrite(n, symbolic_rules())

}  // namespace engine
