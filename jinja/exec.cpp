// Statement execution: output, if, for (loop object, filters, else, recursion, break/continue),
// assignments, macros and call blocks, filter and with blocks — with Jinja's scoping rules.
#include "jinja/render_impl.h"

#include <utility>

namespace jinja {

namespace {

constexpr int MAX_CALL_DEPTH = 200;  // macro calls and recursive loops; Python's own limit is near this

std::string count_text(size_t n, const char* what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

// loop.cycle(a, b, ...): the argument at the loop's position, modulo their count.
class LoopCycle : public Callable {
public:
    explicit LoopCycle(size_t index) : index_(index) {}
    std::string type_name() const override { return "method"; }
    Value call(Renderer&, CallArgs& args) const override {
        if (args.positional.empty()) fail(ErrorKind::TYPE, "no items for cycling given");
        return args.positional[index_ % args.positional.size()];
    }

private:
    size_t index_;
};

// The `loop` variable of a for loop; one object per loop, advanced in place (as Jinja's LoopContext).
class Loop : public Callable, public std::enable_shared_from_this<Loop> {
public:
    std::vector<Value> items;
    mutable std::vector<Value> last_changed;  // loop.changed(...)'s previous arguments
    mutable bool changed_called = false;
    size_t index = 0;
    int depth = 0;
    const ForStmt* recursive = nullptr;  // set for `{% for ... recursive %}`: loop(children) renders them

    std::string type_name() const override { return "LoopContext"; }
    bool callable() const override { return recursive != nullptr; }

    bool get_attr(std::string_view name, Value& out) const override;

    Value call(Renderer& r, CallArgs& args) const override {
        if (!recursive) fail(ErrorKind::TYPE, "'LoopContext' object is not callable");
        args.check("loop", {"iterable"});
        if (args.positional.empty()) fail(ErrorKind::TYPE, "loop() missing the iterable");
        Renderer::Depth guard(r);
        return Value::string(r.capture_loop(*recursive, iterate(args.positional[0]), depth + 1));
    }
};

// loop.changed(a, ...): true on the first call and whenever the arguments differ from the last call's.
class LoopChanged : public Callable {
public:
    explicit LoopChanged(std::shared_ptr<const Loop> loop) : loop_(std::move(loop)) {}
    std::string type_name() const override { return "method"; }
    Value call(Renderer&, CallArgs& args) const override {
        bool same = loop_->changed_called && loop_->last_changed.size() == args.positional.size();
        for (size_t i = 0; same && i < args.positional.size(); i++) same = equal(loop_->last_changed[i], args.positional[i]);
        loop_->changed_called = true;
        loop_->last_changed = args.positional;
        return Value::boolean(!same);
    }

private:
    std::shared_ptr<const Loop> loop_;
};

bool Loop::get_attr(std::string_view name, Value& out) const {
    size_t n = items.size();
    if (name == "index") out = Value::integer(static_cast<int64_t>(index + 1));
    else if (name == "index0") out = Value::integer(static_cast<int64_t>(index));
    else if (name == "revindex") out = Value::integer(static_cast<int64_t>(n - index));
    else if (name == "revindex0") out = Value::integer(static_cast<int64_t>(n - index - 1));
    else if (name == "first") out = Value::boolean(index == 0);
    else if (name == "last") out = Value::boolean(index + 1 == n);
    else if (name == "length") out = Value::integer(static_cast<int64_t>(n));
    else if (name == "depth") out = Value::integer(depth + 1);
    else if (name == "depth0") out = Value::integer(depth);
    else if (name == "previtem") out = index > 0 ? items[index - 1] : Value::undefined("there is no previous item");
    else if (name == "nextitem") out = index + 1 < n ? items[index + 1] : Value::undefined("there is no next item");
    else if (name == "cycle") out = Value::object(std::make_shared<LoopCycle>(index));
    else if (name == "changed") out = Value::object(std::make_shared<LoopChanged>(shared_from_this()));
    else return false;
    return true;
}

class Macro : public Callable {
public:
    Macro(std::shared_ptr<const MacroDef> def, const std::shared_ptr<Scope>& closure) : def_(std::move(def)), closure_(closure) {}
    std::string type_name() const override { return "Macro"; }
    std::string repr() const override { return "<Macro '" + def_->name + "'>"; }

    Value call(Renderer& r, CallArgs& args) const override {
        Renderer::Depth guard(r);
        std::shared_ptr<Scope> closure = closure_.lock();
        if (!closure) fail(ErrorKind::RUNTIME, "macro '" + def_->name + "' called after its defining scope ended");
        const Program& program = r.program();
        const auto& params = def_->params;
        if (args.positional.size() > params.size() && !def_->uses_varargs)
            fail(ErrorKind::TYPE, "macro '" + def_->name + "' takes not more than " + count_text(params.size(), "argument"));
        auto scope = std::make_shared<Scope>();
        scope->parent = std::move(closure);
        std::vector<bool> bound(params.size(), false);
        for (size_t i = 0; i < params.size() && i < args.positional.size(); i++) {
            scope->vars.emplace_back(params[i], args.positional[i]);
            bound[i] = true;
        }
        std::vector<std::pair<Value, Value>> extra_keywords;
        Value caller = Value::undefined("No caller defined");
        for (auto& [name, value] : args.keyword) {
            size_t i = 0;
            while (i < params.size() && program.symbols[params[i]] != name) i++;
            if (i < params.size()) {
                if (bound[i]) fail(ErrorKind::TYPE, "macro '" + def_->name + "' got multiple values for argument '" + name + "'");
                scope->vars.emplace_back(params[i], value);
                bound[i] = true;
            } else if (name == "caller" && def_->uses_caller) {
                caller = value;
            } else if (def_->uses_kwargs) {
                extra_keywords.emplace_back(Value::string(name), value);
            } else {
                fail(ErrorKind::TYPE, "macro '" + def_->name + "' takes no keyword argument '" + name + "'");
            }
        }
        for (size_t i = 0; i < params.size(); i++) {  // defaults see the parameters bound before them
            if (bound[i]) continue;
            Value v = def_->defaults[i] ? r.eval_in(*def_->defaults[i], scope)
                                        : Value::undefined("parameter '" + program.symbols[params[i]] + "' was not provided");
            scope->vars.emplace_back(params[i], std::move(v));
        }
        if (def_->uses_varargs) {
            std::vector<Value> rest;
            for (size_t i = params.size(); i < args.positional.size(); i++) rest.push_back(args.positional[i]);
            scope->vars.emplace_back(program.slot_varargs, Value::list(std::move(rest), true));
        }
        if (def_->uses_kwargs) scope->vars.emplace_back(program.slot_kwargs, Value::dict(std::move(extra_keywords)));
        if (def_->uses_caller) scope->vars.emplace_back(program.slot_caller, caller);
        return Value::string(r.capture(def_->body, std::move(scope)));
    }

private:
    std::shared_ptr<const MacroDef> def_;
    std::weak_ptr<Scope> closure_;  // weak: the scope usually holds the macro itself
};

}  // namespace

struct ScopeSwap {
    Renderer& r;
    std::shared_ptr<Scope> saved;
    ScopeSwap(Renderer& renderer, std::shared_ptr<Scope> s) : r(renderer), saved(std::exchange(r.scope_, std::move(s))) {}
    ~ScopeSwap() { r.scope_ = std::move(saved); }
};

namespace {

std::shared_ptr<Scope> child_of(std::shared_ptr<Scope> parent) {
    auto s = std::make_shared<Scope>();
    s->parent = std::move(parent);
    return s;
}

}  // namespace

Renderer::Depth::Depth(Renderer& renderer) : r(renderer) {
    if (++r.depth_ > MAX_CALL_DEPTH) {
        r.depth_--;
        fail(ErrorKind::RUNTIME, "maximum recursion depth exceeded");
    }
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
    if (index < positional.size()) return &positional[index];
    for (const auto& [k, v] : keyword)
        if (k == name) return &v;
    return nullptr;
}

void CallArgs::check(std::string_view function, std::initializer_list<std::string_view> names) const {
    std::string fn(function);
    if (positional.size() > names.size())
        fail(ErrorKind::TYPE, fn + "() takes at most " + count_text(names.size(), "argument") + " (" +
                                  std::to_string(positional.size()) + " given)");
    for (const auto& [k, v] : keyword) {
        size_t i = 0;
        for (std::string_view n : names) {
            if (n == k) break;
            i++;
        }
        if (i == names.size()) fail(ErrorKind::TYPE, fn + "() got an unexpected keyword argument '" + k + "'");
        if (i < positional.size()) fail(ErrorKind::TYPE, fn + "() got multiple values for argument '" + k + "'");
    }
}

bool Namespace::get_attr(std::string_view name, Value& out) const {
    for (const auto& [k, v] : attrs) {
        if (k == name) {
            out = v;
            return true;
        }
    }
    return false;
}

void Namespace::set(std::string_view name, Value v) {
    for (auto& [k, old] : attrs) {
        if (k == name) {
            old = std::move(v);
            return;
        }
    }
    attrs.emplace_back(std::string(name), std::move(v));
}

std::string Namespace::repr() const {
    std::string out = "<Namespace {";
    for (size_t i = 0; i < attrs.size(); i++) {
        if (i) out += ", ";
        append_repr(out, Value::string(attrs[i].first));
        out += ": ";
        append_repr(out, attrs[i].second);
    }
    return out + "}>";
}

Renderer::Renderer(const Program& program, const Json& context, Clock clock, const TemplateLimits& limits)
    : program_(program), clock_(std::move(clock)), limits_(limits) {
    static const std::vector<std::pair<std::string, Value>> builtins = [] {
        std::vector<std::pair<std::string, Value>> b;
        add_builtin_globals(b);
        return b;
    }();
    globals_.resize(program.symbols.size());
    for (const auto& [name, v] : builtins) {
        auto it = program.slots.find(name);
        if (it != program.slots.end()) globals_[it->second] = v;
    }
    if (!context.is_object()) fail(ErrorKind::TYPE, "the render context must be a JSON object");
    for (auto it = context.begin(); it != context.end(); ++it) {
        auto slot = program.slots.find(it.key());
        if (slot != program.slots.end()) globals_[slot->second] = Value::from_json(it.value());
    }
    scope_ = std::make_shared<Scope>();
}

std::string Renderer::render() {
    std::string out;
    out_ = &out;
    Budget budget(limits_);
    struct Cleanup {  // namespaces may hold themselves (ns.x = ns): break such cycles, even on error
        Renderer& r;
        ~Cleanup() {
            for (auto& ns : r.namespaces_) ns->attrs.clear();
            r.scope_->vars.clear();
        }
    } cleanup{*this};
    exec(program_.body);
    return out;
}

std::string render(const Program& program, const Json& context, Clock clock, const TemplateLimits& limits) {
    return Renderer(program, context, std::move(clock), limits).render();
}

std::shared_ptr<Namespace> Renderer::new_namespace() {
    auto ns = std::make_shared<Namespace>();
    namespaces_.push_back(ns);
    return ns;
}

std::string Renderer::capture(const Body& body, std::shared_ptr<Scope> scope) {
    std::string buffer;
    std::string* saved = std::exchange(out_, &buffer);
    struct Restore {
        Renderer& r;
        std::string* saved;
        ~Restore() { r.out_ = saved; }
    } restore{*this, saved};
    ScopeSwap swap(*this, scope ? std::move(scope) : scope_);
    exec(body);
    return buffer;
}

std::string Renderer::capture_loop(const ForStmt& s, std::vector<Value> items, int depth) {
    std::string buffer;
    std::string* saved = std::exchange(out_, &buffer);
    struct Restore {
        Renderer& r;
        std::string* saved;
        ~Restore() { r.out_ = saved; }
    } restore{*this, saved};
    run_loop(s, std::move(items), depth);
    return buffer;
}

Value Renderer::eval_in(const Expr& e, std::shared_ptr<Scope> scope) {
    ScopeSwap swap(*this, std::move(scope));
    return eval(e);
}

Flow Renderer::exec(const Body& body) {
    budget_check_stack();
    for (const auto& stmt : body) {
        budget_step();
        Flow flow;
        try {
            flow = exec_stmt(*stmt);
        } catch (Error& e) {
            if (!e.line) e.line = stmt->line;
            throw;
        }
        if (flow != Flow::NORMAL) return flow;
    }
    return Flow::NORMAL;
}

void Renderer::assign(const Target& target, Value value) {
    switch (target.kind) {
    case Target::NAME: scope_->set(target.slot, std::move(value)); return;
    case Target::ATTRIBUTE: {
        Value ns = lookup(target.slot);
        auto* obj = dynamic_cast<Namespace*>(ns.object());
        if (!obj) fail(ErrorKind::RUNTIME, "cannot assign attribute on non-namespace object");
        obj->set(target.attr, std::move(value));
        return;
    }
    case Target::TUPLE: {
        std::vector<Value> items = iterate(value);
        size_t n = target.items.size();
        if (items.size() < n)
            fail(ErrorKind::VALUE, "not enough values to unpack (expected " + std::to_string(n) + ", got " +
                                       std::to_string(items.size()) + ")");
        if (items.size() > n) fail(ErrorKind::VALUE, "too many values to unpack (expected " + std::to_string(n) + ")");
        for (size_t i = 0; i < n; i++) assign(target.items[i], std::move(items[i]));
        return;
    }
    }
}

Value Renderer::apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value v) {
    for (const auto& f : filters) v = eval_filter(*f, &v);
    return v;
}

// The scope of the next loop iteration: the previous one emptied, unless something still holds it.
static void fresh_iteration_scope(std::shared_ptr<Scope>& scope, const std::shared_ptr<Scope>& outer) {
    if (scope && scope.use_count() == 1) scope->vars.clear();
    else scope = child_of(outer);
}

void Renderer::run_loop(const ForStmt& s, std::vector<Value> items, int depth) {
    std::shared_ptr<Scope> outer = scope_, scope;
    if (s.filter) {  // `for x in xs if cond`: loop.* counts only the items kept
        std::vector<Value> kept;
        for (Value& item : items) {
            budget_step();
            fresh_iteration_scope(scope, outer);
            ScopeSwap swap(*this, scope);
            assign(s.target, item);
            if (truthy(eval(*s.filter))) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    if (items.empty()) {
        ScopeSwap swap(*this, child_of(outer));
        exec(s.otherwise);
        return;
    }
    auto loop = std::make_shared<Loop>();
    loop->items = std::move(items);
    loop->depth = depth;
    loop->recursive = s.recursive ? &s : nullptr;
    Value loop_value = Value::object(loop);
    for (size_t i = 0; i < loop->items.size(); i++) {
        budget_step();
        loop->index = i;
        fresh_iteration_scope(scope, outer);
        ScopeSwap swap(*this, scope);
        assign(s.target, loop->items[i]);
        scope_->vars.emplace_back(program_.slot_loop, loop_value);
        if (exec(s.body) == Flow::BREAK) break;
    }
}

void Renderer::emit(std::string_view text) {
    if (Budget* b = Budget::current()) b->output(text.size());
    out_->append(text);
}

void Renderer::emit(const Value& v) {
    size_t before = out_->size();
    append_str(*out_, v);
    if (Budget* b = Budget::current()) b->output(out_->size() - before);
}

Flow Renderer::exec_stmt(const Stmt& stmt) {
    switch (stmt.type) {
    case StmtType::TEXT: emit(static_cast<const TextStmt&>(stmt).text); return Flow::NORMAL;
    case StmtType::OUTPUT: emit(eval(*static_cast<const OutputStmt&>(stmt).expr)); return Flow::NORMAL;
    case StmtType::IF: {
        const auto& s = static_cast<const IfStmt&>(stmt);
        for (const auto& [cond, body] : s.branches)
            if (truthy(eval(*cond))) return exec(body);
        return exec(s.otherwise);
    }
    case StmtType::FOR: {
        const auto& s = static_cast<const ForStmt&>(stmt);
        run_loop(s, iterate(eval(*s.iterable)), 0);
        return Flow::NORMAL;
    }
    case StmtType::SET: {
        const auto& s = static_cast<const SetStmt&>(stmt);
        assign(s.target, eval(*s.value));
        return Flow::NORMAL;
    }
    case StmtType::SET_BLOCK: {
        const auto& s = static_cast<const SetBlockStmt&>(stmt);
        Value text = Value::string(capture(s.body, child_of(scope_)));
        assign(s.target, apply_filters(s.filters, std::move(text)));
        return Flow::NORMAL;
    }
    case StmtType::MACRO: {
        const auto& s = static_cast<const MacroStmt&>(stmt);
        scope_->set(s.slot, Value::object(std::make_shared<Macro>(s.def, scope_)));
        return Flow::NORMAL;
    }
    case StmtType::CALL_BLOCK: {
        const auto& s = static_cast<const CallBlockStmt&>(stmt);
        const auto& call = static_cast<const CallExpr&>(*s.call);
        Value callee = eval(*call.callee);
        CallArgs args = eval_args(call.args);
        args.keyword.emplace_back("caller", Value::object(std::make_shared<Macro>(s.caller, scope_)));
        emit(this->call(callee, args));
        return Flow::NORMAL;
    }
    case StmtType::FILTER_BLOCK: {
        const auto& s = static_cast<const FilterBlockStmt&>(stmt);
        emit(apply_filters(s.filters, Value::string(capture(s.body, child_of(scope_)))));
        return Flow::NORMAL;
    }
    case StmtType::WITH: {
        const auto& s = static_cast<const WithStmt&>(stmt);
        std::vector<Value> values;
        for (const auto& a : s.assignments) values.push_back(eval(*a.second));
        ScopeSwap swap(*this, child_of(scope_));
        for (size_t i = 0; i < values.size(); i++) assign(s.assignments[i].first, std::move(values[i]));
        return exec(s.body);
    }
    case StmtType::BREAK: return Flow::BREAK;
    case StmtType::CONTINUE: return Flow::CONTINUE;
    }
    return Flow::NORMAL;
}

}  // namespace jinja
