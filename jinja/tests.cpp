// Jinja's builtin tests (`x is defined`, `x is string`, `x is divisibleby 3`, ...), jinja2/tests.py 3.1,
// including Undefined's quirks (it is iterable and a sequence, never a mapping).
#include "jinja/render_impl.h"
#include "jinja/unicode_impl.h"

namespace jinja {

namespace {

const Value& other(const CallArgs& a, const char* test) {
    const Value* v = a.get(0, "other");
    if (!v) fail(ErrorKind::TYPE, std::string(test) + "() missing 1 required positional argument");
    return *v;
}
bool is_int(const Value& v) { return v.kind() == Kind::INT; }

bool t_defined(Renderer&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Renderer&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Renderer&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Renderer&, const Value& v, CallArgs&) { return v.kind() == Kind::BOOL; }
bool t_false(Renderer&, const Value& v, CallArgs&) { return v.kind() == Kind::BOOL && !v.as_bool(); }
bool t_true(Renderer&, const Value& v, CallArgs&) { return v.kind() == Kind::BOOL && v.as_bool(); }
bool t_integer(Renderer&, const Value& v, CallArgs&) { return is_int(v); }
bool t_float(Renderer&, const Value& v, CallArgs&) { return v.kind() == Kind::FLOAT; }
bool t_number(Renderer&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_string(Renderer&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_mapping(Renderer&, const Value& v, CallArgs&) { return v.kind() == Kind::DICT; }
bool t_iterable(Renderer&, const Value& v, CallArgs&) {
    return v.is_undefined() || v.is_string() || v.kind() == Kind::LIST || v.kind() == Kind::DICT;
}
bool t_sequence(Renderer& r, const Value& v, CallArgs& a) { return t_iterable(r, v, a); }  // len() and [] both work
bool t_callable(Renderer&, const Value& v, CallArgs&) { return v.object() && v.object()->callable(); }
bool t_escaped(Renderer&, const Value& v, CallArgs&) { return v.is_safe(); }

bool t_odd(Renderer&, const Value& v, CallArgs&) {
    require_defined(v);
    if (!v.is_number() || v.kind() == Kind::FLOAT) fail(ErrorKind::TYPE, "odd: not an integer");
    return (v.as_int() & 1) != 0;
}
bool t_even(Renderer& r, const Value& v, CallArgs& a) { return !t_odd(r, v, a); }

bool t_divisibleby(Renderer&, const Value& v, CallArgs& a) {
    const Value* n = a.get(0, "num");
    if (!n) fail(ErrorKind::TYPE, "divisibleby() missing 1 required positional argument: 'num'");
    return equal(binary_op(Op::MOD, v, *n), Value::integer(0));
}

bool t_eq(Renderer&, const Value& v, CallArgs& a) { return equal(v, other(a, "eq")); }
bool t_ne(Renderer&, const Value& v, CallArgs& a) { return !equal(v, other(a, "ne")); }
bool t_lt(Renderer&, const Value& v, CallArgs& a) { return less(v, other(a, "lt"), "<"); }
bool t_le(Renderer&, const Value& v, CallArgs& a) { return !less(other(a, "le"), v, "<="); }
bool t_gt(Renderer&, const Value& v, CallArgs& a) { return less(other(a, "gt"), v, ">"); }
bool t_ge(Renderer&, const Value& v, CallArgs& a) { return !less(v, other(a, "ge"), ">="); }
bool t_in(Renderer&, const Value& v, CallArgs& a) {
    const Value* seq = a.get(0, "seq");
    if (!seq) fail(ErrorKind::TYPE, "in() missing 1 required positional argument: 'seq'");
    return contains(*seq, v);
}

// Python's `is`: singletons and small ints by value, containers and objects by identity.
bool t_sameas(Renderer&, const Value& v, CallArgs& a) {
    const Value& o = other(a, "sameas");
    if (v.kind() != o.kind()) return false;
    switch (v.kind()) {
    case Kind::NONE: return true;
    case Kind::BOOL: return v.as_bool() == o.as_bool();
    case Kind::INT: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Kind::UNDEFINED:
    case Kind::FLOAT: return false;
    default: return v.identity() == o.identity();
    }
}

template <bool UPPER>
bool t_case(Renderer& r, const Value& v, CallArgs&) {
    CallArgs none;
    return truthy(call_method(r, Value::string(to_str(v)), UPPER ? "isupper" : "islower", none));
}

bool t_filter(Renderer&, const Value& v, CallArgs&) { return v.is_string() && find_filter(v.str()) != nullptr; }
bool t_test(Renderer&, const Value& v, CallArgs&) { return v.is_string() && find_test(v.str()) != nullptr; }

struct NamedTest {
    const char* name;
    TestFn fn;
};
const NamedTest TESTS[] = {
    {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
    {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"escaped", t_escaped}, {"even", t_even}, {"false", t_false},
    {"filter", t_filter}, {"float", t_float}, {"ge", t_ge}, {">=", t_ge}, {"gt", t_gt}, {"greaterthan", t_gt},
    {">", t_gt}, {"in", t_in}, {"integer", t_integer}, {"iterable", t_iterable}, {"le", t_le}, {"<=", t_le},
    {"lower", t_case<false>}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"mapping", t_mapping},
    {"ne", t_ne}, {"!=", t_ne}, {"none", t_none}, {"number", t_number}, {"odd", t_odd}, {"sameas", t_sameas},
    {"sequence", t_sequence}, {"string", t_string}, {"test", t_test}, {"true", t_true}, {"undefined", t_undefined},
    {"upper", t_case<true>},
};

}  // namespace

TestFn find_test(std::string_view name) {
    for (const NamedTest& t : TESTS)
        if (name == t.name) return t.fn;
    return nullptr;
}

}  // namespace jinja
