// Global functions templates call: Jinja's range/namespace/dict/joiner and transformers' additions,
// raise_exception(msg) and strftime_now(fmt) (from the renderer's clock, C locale, as Python's strftime).
#include "jinja/render_impl.h"

#include <clocale>
#include <locale.h>

namespace jinja {

namespace {

constexpr int64_t MAX_RANGE = 100000;  // the sandbox's limit (jinja2.sandbox.MAX_RANGE)

class BuiltinFunction : public Callable {
public:
    BuiltinFunction(std::string name, Value (*fn)(Renderer&, CallArgs&)) : name_(std::move(name)), fn_(fn) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    std::string repr() const override { return "<built-in function " + name_ + ">"; }
    Value call(Renderer& r, CallArgs& args) const override { return fn_(r, args); }

private:
    std::string name_;
    Value (*fn_)(Renderer&, CallArgs&);
};

int64_t int_arg(const Value& v, const char* function) {
    if (!v.is_number() || v.kind() == Kind::FLOAT)
        fail(ErrorKind::TYPE, std::string(function) + ": '" + type_name(v) + "' object cannot be interpreted as an integer");
    return v.as_int();
}

Value g_range(Renderer&, CallArgs& a) {
    if (!a.keyword.empty()) fail(ErrorKind::TYPE, "range() takes no keyword arguments");
    size_t n = a.positional.size();
    if (n < 1 || n > 3) fail(ErrorKind::TYPE, "range expected 1 to 3 arguments, got " + std::to_string(n));
    int64_t start = n == 1 ? 0 : int_arg(a.positional[0], "range");
    int64_t stop = int_arg(a.positional[n == 1 ? 0 : 1], "range");
    int64_t step = n == 3 ? int_arg(a.positional[2], "range") : 1;
    if (step == 0) fail(ErrorKind::VALUE, "range() arg 3 must not be zero");
    std::vector<Value> items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (static_cast<int64_t>(items.size()) >= MAX_RANGE)
            fail(ErrorKind::RUNTIME, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        items.push_back(Value::integer(i));
    }
    return Value::list(std::move(items));
}

Value g_namespace(Renderer& r, CallArgs& a) {
    auto ns = r.new_namespace();
    for (const Value& p : a.positional) {
        if (p.kind() != Kind::DICT) fail(ErrorKind::TYPE, "namespace() positional argument must be a mapping");
        p.dict_for_each([&](const Value& k, const Value& v) { ns->set(to_str(k), v); });
    }
    for (const auto& [k, v] : a.keyword) ns->set(k, v);
    return Value::object(ns);
}

Value g_dict(Renderer&, CallArgs& a) {
    std::vector<std::pair<Value, Value>> items;
    auto put = [&](Value k, Value v) {
        for (auto& [ek, ev] : items)
            if (equal(ek, k)) {
                ev = std::move(v);
                return;
            }
        items.emplace_back(std::move(k), std::move(v));
    };
    if (a.positional.size() > 1) fail(ErrorKind::TYPE, "dict expected at most 1 argument");
    if (!a.positional.empty()) {
        const Value& src = a.positional[0];
        if (src.kind() == Kind::DICT) {
            src.dict_for_each([&](const Value& k, const Value& v) { put(k, v); });
        } else {
            for (const Value& pair : iterate(src)) {
                std::vector<Value> kv = iterate(pair);
                if (kv.size() != 2) fail(ErrorKind::VALUE, "dictionary update sequence element has wrong length");
                put(kv[0], kv[1]);
            }
        }
    }
    for (const auto& [k, v] : a.keyword) put(Value::string(k), v);
    return Value::dict(std::move(items));
}

Value g_raise_exception(Renderer&, CallArgs& a) {
    std::string message = a.positional.empty() ? "" : to_str(a.positional[0]);
    throw Error(ErrorKind::RAISED, message);
}

// Python's datetime.strftime: C strftime in the C locale, plus %f (microseconds; our clock has
// whole seconds) and an empty %z/%Z (the datetime is naive).
Value g_strftime_now(Renderer& r, CallArgs& a) {
    a.check("strftime_now", {"format"});
    const Value* f = a.get(0, "format");
    if (!f || !f->is_string()) fail(ErrorKind::TYPE, "strftime_now() argument must be str");
    std::string fmt;
    std::string_view src = f->str();
    for (size_t i = 0; i < src.size(); i++) {
        if (src[i] == '%' && i + 1 < src.size()) {
            char c = src[i + 1];
            if (c == 'f') fmt += "000000";
            else if (c != 'z' && c != 'Z') fmt += src.substr(i, 2);
            i++;
        } else {
            fmt += src[i];
        }
    }
    if (fmt.empty()) return Value::string("");
    std::tm now = r.clock()();
    static locale_t c_locale = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
    std::string out(256 + fmt.size() * 8, '\0');
    fmt += '\x01';  // a sentinel so that an empty expansion is not mistaken for an error
    size_t n = strftime_l(out.data(), out.size(), fmt.c_str(), &now, c_locale);
    if (n == 0) fail(ErrorKind::VALUE, "strftime_now: format expands too far");
    out.resize(n - 1);
    return Value::string(std::move(out));
}

// joiner(sep=", "): returns "" on its first call and `sep` after.
class Joiner : public Callable {
public:
    explicit Joiner(std::string sep) : sep_(std::move(sep)) {}
    std::string type_name() const override { return "Joiner"; }
    Value call(Renderer&, CallArgs&) const override {
        if (!used_) {
            used_ = true;
            return Value::string("");
        }
        return Value::string(sep_);
    }

private:
    std::string sep_;
    mutable bool used_ = false;
};

Value g_joiner(Renderer&, CallArgs& a) {
    a.check("joiner", {"sep"});
    const Value* sep = a.get(0, "sep");
    return Value::object(std::make_shared<Joiner>(sep ? to_str(*sep) : ", "));
}

}  // namespace

Value make_function(std::string name, Value (*fn)(Renderer&, CallArgs&)) {
    return Value::object(std::make_shared<BuiltinFunction>(std::move(name), fn));
}

void add_builtin_globals(std::vector<std::pair<std::string, Value>>& out) {
    const std::pair<const char*, Value (*)(Renderer&, CallArgs&)> functions[] = {
        {"range", g_range},   {"namespace", g_namespace},       {"dict", g_dict},
        {"joiner", g_joiner}, {"raise_exception", g_raise_exception}, {"strftime_now", g_strftime_now},
    };
    for (const auto& [name, fn] : functions) out.emplace_back(name, make_function(name, fn));
}

}  // namespace jinja
