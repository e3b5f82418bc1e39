// The renderer (internal to jinja/): evaluates a parsed template against a context with Jinja's scoping
// (each loop iteration and each macro call gets its own scope, if-blocks do not) and Python's
// semantics, as an ImmutableSandboxedEnvironment would.
#pragma once

#include "jinja/ast_impl.h"
#include "jinja/budget_impl.h"

#include <ctime>
#include <functional>

namespace jinja {

struct Scope {
    std::shared_ptr<Scope> parent;
    std::vector<std::pair<int, Value>> vars;  // by slot; scopes are small, a scan beats a map

    const Value* find(int slot) const {
        for (const auto& [s, v] : vars)
            if (s == slot) return &v;
        return nullptr;
    }
    void set(int slot, Value v) {
        for (auto& [s, old] : vars) {
            if (s == slot) {
                old = std::move(v);
                return;
            }
        }
        vars.emplace_back(slot, std::move(v));
    }
};

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;

    // The parameter at position `index` or named `name`; nullptr when not given.
    const Value* get(size_t index, std::string_view name) const;
    // TypeError for arguments beyond `names` (positional) or not among them (keyword).
    void check(std::string_view function, std::initializer_list<std::string_view> names) const;
};

class Callable : public Object {
public:
    bool callable() const override { return true; }
    virtual Value call(Renderer& r, CallArgs& args) const = 0;
};

// namespace(): the one mutable object templates have ({% set ns.x = ... %}).
class Namespace : public Object {
public:
    std::vector<std::pair<std::string, Value>> attrs;
    std::string type_name() const override { return "Namespace"; }
    bool get_attr(std::string_view name, Value& out) const override;
    void set(std::string_view name, Value v);
    std::string repr() const override;
};

enum class Flow : uint8_t { NORMAL, BREAK, CONTINUE };

class Renderer {
public:
    Renderer(const Program& program, const Json& context, Clock clock, const TemplateLimits& limits = {});
    std::string render();

    Value eval(const Expr& e);
    Value call(const Value& callee, CallArgs& args);
    Value get_attr(const Value& obj, std::string_view name);
    Value get_item(const Value& obj, const Value& key);
    Value apply_filter(std::string_view name, const Value& operand, CallArgs& args);
    bool apply_test(std::string_view name, const Value& operand, CallArgs& args);
    const Clock& clock() const { return clock_; }

    // Runs `body` in `scope` and returns what it printed (macro calls, block set, filter blocks).
    std::string capture(const Body& body, std::shared_ptr<Scope> scope);
    Value eval_in(const Expr& e, std::shared_ptr<Scope> scope);
    const Program& program() const { return program_; }
    // One more level of macro calls / recursive loops; fails before the stack could overflow.
    struct Depth {
        Renderer& r;
        explicit Depth(Renderer& renderer);
        ~Depth() { r.depth_--; }
    };
    // A recursive loop's `loop(children)`: runs the loop body over `items` and returns the output.
    std::string capture_loop(const ForStmt& s, std::vector<Value> items, int depth);
    std::shared_ptr<Namespace> new_namespace();  // released (and cleared) when the render ends

private:
    const Program& program_;
    std::vector<Value> globals_;  // by slot: the context's variables, then builtins
    std::shared_ptr<Scope> scope_;
    std::string* out_ = nullptr;
    Clock clock_;
    TemplateLimits limits_;
    int depth_ = 0;
    std::vector<std::shared_ptr<Namespace>> namespaces_;

    friend struct ScopeSwap;
    Value lookup(int slot);
    Flow exec(const Body& body);
    Flow exec_stmt(const Stmt& s);
    void emit(std::string_view text);  // appends to the output, counted against the budget
    void emit(const Value& v);         // str(v), likewise
    void assign(const Target& target, Value value);
    Value eval_call(const CallExpr& e);
    Value eval_filter(const FilterExpr& e, const Value* operand);
    CallArgs eval_args(const Arguments& a);
    Value eval_slice(const SliceExpr& e);
    Value eval_compare(const CompareExpr& e);
    Value eval_binary(const BinaryExpr& e);
    Value apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value v);
    void run_loop(const ForStmt& s, std::vector<Value> items, int depth);
};

// Operators and helpers shared by the renderer, filters and methods.
Value binary_op(Op op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);  // Python's `item in container`
Value percent_format(const Value& format, const Value& args);  // Python's `format % args`
Value make_function(std::string name, Value (*fn)(Renderer&, CallArgs&));
void add_builtin_globals(std::vector<std::pair<std::string, Value>>& out);

// str/list/dict methods: whether `name` is one (unsafe ones are refused by the sandbox), and a call.
enum class MethodKind { NONE, SAFE, UNSAFE };
MethodKind method_kind(const Value& obj, std::string_view name);
Value call_method(Renderer& r, const Value& obj, std::string_view name, CallArgs& args);
Value bound_method(const Value& obj, std::string_view name);
[[noreturn]] void fail_unsafe(const Value& obj, std::string_view name);

}  // namespace jinja
