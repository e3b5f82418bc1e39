// Expression evaluation: names, attribute and item access (Jinja's sandboxed getattr/getitem), slices,
// calls, filters, tests, and Python's operators with their exact type rules and error messages.
#include "jinja/render_impl.h"
#include "jinja/unicode_impl.h"

#include <cmath>
#include <optional>

namespace jinja {

namespace {

[[noreturn]] void unsupported_operands(const char* op, const Value& a, const Value& b) {
    fail(ErrorKind::TYPE, std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) + "' and '" +
                              type_name(b) + "'");
}

// Python ints do not overflow; ours refuse to instead of wrapping.
template <bool (*OP)(int64_t, int64_t, int64_t*)>
int64_t checked(int64_t a, int64_t b) {
    int64_t r;
    if (OP(a, b, &r)) fail(ErrorKind::VALUE, "integer result too large");
    return r;
}
bool add_overflows(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_overflows(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_overflows(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }
constexpr auto checked_add = checked<add_overflows>;
constexpr auto checked_sub = checked<sub_overflows>;
constexpr auto checked_mul = checked<mul_overflows>;

std::string html_escape(std::string_view s) {  // markupsafe.escape
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&': out += "&amp;"; break;
        case '<': out += "&lt;"; break;
        case '>': out += "&gt;"; break;
        case '\'': out += "&#39;"; break;
        case '"': out += "&#34;"; break;
        default: out += c;
        }
    }
    return out;
}

Value repeat(const Value& seq, int64_t n) {
    if (n < 0) n = 0;
    size_t unit = seq.is_string() ? seq.str().size() : seq.list_size();
    if (unit && static_cast<uint64_t>(n) > (size_t{1} << 28) / unit) fail(ErrorKind::VALUE, "repetition result too large");
    budget_reserve(unit * static_cast<size_t>(n) * (seq.is_string() ? 1 : sizeof(Value)));
    if (seq.is_string()) {  // by doubling: 'x' * 100000000 is a few copies, not 10^8 appends
        std::string out;
        out.reserve(unit * n);
        if (n > 0) out += seq.str();
        while (out.size() < unit * n) out.append(out, 0, std::min(out.size(), unit * n - out.size()));
        return Value::string(std::move(out), seq.is_safe());
    }
    std::vector<Value> items;
    for (int64_t i = 0; i < n; i++)
        for (size_t k = 0; k < seq.list_size(); k++) items.push_back(seq.list_at(k));
    return Value::list(std::move(items), seq.is_tuple());
}

}  // namespace

Value binary_op(Op op, const Value& a, const Value& b) {
    require_defined(a);
    require_defined(b);
    bool ints = a.is_number() && b.is_number() && a.kind() != Kind::FLOAT && b.kind() != Kind::FLOAT;
    bool numbers = a.is_number() && b.is_number();
    int64_t x = ints ? a.as_int() : 0, y = ints ? b.as_int() : 0;
    switch (op) {
    case Op::ADD:
        if (ints) return Value::integer(checked_add(x, y));
        if (numbers) return Value::number(a.as_float() + b.as_float());
        if (a.is_string() && b.is_string()) {
            if (a.is_safe() || b.is_safe())  // Markup escapes the plain operand
                return Value::string((a.is_safe() ? std::string(a.str()) : html_escape(a.str())) +
                                         (b.is_safe() ? std::string(b.str()) : html_escape(b.str())),
                                     true);
            budget_reserve(a.str().size() + b.str().size());
            std::string s;
            s.reserve(a.str().size() + b.str().size());
            s += a.str();
            s += b.str();
            return Value::string(std::move(s));
        }
        if (a.kind() == Kind::LIST && b.kind() == Kind::LIST && a.is_tuple() == b.is_tuple()) {
            budget_reserve((a.list_size() + b.list_size()) * sizeof(Value));
            std::vector<Value> items = iterate(a);
            for (size_t i = 0; i < b.list_size(); i++) items.push_back(b.list_at(i));
            return Value::list(std::move(items), a.is_tuple());
        }
        if ((a.is_string() && !a.is_safe()) || a.kind() == Kind::LIST)
            fail(ErrorKind::TYPE, "can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
        unsupported_operands("+", a, b);
    case Op::SUB:
        if (ints) return Value::integer(checked_sub(x, y));
        if (numbers) return Value::number(a.as_float() - b.as_float());
        unsupported_operands("-", a, b);
    case Op::MUL:
        if (ints) return Value::integer(checked_mul(x, y));
        if (numbers) return Value::number(a.as_float() * b.as_float());
        if ((a.is_string() || a.kind() == Kind::LIST) && b.is_number() && b.kind() != Kind::FLOAT) return repeat(a, b.as_int());
        if ((b.is_string() || b.kind() == Kind::LIST) && a.is_number() && a.kind() != Kind::FLOAT) return repeat(b, a.as_int());
        unsupported_operands("*", a, b);
    case Op::DIV:
        if (!numbers) unsupported_operands("/", a, b);
        if (b.as_float() == 0.0) fail(ErrorKind::VALUE, "division by zero");
        return Value::number(a.as_float() / b.as_float());
    case Op::FLOORDIV:
    case Op::MOD: {
        if (op == Op::MOD && a.is_string()) return percent_format(a, b);
        if (!numbers) unsupported_operands(op == Op::MOD ? "%" : "//", a, b);
        if (ints) {
            if (y == 0) fail(ErrorKind::VALUE, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) fail(ErrorKind::VALUE, "integer result too large");
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) q--, m += y;  // Python floors toward -infinity
            return Value::integer(op == Op::MOD ? m : q);
        }
        double fx = a.as_float(), fy = b.as_float();
        if (fy == 0.0) fail(ErrorKind::VALUE, op == Op::MOD ? "float modulo" : "float floor division by zero");
        // Python's float_divmod.
        double m = std::fmod(fx, fy);
        if (m != 0.0 && ((m < 0) != (fy < 0))) m += fy;
        if (op == Op::MOD) return Value::number(m != 0.0 ? m : std::copysign(0.0, fy));
        double div = (fx - m) / fy, floor_div = std::floor(div);
        if (div - floor_div > 0.5) floor_div += 1.0;
        return Value::number(div != 0.0 ? floor_div : std::copysign(0.0, fx / fy));
    }
    case Op::POW:
        if (!numbers) unsupported_operands("** or pow()", a, b);
        if (ints && y >= 0) {  // by squaring; any overflow of the base would overflow the result
            int64_t result = 1, base = x;
            for (int64_t e = y; e; e >>= 1) {
                if (e & 1) result = checked_mul(result, base);
                if (e > 1) base = checked_mul(base, base);
            }
            return Value::integer(result);
        }
        return Value::number(std::pow(a.as_float(), b.as_float()));
    default: fail(ErrorKind::RUNTIME, "bad binary operator");
    }
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
    case Kind::UNDEFINED: return false;  // Undefined iterates as empty
    case Kind::STRING:
        if (!item.is_string())
            fail(ErrorKind::TYPE, "'in <string>' requires string as left operand, not " + type_name(item));
        budget_step(container.str().size() / 64);
        return container.str().find(item.str()) != std::string_view::npos;
    case Kind::LIST:
        for (size_t i = 0; i < container.list_size(); i++) {
            budget_step();
            if (equal(container.list_at(i), item)) return true;
        }
        return false;
    case Kind::DICT: {
        if (item.kind() == Kind::LIST && !item.is_tuple()) fail(ErrorKind::TYPE, "unhashable type: 'list'");
        if (item.kind() == Kind::DICT) fail(ErrorKind::TYPE, "unhashable type: 'dict'");
        Value ignored;
        return container.dict_find(item, ignored);
    }
    default: fail(ErrorKind::TYPE, "argument of type '" + type_name(container) + "' is not iterable");
    }
}

Value Renderer::lookup(int slot) {
    for (const Scope* s = scope_.get(); s; s = s->parent.get())
        if (const Value* v = s->find(slot)) return *v;
    const Value& g = globals_[slot];
    if (g.is_undefined()) return Value::undefined("'" + program_.symbols[slot] + "' is undefined");
    return g;
}

Value Renderer::get_attr(const Value& obj, std::string_view name) {
    switch (obj.kind()) {
    case Kind::UNDEFINED: fail_undefined(obj);
    case Kind::OBJECT: {
        Value out;
        if (obj.object()->get_attr(name, out)) return out;
        break;
    }
    case Kind::DICT: {  // Python attributes (the dict methods) first, then items
        if (method_kind(obj, name) != MethodKind::NONE) return bound_method(obj, name);
        Value out;
        if (obj.dict_find(name, out)) return out;
        break;
    }
    case Kind::STRING:
    case Kind::LIST:
        if (method_kind(obj, name) != MethodKind::NONE) return bound_method(obj, name);
        break;
    default: break;
    }
    return Value::undefined(object_description(obj) + " has no attribute '" + std::string(name) + "'");
}

Value Renderer::get_item(const Value& obj, const Value& key) {
    require_defined(obj);
    if (obj.kind() == Kind::DICT) {
        Value out;
        if (obj.dict_find(key, out)) return out;
    } else if ((obj.kind() == Kind::LIST || obj.is_string()) && key.is_number() && key.kind() != Kind::FLOAT) {
        int64_t i = key.as_int();
        int64_t n = obj.is_string() ? static_cast<int64_t>(utf8_length(obj.str())) : static_cast<int64_t>(obj.list_size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) {
            if (obj.kind() == Kind::LIST) return obj.list_at(static_cast<size_t>(i));
            std::string_view s = obj.str();
            size_t start = utf8_offset(s, static_cast<size_t>(i)), end = start;
            utf8_next(s, end);
            return Value::string(std::string(s.substr(start, end - start)));
        }
    }
    if (key.is_string()) return get_attr(obj, key.str());  // obj['items'] finds the method, as in Jinja
    std::string desc;
    append_repr(desc, key);
    return Value::undefined(object_description(obj) + " has no element " + desc);
}

Value Renderer::eval_slice(const SliceExpr& e) {
    Value obj = eval(*e.object);
    require_defined(obj);
    auto bound = [&](const ExprPtr& x, bool& ok) -> std::optional<int64_t> {
        if (!x) return std::nullopt;
        Value v = eval(*x);
        if (v.is_none()) return std::nullopt;
        if (!v.is_number() || v.kind() == Kind::FLOAT) ok = false;
        return v.is_number() ? v.as_int() : 0;
    };
    bool ok = true;
    auto start = bound(e.start, ok), stop = bound(e.stop, ok), step_opt = bound(e.step, ok);
    if (!ok || !(obj.kind() == Kind::LIST || obj.is_string()))
        return Value::undefined(object_description(obj) + " cannot be sliced");
    int64_t step = step_opt.value_or(1);
    if (step == 0) fail(ErrorKind::VALUE, "slice step cannot be zero");
    std::vector<Value> chars;  // strings slice by code point
    bool ascii = obj.is_string() && is_ascii(obj.str());
    if (obj.is_string() && !ascii) chars = iterate(obj);
    int64_t n = obj.kind() == Kind::LIST ? static_cast<int64_t>(obj.list_size())
                : ascii                  ? static_cast<int64_t>(obj.str().size())
                                         : static_cast<int64_t>(chars.size());
    // Python's PySlice_AdjustIndices.
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
        if (!v) return dflt;
        int64_t i = *v < 0 ? *v + n : *v;
        if (i < 0) return step < 0 ? int64_t{-1} : int64_t{0};
        if (i >= n) return step < 0 ? n - 1 : n;
        return i;
    };
    int64_t lo = clamp(start, step < 0 ? n - 1 : 0), hi = clamp(stop, step < 0 ? -1 : n);
    std::vector<int64_t> picks;
    for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) picks.push_back(i);
    if (obj.kind() == Kind::LIST) {
        std::vector<Value> items;
        items.reserve(picks.size());
        for (int64_t i : picks) items.push_back(obj.list_at(static_cast<size_t>(i)));
        return Value::list(std::move(items), obj.is_tuple());
    }
    std::string out;
    if (ascii && step == 1) out = std::string(obj.str().substr(static_cast<size_t>(lo), hi > lo ? hi - lo : 0));
    else
        for (int64_t i : picks) out += ascii ? std::string(1, obj.str()[i]) : std::string(chars[i].str());
    return Value::string(std::move(out));
}

CallArgs Renderer::eval_args(const Arguments& a) {
    CallArgs args;
    args.positional.reserve(a.positional.size());
    for (const auto& p : a.positional) args.positional.push_back(eval(*p));
    for (const auto& [name, expr] : a.keyword) args.keyword.emplace_back(name, eval(*expr));
    if (a.star_args)
        for (Value& v : iterate(eval(*a.star_args))) args.positional.push_back(std::move(v));
    if (a.star_kwargs) {
        Value kw = eval(*a.star_kwargs);
        if (kw.kind() != Kind::DICT) fail(ErrorKind::TYPE, "argument after ** must be a mapping, not " + type_name(kw));
        kw.dict_for_each([&](const Value& k, const Value& v) { args.keyword.emplace_back(to_str(k), v); });
    }
    return args;
}

Value Renderer::call(const Value& callee, CallArgs& args) {
    require_defined(callee);
    Object* obj = callee.object();
    if (!obj || !obj->callable()) fail(ErrorKind::TYPE, "'" + type_name(callee) + "' object is not callable");
    return static_cast<Callable*>(obj)->call(*this, args);
}

Value Renderer::eval_call(const CallExpr& e) {
    try {
        if (e.callee->type == ExprType::GETATTR) {  // obj.method(...) without a bound-method object
            const auto& ga = static_cast<const GetAttrExpr&>(*e.callee);
            Value obj = eval(*ga.object);
            MethodKind kind = method_kind(obj, ga.name);
            if (kind == MethodKind::UNSAFE) fail_unsafe(obj, ga.name);
            if (kind == MethodKind::SAFE) {
                CallArgs args = eval_args(e.args);
                return call_method(*this, obj, ga.name, args);
            }
            Value callee = get_attr(obj, ga.name);
            CallArgs args = eval_args(e.args);
            return call(callee, args);
        }
        Value callee = eval(*e.callee);
        CallArgs args = eval_args(e.args);
        return call(callee, args);
    } catch (Error& err) {
        if (!err.line) err.line = e.line;
        throw;
    }
}

Value Renderer::eval_filter(const FilterExpr& e, const Value* operand) {
    try {
        Value v = operand ? *operand : eval(*e.operand);
        if (!e.fn) fail(ErrorKind::RUNTIME, "No filter named '" + e.name + "' found.");
        CallArgs args = eval_args(e.args);
        return e.fn(*this, v, args);
    } catch (Error& err) {
        if (!err.line) err.line = e.line;
        throw;
    }
}

Value Renderer::apply_filter(std::string_view name, const Value& operand, CallArgs& args) {
    FilterFn fn = find_filter(name);
    if (!fn) fail(ErrorKind::RUNTIME, "No filter named '" + std::string(name) + "' found.");
    return fn(*this, operand, args);
}

bool Renderer::apply_test(std::string_view name, const Value& operand, CallArgs& args) {
    TestFn fn = find_test(name);
    if (!fn) fail(ErrorKind::RUNTIME, "No test named '" + std::string(name) + "' found.");
    return fn(*this, operand, args);
}

Value Renderer::eval_compare(const CompareExpr& e) {
    Value left = eval(*e.first);
    for (const auto& [op, expr] : e.rest) {
        Value right = eval(*expr);
        bool ok = false;
        switch (op) {
        case Op::EQ: ok = equal(left, right); break;
        case Op::NE: ok = !equal(left, right); break;
        case Op::LT: ok = less(left, right, "<"); break;
        case Op::LE: ok = !less(right, left, "<="); break;
        case Op::GT: ok = less(right, left, ">"); break;
        case Op::GE: ok = !less(left, right, ">="); break;
        case Op::IN: ok = contains(right, left); break;
        case Op::NOT_IN: ok = !contains(right, left); break;
        default: break;
        }
        if (!ok) return Value::boolean(false);
        left = std::move(right);
    }
    return Value::boolean(true);
}

Value Renderer::eval_binary(const BinaryExpr& e) {
    Value left = eval(*e.left);
    if (e.op == Op::AND) return truthy(left) ? eval(*e.right) : left;
    if (e.op == Op::OR) return truthy(left) ? left : eval(*e.right);
    Value right = eval(*e.right);
    try {
        return binary_op(e.op, left, right);
    } catch (Error& err) {
        if (!err.line) err.line = e.line;
        throw;
    }
}

Value Renderer::eval(const Expr& e) {
    budget_step();
    budget_check_stack();
    switch (e.type) {
    case ExprType::CONST: return static_cast<const ConstExpr&>(e).value;
    case ExprType::NAME: return lookup(static_cast<const NameExpr&>(e).slot);
    case ExprType::GETATTR: {
        const auto& g = static_cast<const GetAttrExpr&>(e);
        return get_attr(eval(*g.object), g.name);
    }
    case ExprType::GETITEM: {
        const auto& g = static_cast<const GetItemExpr&>(e);
        Value obj = eval(*g.object);
        return get_item(obj, eval(*g.index));
    }
    case ExprType::SLICE: return eval_slice(static_cast<const SliceExpr&>(e));
    case ExprType::CALL: return eval_call(static_cast<const CallExpr&>(e));
    case ExprType::FILTER: return eval_filter(static_cast<const FilterExpr&>(e), nullptr);
    case ExprType::TEST: {
        const auto& t = static_cast<const TestExpr&>(e);
        Value v = eval(*t.operand);
        if (!t.fn) throw Error(ErrorKind::RUNTIME, "No test named '" + t.name + "' found.", t.line);
        CallArgs args = eval_args(t.args);
        return Value::boolean(t.fn(*this, v, args));
    }
    case ExprType::UNARY: {
        const auto& u = static_cast<const UnaryExpr&>(e);
        Value v = eval(*u.operand);
        if (u.op == Op::NOT) return Value::boolean(!truthy(v));
        require_defined(v);
        if (!v.is_number()) throw Error(ErrorKind::TYPE, std::string("bad operand type for unary ") + (u.op == Op::NEG ? "-" : "+") + ": '" + type_name(v) + "'", e.line);
        if (u.op == Op::POS) return v.kind() == Kind::FLOAT ? v : Value::integer(v.as_int());
        if (v.kind() == Kind::FLOAT) return Value::number(-v.as_float());
        if (v.as_int() == INT64_MIN) fail(ErrorKind::VALUE, "integer result too large");
        return Value::integer(-v.as_int());
    }
    case ExprType::BINARY: return eval_binary(static_cast<const BinaryExpr&>(e));
    case ExprType::CONCAT: {
        std::string s;
        for (const auto& part : static_cast<const ConcatExpr&>(e).parts) append_str(s, eval(*part));
        return Value::string(std::move(s));
    }
    case ExprType::COMPARE: return eval_compare(static_cast<const CompareExpr&>(e));
    case ExprType::CONDITIONAL: {
        const auto& c = static_cast<const ConditionalExpr&>(e);
        if (truthy(eval(*c.condition))) return eval(*c.then);
        if (c.otherwise) return eval(*c.otherwise);
        return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
    }
    case ExprType::LIST: {
        const auto& l = static_cast<const ListExpr&>(e);
        std::vector<Value> items;
        items.reserve(l.items.size());
        for (const auto& item : l.items) items.push_back(eval(*item));
        return Value::list(std::move(items), l.tuple);
    }
    case ExprType::DICT: {
        std::vector<std::pair<Value, Value>> items;
        for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
            Value key = eval(*k), value = eval(*v);
            bool replaced = false;
            for (auto& [ek, ev] : items)
                if (!replaced && equal(ek, key)) ev = value, replaced = true;
            if (!replaced) items.emplace_back(std::move(key), std::move(value));
        }
        return Value::dict(std::move(items));
    }
    }
    fail(ErrorKind::RUNTIME, "unknown expression");
}

}  // namespace jinja
