// Values: construction, access, and the Python builtins templates lean on (truth, ==, <, str, repr,
// len, iter), with Python's exact output formats.
#include "jinja/budget_impl.h"
#include "jinja/unicode_impl.h"
#include "jinja/value_impl.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace jinja {

void fail(ErrorKind kind, std::string message) { throw Error(kind, std::move(message)); }

ListHeap::~ListHeap() = default;
DictHeap::~DictHeap() = default;

Value Value::undefined(std::string hint, ErrorKind kind) {
    Value v;
    v.heap_ = std::make_shared<UndefinedHeap>(std::move(hint), kind);
    return v;
}
Value Value::none() {
    Value v;
    v.kind_ = Kind::NONE;
    return v;
}
Value Value::boolean(bool b) {
    Value v;
    v.kind_ = Kind::BOOL;
    v.b_ = b;
    return v;
}
Value Value::integer(int64_t i) {
    Value v;
    v.kind_ = Kind::INT;
    v.i_ = i;
    return v;
}
Value Value::number(double f) {
    Value v;
    v.kind_ = Kind::FLOAT;
    v.f_ = f;
    return v;
}
Value Value::string(std::string s, bool safe) {
    Value v;
    v.kind_ = Kind::STRING;
    v.flags_ = safe ? SAFE : 0;
    budget_allocate(s.size() + sizeof(StrHeap));
    v.heap_ = std::make_shared<StrHeap>(std::move(s));
    return v;
}
Value Value::borrowed_string(const std::string& s) {
    Value v;
    v.kind_ = Kind::STRING;
    v.flags_ = BORROWED;
    v.bstr_ = &s;
    return v;
}
namespace {

int checked_depth(int child_depth) {
    if (child_depth + 1 > MAX_VALUE_DEPTH) fail(ErrorKind::VALUE, "value nested too deeply");
    return child_depth + 1;
}

}  // namespace

Value Value::list(std::vector<Value> items, bool tuple) {
    Value v;
    v.kind_ = Kind::LIST;
    v.flags_ = tuple ? TUPLE : 0;
    budget_allocate(items.size() * sizeof(Value) + sizeof(ListHeap));
    auto heap = std::make_shared<ListHeap>();
    int deepest = 0;
    for (const Value& item : items) deepest = std::max(deepest, item.depth());
    heap->depth = checked_depth(deepest);
    heap->items = std::move(items);
    v.heap_ = std::move(heap);
    return v;
}
Value Value::dict(std::vector<std::pair<Value, Value>> items) {
    Value v;
    v.kind_ = Kind::DICT;
    budget_allocate(items.size() * 2 * sizeof(Value) + sizeof(DictHeap));
    auto heap = std::make_shared<DictHeap>();
    int deepest = 0;
    for (const auto& [k, x] : items) deepest = std::max({deepest, k.depth(), x.depth()});
    heap->depth = checked_depth(deepest);
    heap->items = std::move(items);
    v.heap_ = std::move(heap);
    return v;
}

int Value::depth() const {
    if (flags_ & BORROWED) return 0;
    if (kind_ == Kind::LIST) return list_heap().depth;
    if (kind_ == Kind::DICT) return dict_heap().depth;
    return 0;
}
Value Value::object(std::shared_ptr<Object> obj) {
    Value v;
    v.kind_ = Kind::OBJECT;
    v.heap_ = std::move(obj);
    return v;
}

Value Value::from_json(const Json& j) {
    Value v;
    switch (j.type()) {
    case Json::value_t::null: return none();
    case Json::value_t::boolean: return boolean(j.get<bool>());
    case Json::value_t::number_integer: return integer(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
        uint64_t u = j.get<uint64_t>();
        return u > static_cast<uint64_t>(INT64_MAX) ? number(static_cast<double>(u)) : integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return number(j.get<double>());
    case Json::value_t::string: return borrowed_string(j.get_ref<const std::string&>());
    case Json::value_t::array: v.kind_ = Kind::LIST; break;
    case Json::value_t::object: v.kind_ = Kind::DICT; break;
    default: return none();  // binary / discarded: not produced by JSON text
    }
    v.flags_ = BORROWED;
    v.bjson_ = &j;
    return v;
}

std::string_view Value::str() const {
    if (flags_ & BORROWED) return *bstr_;
    return static_cast<const StrHeap&>(*heap_).s;
}

size_t Value::list_size() const { return (flags_ & BORROWED) ? bjson_->size() : list_heap().items.size(); }

Value Value::list_at(size_t i) const {
    if (flags_ & BORROWED) return from_json((*bjson_)[i]);
    return list_heap().items[i];
}

size_t Value::dict_size() const { return (flags_ & BORROWED) ? bjson_->size() : dict_heap().items.size(); }

bool Value::dict_find(std::string_view key, Value& out) const {
    if (flags_ & BORROWED) {
        for (auto it = bjson_->begin(); it != bjson_->end(); ++it) {
            if (it.key() == key) {
                out = from_json(it.value());
                return true;
            }
        }
        return false;
    }
    for (const auto& [k, v] : dict_heap().items) {
        if (k.is_string() && k.str() == key) {
            out = v;
            return true;
        }
    }
    return false;
}

bool Value::dict_find(const Value& key, Value& out) const {
    if (key.is_string()) return dict_find(key.str(), out);
    if (flags_ & BORROWED) return false;  // JSON objects have string keys only
    for (const auto& [k, v] : dict_heap().items) {
        if (equal(k, key)) {
            out = v;
            return true;
        }
    }
    return false;
}

Object* Value::object() const { return kind_ == Kind::OBJECT ? static_cast<Object*>(heap_.get()) : nullptr; }

const UndefinedHeap* Value::undefined_info() const {
    return kind_ == Kind::UNDEFINED ? static_cast<const UndefinedHeap*>(heap_.get()) : nullptr;
}

const void* Value::identity() const {
    if (flags_ & BORROWED) return kind_ == Kind::STRING ? static_cast<const void*>(bstr_) : bjson_;
    return heap_.get();
}

void fail_undefined(const Value& v) {
    const UndefinedHeap* info = v.undefined_info();
    if (!info) fail(ErrorKind::UNDEFINED, "value is undefined");
    fail(info->kind, info->hint);
}

bool truthy(const Value& v) {
    switch (v.kind()) {
    case Kind::UNDEFINED:
    case Kind::NONE: return false;
    case Kind::BOOL: return v.as_bool();
    case Kind::INT: return v.as_int() != 0;
    case Kind::FLOAT: return v.as_float() != 0.0;
    case Kind::STRING: return !v.str().empty();
    case Kind::LIST: return v.list_size() != 0;
    case Kind::DICT: return v.dict_size() != 0;
    case Kind::OBJECT: return true;
    }
    return false;
}

namespace {

// Recursion guard for values borrowed from deeply nested JSON.
struct DepthGuard {
    static int& level() {
        thread_local int n = 0;
        return n;
    }
    DepthGuard() {
        budget_step();
        budget_check_stack();
        if (++level() > MAX_VALUE_DEPTH) {
            level()--;
            fail(ErrorKind::VALUE, "value nested too deeply");
        }
    }
    ~DepthGuard() { level()--; }
};

}  // namespace

bool equal(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.kind() == Kind::FLOAT || b.kind() == Kind::FLOAT) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
    case Kind::UNDEFINED:
    case Kind::NONE: return true;
    case Kind::STRING: return a.str() == b.str();
    case Kind::LIST: {
        DepthGuard guard;
        if (a.is_tuple() != b.is_tuple() || a.list_size() != b.list_size()) return false;
        for (size_t i = 0; i < a.list_size(); i++)
            if (!equal(a.list_at(i), b.list_at(i))) return false;
        return true;
    }
    case Kind::DICT: {
        DepthGuard guard;
        if (a.dict_size() != b.dict_size()) return false;
        bool same = true;
        a.dict_for_each([&](const Value& k, const Value& v) {
            Value other;
            if (same && (!b.dict_find(k, other) || !equal(v, other))) same = false;
        });
        return same;
    }
    case Kind::OBJECT: return a.identity() == b.identity();
    default: return false;
    }
}

bool less(const Value& a, const Value& b, const char* op) {
    budget_step();  // sorting and min/max compare many times per expression
    require_defined(a);
    require_defined(b);
    if (a.is_number() && b.is_number()) {
        if (a.kind() == Kind::FLOAT || b.kind() == Kind::FLOAT) return a.as_float() < b.as_float();
        return a.as_int() < b.as_int();
    }
    if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order = code point order
    if (a.kind() == Kind::LIST && b.kind() == Kind::LIST && a.is_tuple() == b.is_tuple()) {
        DepthGuard guard;
        size_t n = std::min(a.list_size(), b.list_size());
        for (size_t i = 0; i < n; i++) {
            Value x = a.list_at(i), y = b.list_at(i);
            if (!equal(x, y)) return less(x, y, op);
        }
        return a.list_size() < b.list_size();
    }
    fail(ErrorKind::TYPE, std::string("'") + op + "' not supported between instances of '" + type_name(a) +
                              "' and '" + type_name(b) + "'");
}

std::string type_name(const Value& v) {
    switch (v.kind()) {
    case Kind::UNDEFINED: return "Undefined";
    case Kind::NONE: return "NoneType";
    case Kind::BOOL: return "bool";
    case Kind::INT: return "int";
    case Kind::FLOAT: return "float";
    case Kind::STRING: return v.is_safe() ? "Markup" : "str";
    case Kind::LIST: return v.is_tuple() ? "tuple" : "list";
    case Kind::DICT: return "dict";
    case Kind::OBJECT: return v.object()->type_name();
    }
    return "object";
}

std::string object_description(const Value& v) {
    if (v.is_none()) return "None";
    return "'" + type_name(v) + " object'";
}

void append_float_repr(std::string& out, double f) {
    if (std::isnan(f)) {
        out += "nan";
        return;
    }
    if (std::isinf(f)) {
        out += f < 0 ? "-inf" : "inf";
        return;
    }
    // Shortest round-trip digits, then Python's layout: fixed notation when the decimal exponent is
    // in [-4, 16), scientific otherwise ("1e+16", "1.5e-05"), fixed always showing a fraction.
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
    std::string_view sci(buf, res.ptr - buf);
    size_t e_pos = sci.find('e');
    std::string mantissa(sci.substr(0, e_pos));
    int exponent = std::stoi(std::string(sci.substr(e_pos + 1)));
    bool negative = mantissa[0] == '-';
    if (negative) mantissa.erase(0, 1);
    std::string digits;
    for (char c : mantissa)
        if (c != '.') digits += c;
    if (negative) out += '-';
    if (exponent < -4 || exponent >= 16) {
        out += digits[0];
        if (digits.size() > 1) out += "." + digits.substr(1);
        char exp_buf[16];
        std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        out += exp_buf;
    } else if (exponent < 0) {
        out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else {
        size_t int_digits = static_cast<size_t>(exponent) + 1;
        if (digits.size() <= int_digits) {
            out += digits + std::string(int_digits - digits.size(), '0') + ".0";
        } else {
            out += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
        }
    }
}

namespace {

void append_string_repr(std::string& out, std::string_view s) {
    bool has_single = s.find('\'') != std::string_view::npos;
    bool has_double = s.find('"') != std::string_view::npos;
    char quote = has_single && !has_double ? '"' : '\'';
    out += quote;
    for (size_t i = 0; i < s.size();) {
        const size_t at = i;
        char32_t cp = utf8_next(s, i);
        if (cp >= 0x80 && i == at + 1) {  // a byte that is not UTF-8 (the server's literal-span marks) stays as it is
            out += s[at];
            continue;
        }
        if (cp == static_cast<char32_t>(quote) || cp == '\\') {
            out += '\\';
            out += static_cast<char>(cp);
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (!py_isprintable(cp)) {
            char buf[16];
            if (cp < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
            else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
            else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
            out += buf;
        } else {
            utf8_append(out, cp);
        }
    }
    out += quote;
}

}  // namespace

void append_str(std::string& out, const Value& v) {
    switch (v.kind()) {
    case Kind::UNDEFINED: return;
    case Kind::STRING: out += v.str(); return;
    case Kind::INT: out += std::to_string(v.as_int()); return;
    default: append_repr(out, v);
    }
}

void append_repr(std::string& out, const Value& v) {
    switch (v.kind()) {
    case Kind::UNDEFINED: out += "Undefined"; return;
    case Kind::NONE: out += "None"; return;
    case Kind::BOOL: out += v.as_bool() ? "True" : "False"; return;
    case Kind::INT: out += std::to_string(v.as_int()); return;
    case Kind::FLOAT: append_float_repr(out, v.as_float()); return;
    case Kind::STRING:
        budget_reserve(out.size() + v.str().size());  // a list repeating one huge string prints it many times
        if (v.is_safe()) out += "Markup(";
        append_string_repr(out, v.str());
        if (v.is_safe()) out += ")";
        return;
    case Kind::LIST: {
        DepthGuard guard;
        out += v.is_tuple() ? '(' : '[';
        for (size_t i = 0; i < v.list_size(); i++) {
            budget_step();
            if (i) out += ", ";
            append_repr(out, v.list_at(i));
        }
        if (v.is_tuple() && v.list_size() == 1) out += ',';
        out += v.is_tuple() ? ')' : ']';
        return;
    }
    case Kind::DICT: {
        DepthGuard guard;
        out += '{';
        bool first = true;
        v.dict_for_each([&](const Value& k, const Value& val) {
            budget_step();
            if (!first) out += ", ";
            first = false;
            append_repr(out, k);
            out += ": ";
            append_repr(out, val);
        });
        out += '}';
        return;
    }
    case Kind::OBJECT: {
        DepthGuard guard;  // a namespace may contain itself
        out += v.object()->repr();
        return;
    }
    }
}

std::string to_str(const Value& v) {
    if (v.is_string()) return std::string(v.str());
    std::string out;
    append_str(out, v);
    return out;
}

size_t length(const Value& v) {
    switch (v.kind()) {
    case Kind::UNDEFINED: return 0;
    case Kind::STRING: return utf8_length(v.str());
    case Kind::LIST: return v.list_size();
    case Kind::DICT: return v.dict_size();
    default: fail(ErrorKind::TYPE, "object of type '" + type_name(v) + "' has no len()");
    }
}

std::vector<Value> iterate(const Value& v) {
    std::vector<Value> items;
    switch (v.kind()) {
    case Kind::UNDEFINED: return items;
    case Kind::STRING: {
        std::string_view s = v.str();
        budget_step(s.size());
        for (size_t i = 0; i < s.size();) {
            size_t start = i;
            utf8_next(s, i);
            items.push_back(Value::string(std::string(s.substr(start, i - start))));
        }
        return items;
    }
    case Kind::LIST:
        budget_step(v.list_size());
        items.reserve(v.list_size());
        for (size_t i = 0; i < v.list_size(); i++) items.push_back(v.list_at(i));
        return items;
    case Kind::DICT:
        budget_step(v.dict_size());
        items.reserve(v.dict_size());
        v.dict_for_each([&](const Value& k, const Value&) { items.push_back(k); });
        return items;
    default: fail(ErrorKind::TYPE, "'" + type_name(v) + "' object is not iterable");
    }
}

}  // namespace jinja
