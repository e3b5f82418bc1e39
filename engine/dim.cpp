// Dim (a symbolic integer: a constant or an i64 expression node over Vars) and Var (a bound symbolic
// integer with a range). Arithmetic on symbolic Dims goes through the symbolic rules.
#include "engine/ir_impl.h"
#include "engine/rewrite.h"

namespace engine {

// --- Dim ------------------------------------------------------------------------------------------
Dim::Dim(int64_t v) : c_(v) {}
Dim::Dim(const Var& v) : expr_(v.node()) {}
Dim::Dim(NodeRef expr) {
    if (expr->op == Op::CONST) c_ = expr->arg.i;
    else expr_ = std::move(expr);
}
int64_t Dim::value() const {
    if (expr_) throw Error("[engine] Dim: " + str() + " is symbolic, not a constant");
    return c_;
}
int64_t Dim::min() const { return expr_ ? expr_->vmin : c_; }
int64_t Dim::max() const { return expr_ ? expr_->vmax : c_; }
int64_t Dim::eval() const { return expr_ ? eval_int(expr_.get()) : c_; }
NodeRef Dim::node() const { return expr_ ? expr_ : cidx(c_); }
std::string Dim::str() const {
    std::string s = expr_ ? expr_str(expr_.get()) : std::to_string(c_);
    if (s.size() > 2 && s.front() == '(' && s.back() == ')') s = s.substr(1, s.size() - 2);
    return s;
}
Dim operator+(const Dim& a, const Dim& b) {
    if (a.is_const() && b.is_const()) return a.c_ + b.c_;
    return Dim(simplify(iadd(a.node(), b.node())));
}
Dim operator-(const Dim& a, const Dim& b) {
    if (a.is_const() && b.is_const()) return a.c_ - b.c_;
    return Dim(simplify(iadd(a.node(), imul(b.node(), cidx(-1)))));
}
Dim operator*(const Dim& a, const Dim& b) {
    if (a.is_const() && b.is_const()) return a.c_ * b.c_;
    return Dim(simplify(imul(a.node(), b.node())));
}
Dim operator/(const Dim& a, const Dim& b) {
    if (a.is_const() && b.is_const()) {
        if (b.c_ == 0) throw Error("[engine] Dim: division by zero");
        return a.c_ / b.c_;
    }
    return Dim(simplify(idiv(a.node(), b.node())));
}
Dim operator%(const Dim& a, const Dim& b) {
    if (a.is_const() && b.is_const()) {
        if (b.c_ == 0) throw Error("[engine] Dim: modulo by zero");
        return a.c_ % b.c_;
    }
    return Dim(simplify(imod(a.node(), b.node())));
}
bool same(const Dim& a, const Dim& b) {
    if (a.is_const() != b.is_const()) return false;
    return a.is_const() ? a.c_ == b.c_ : a.expr_.get() == b.expr_.get();
}

// --- Var ------------------------------------------------------------------------------------------
Var::Var(std::string name, int64_t min, int64_t max) {
    if (min > max) throw Error("[engine] Var " + name + ": empty range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
    Arg a;
    a.obj = std::make_shared<VarState>(std::move(name), min, max);
    node_ = make(Op::VAR, i64, {}, std::move(a));
}
const std::string& Var::name() const { return var_state(node_.get()).name; }
int64_t Var::min() const { return var_state(node_.get()).min; }
int64_t Var::max() const { return var_state(node_.get()).max; }
int64_t Var::value() const { return var_state(node_.get()).value.load(); }
NodeRef Var::node() const { return node_; }
const Var& Var::bind(int64_t value) const {
    auto& st = const_cast<VarState&>(var_state(node_.get()));
    if (value < st.min || value > st.max)
        throw Error("[engine] Var " + st.name + ": value " + std::to_string(value) + " outside [" + std::to_string(st.min) +
                    ", " + std::to_string(st.max) + "]");
    st.value.store(value);
    return *this;
}

}  // namespace engine
