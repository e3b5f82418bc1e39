// Methods of str, list and dict as templates call them (`s.split(',')`, `d.get('k', 0)`, `d.items()`),
// with Python's semantics. The immutable sandbox refuses the mutating ones (list.append, dict.pop, ...).
#include "jinja/render_impl.h"
#include "jinja/unicode_impl.h"

#include <algorithm>

namespace jinja {

namespace {

using MethodFn = Value (*)(Renderer&, const Value& self, CallArgs& args);
struct Method {
    const char* name;
    MethodFn fn;  // nullptr: a Python method we do not implement
};

Value str_value(std::string s) { return Value::string(std::move(s)); }

std::string_view str_arg(const CallArgs& a, size_t i, const char* name, const char* method) {
    const Value* v = a.get(i, name);
    if (!v) fail(ErrorKind::TYPE, std::string(method) + "() missing required argument '" + name + "'");
    if (!v->is_string()) fail(ErrorKind::TYPE, std::string(method) + "() argument must be str, not " + type_name(*v));
    return v->str();
}

int64_t int_arg(const CallArgs& a, size_t i, const char* name, int64_t fallback) {
    const Value* v = a.get(i, name);
    if (!v || v->is_none()) return fallback;
    if (!v->is_number() || v->kind() == Kind::FLOAT)
        fail(ErrorKind::TYPE, "'" + type_name(*v) + "' object cannot be interpreted as an integer");
    return v->as_int();
}

// strip/lstrip/rstrip(chars=None)
template <Strip SIDE>
Value m_strip(Renderer&, const Value& self, CallArgs& a) {
    a.check("strip", {"chars"});
    const Value* chars = a.get(0, "chars");
    bool given = chars && !chars->is_none();
    if (given && !chars->is_string()) fail(ErrorKind::TYPE, "strip arg must be None or str");
    return str_value(std::string(py_strip(self.str(), given ? chars->str() : std::string_view{}, given, SIDE)));
}

// split/rsplit(sep=None, maxsplit=-1)
std::vector<Value> split(std::string_view s, const CallArgs& a, bool from_right) {
    a.check(from_right ? "rsplit" : "split", {"sep", "maxsplit"});
    const Value* sep_v = a.get(0, "sep");
    int64_t max = int_arg(a, 1, "maxsplit", -1);
    std::vector<std::string> parts;
    if (sep_v && !sep_v->is_none()) {
        if (!sep_v->is_string()) fail(ErrorKind::TYPE, "must be str or None, not " + type_name(*sep_v));
        std::string_view sep = sep_v->str();
        if (sep.empty()) fail(ErrorKind::VALUE, "empty separator");
        if (!from_right) {
            size_t start = 0, at;
            while ((max < 0 || static_cast<int64_t>(parts.size()) < max) && (at = s.find(sep, start)) != std::string_view::npos) {
                parts.emplace_back(s.substr(start, at - start));
                start = at + sep.size();
            }
            parts.emplace_back(s.substr(start));
        } else {
            size_t end = s.size(), at;
            while ((max < 0 || static_cast<int64_t>(parts.size()) < max) && end >= sep.size() &&
                   (at = s.rfind(sep, end - sep.size())) != std::string_view::npos) {
                parts.emplace_back(s.substr(at + sep.size(), end - at - sep.size()));
                end = at;
            }
            parts.emplace_back(s.substr(0, end));
            std::reverse(parts.begin(), parts.end());
        }
    } else {  // runs of whitespace, no empty parts
        std::vector<std::pair<size_t, size_t>> words;
        for (size_t i = 0; i < s.size();) {
            size_t start = i;
            if (py_isspace(utf8_next(s, i))) continue;
            size_t end = i;
            while (end < s.size()) {
                size_t next = end;
                if (py_isspace(utf8_next(s, next))) break;
                end = next;
            }
            words.emplace_back(start, end);
            i = end;
        }
        if (max >= 0 && static_cast<int64_t>(words.size()) > max + 1) {
            if (!from_right) {  // the last part runs to the end, trailing whitespace included
                size_t tail = words[max].first;
                words.resize(max);
                words.emplace_back(tail, s.size());
            } else {
                size_t head_end = words[words.size() - max - 1].second;
                words.erase(words.begin(), words.end() - max);
                words.insert(words.begin(), {0, head_end});
            }
        }
        for (auto [b, e] : words) parts.emplace_back(s.substr(b, e - b));
    }
    std::vector<Value> out;
    out.reserve(parts.size());
    for (auto& p : parts) out.push_back(str_value(std::move(p)));
    return out;
}

Value m_split(Renderer&, const Value& self, CallArgs& a) { return Value::list(split(self.str(), a, false)); }
Value m_rsplit(Renderer&, const Value& self, CallArgs& a) { return Value::list(split(self.str(), a, true)); }

Value m_splitlines(Renderer&, const Value& self, CallArgs& a) {
    a.check("splitlines", {"keepends"});
    const Value* keep_v = a.get(0, "keepends");
    bool keep = keep_v && truthy(*keep_v);
    std::string_view s = self.str();
    std::vector<Value> out;
    size_t start = 0;
    for (size_t i = 0; i < s.size();) {
        size_t at = i;
        char32_t cp = utf8_next(s, i);
        bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) || cp == 0x85 ||
                   cp == 0x2028 || cp == 0x2029;
        if (!brk) continue;
        if (cp == '\r' && i < s.size() && s[i] == '\n') i++;
        out.push_back(str_value(std::string(s.substr(start, (keep ? i : at) - start))));
        start = i;
    }
    if (start < s.size()) out.push_back(str_value(std::string(s.substr(start))));
    return Value::list(std::move(out));
}

// startswith/endswith(prefix or tuple of prefixes, start=None, end=None), positions in code points.
template <bool START>
Value m_affix(Renderer&, const Value& self, CallArgs& a) {
    a.check(START ? "startswith" : "endswith", {"prefix", "start", "end"});
    const Value* p = a.get(0, "prefix");
    if (!p) fail(ErrorKind::TYPE, "startswith/endswith() takes at least 1 argument (0 given)");
    std::string_view s = self.str();
    if (a.get(1, "start") || a.get(2, "end")) {
        size_t n = utf8_length(s);
        auto pos = [&](size_t i, const char* name, int64_t dflt) {
            int64_t v = int_arg(a, i, name, dflt);
            if (v < 0) v = std::max<int64_t>(0, v + static_cast<int64_t>(n));
            return utf8_offset(s, static_cast<size_t>(std::min<int64_t>(v, n)));
        };
        size_t b = pos(1, "start", 0), e = pos(2, "end", static_cast<int64_t>(n));
        s = b <= e ? s.substr(b, e - b) : std::string_view{};
    }
    std::vector<Value> options = p->kind() == Kind::LIST && p->is_tuple() ? iterate(*p) : std::vector<Value>{*p};
    for (const Value& o : options) {
        if (!o.is_string()) fail(ErrorKind::TYPE, std::string(START ? "startswith" : "endswith") + " first arg must be str or a tuple of str, not " + type_name(o));
        std::string_view x = o.str();
        if (x.size() <= s.size() && (START ? s.substr(0, x.size()) : s.substr(s.size() - x.size())) == x) return Value::boolean(true);
    }
    return Value::boolean(false);
}

Value m_replace(Renderer&, const Value& self, CallArgs& a) {
    a.check("replace", {"old", "new", "count"});
    std::string_view s = self.str(), old = str_arg(a, 0, "old", "replace"), with = str_arg(a, 1, "new", "replace");
    int64_t count = int_arg(a, 2, "count", -1);
    std::string out;
    if (old.empty()) {  // inserted before every code point and at the end
        int64_t done = 0;
        for (size_t i = 0; i < s.size();) {
            if (count < 0 || done < count) out += with, done++;
            budget_reserve(out.size());
            size_t start = i;
            utf8_next(s, i);
            out += s.substr(start, i - start);
        }
        if (count < 0 || done < count) out += with;
        return str_value(std::move(out));
    }
    size_t start = 0, at;
    for (int64_t done = 0; (count < 0 || done < count) && (at = s.find(old, start)) != std::string_view::npos; done++) {
        out += s.substr(start, at - start);
        out += with;
        budget_reserve(out.size());
        start = at + old.size();
    }
    out += s.substr(start);
    return str_value(std::move(out));
}

Value m_upper(Renderer&, const Value& self, CallArgs& a) {
    a.check("upper", {});
    return str_value(py_upper(self.str()));
}
Value m_lower(Renderer&, const Value& self, CallArgs& a) {
    a.check("lower", {});
    return str_value(py_lower(self.str()));
}

Value m_title(Renderer&, const Value& self, CallArgs&) { return str_value(py_title(self.str())); }
Value m_capitalize(Renderer&, const Value& self, CallArgs&) { return str_value(py_capitalize(self.str())); }

// find/rfind/index/rindex(sub) -> code point index
template <bool RIGHT, bool RAISE>
Value m_find(Renderer&, const Value& self, CallArgs& a) {
    a.check("find", {"sub"});
    std::string_view s = self.str(), sub = str_arg(a, 0, "sub", "find");
    size_t at = RIGHT ? s.rfind(sub) : s.find(sub);
    if (at == std::string_view::npos) {
        if (RAISE) fail(ErrorKind::VALUE, "substring not found");
        return Value::integer(-1);
    }
    return Value::integer(static_cast<int64_t>(utf8_length(s.substr(0, at))));
}

Value m_count(Renderer&, const Value& self, CallArgs& a) {
    a.check("count", {"x"});
    if (self.kind() == Kind::LIST) {
        const Value* x = a.get(0, "x");
        if (!x) fail(ErrorKind::TYPE, "count() takes exactly one argument (0 given)");
        int64_t n = 0;
        for (size_t i = 0; i < self.list_size(); i++) n += equal(self.list_at(i), *x);
        return Value::integer(n);
    }
    std::string_view s = self.str(), sub = str_arg(a, 0, "x", "count");
    if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(s) + 1));
    int64_t n = 0;
    for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) n++;
    return Value::integer(n);
}

Value m_join(Renderer&, const Value& self, CallArgs& a) {
    a.check("join", {"iterable"});
    const Value* it = a.get(0, "iterable");
    if (!it) fail(ErrorKind::TYPE, "join() takes exactly one argument (0 given)");
    std::vector<Value> items = iterate(*it);
    // Size the result first: an amplifying join fails the allocation budget before copying anything.
    size_t total = 0;
    for (size_t i = 0; i < items.size(); i++) {
        if (!items[i].is_string())
            fail(ErrorKind::TYPE, "sequence item " + std::to_string(i) + ": expected str instance, " + type_name(items[i]) + " found");
        total += (i ? self.str().size() : 0) + items[i].str().size();
    }
    budget_reserve(total);
    std::string out;
    out.reserve(total);
    for (size_t i = 0; i < items.size(); i++) {
        if (i) out += self.str();
        out += items[i].str();
    }
    return str_value(std::move(out));
}

template <bool (*PRED)(char32_t)>
Value m_is(Renderer&, const Value& self, CallArgs&) {
    std::string_view s = self.str();
    if (s.empty()) return Value::boolean(false);
    for (size_t i = 0; i < s.size();)
        if (!PRED(utf8_next(s, i))) return Value::boolean(false);
    return Value::boolean(true);
}
bool is_alnum(char32_t c) { return py_isalpha(c) || py_isdigit(c); }
bool is_ascii_cp(char32_t c) { return c < 0x80; }

template <bool UPPER>
Value m_case_is(Renderer&, const Value& self, CallArgs&) {  // isupper/islower: some cased, none of the other case
    std::string_view s = self.str();
    bool cased = false;
    for (size_t i = 0; i < s.size();) {
        size_t start = i;
        char32_t cp = utf8_next(s, i);
        std::string_view ch = s.substr(start, i - start);
        if (!py_isalpha(cp)) continue;
        bool is_upper = py_lower(ch) != ch, is_lower = py_upper(ch) != ch;
        if (UPPER ? is_lower : is_upper) return Value::boolean(false);
        cased |= UPPER ? is_upper : is_lower;
    }
    return Value::boolean(cased);
}

template <int WHERE>  // 0 left-justify, 1 right-justify, 2 center
Value m_pad(Renderer&, const Value& self, CallArgs& a) {
    a.check("pad", {"width", "fillchar"});
    int64_t width = int_arg(a, 0, "width", 0);
    const Value* f = a.get(1, "fillchar");
    std::string fill = f && f->is_string() ? std::string(f->str()) : " ";
    int64_t n = static_cast<int64_t>(utf8_length(self.str()));
    if (width <= n) return self;
    int64_t total = std::min<int64_t>(width - n, 1 << 20);
    int64_t left = WHERE == 0 ? 0 : WHERE == 1 ? total : total / 2 + (total & width & 1);
    std::string out;
    for (int64_t i = 0; i < left; i++) out += fill;
    out += self.str();
    for (int64_t i = left; i < total; i++) out += fill;
    return str_value(std::move(out));
}

Value m_zfill(Renderer&, const Value& self, CallArgs& a) {
    int64_t width = std::min<int64_t>(int_arg(a, 0, "width", 0), 1 << 20);
    std::string s(self.str());
    int64_t n = static_cast<int64_t>(utf8_length(s));
    if (width <= n) return self;
    size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
    return str_value(s.substr(0, sign) + std::string(width - n, '0') + s.substr(sign));
}

template <bool PREFIX>
Value m_remove_affix(Renderer&, const Value& self, CallArgs& a) {
    std::string_view s = self.str(), x = str_arg(a, 0, "affix", PREFIX ? "removeprefix" : "removesuffix");
    if (x.size() <= s.size() && (PREFIX ? s.substr(0, x.size()) : s.substr(s.size() - x.size())) == x)
        return str_value(std::string(PREFIX ? s.substr(x.size()) : s.substr(0, s.size() - x.size())));
    return self;
}

template <bool RIGHT>
Value m_partition(Renderer&, const Value& self, CallArgs& a) {
    std::string_view s = self.str(), sep = str_arg(a, 0, "sep", "partition");
    if (sep.empty()) fail(ErrorKind::VALUE, "empty separator");
    size_t at = RIGHT ? s.rfind(sep) : s.find(sep);
    if (at == std::string_view::npos)
        return RIGHT ? Value::list({str_value(""), str_value(""), self}, true) : Value::list({self, str_value(""), str_value("")}, true);
    return Value::list({str_value(std::string(s.substr(0, at))), str_value(std::string(sep)),
                        str_value(std::string(s.substr(at + sep.size())))},
                       true);
}

// str.format with positional/keyword fields ({}, {0}, {name}) and no format specs.
Value m_format(Renderer&, const Value& self, CallArgs& a) {
    std::string_view f = self.str();
    std::string out;
    size_t auto_index = 0;
    for (size_t i = 0; i < f.size(); i++) {
        char c = f[i];
        if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {
            out += c;
            i++;
            continue;
        }
        if (c == '}') fail(ErrorKind::VALUE, "Single '}' encountered in format string");
        if (c != '{') {
            out += c;
            continue;
        }
        size_t close = f.find('}', i);
        if (close == std::string_view::npos) fail(ErrorKind::VALUE, "Single '{' encountered in format string");
        std::string field(f.substr(i + 1, close - i - 1));
        if (field.find_first_of(":!.[") != std::string::npos) fail(ErrorKind::RUNTIME, "str.format: format specs are not supported");
        const Value* v = nullptr;
        if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
            size_t index = field.empty() ? auto_index++ : std::stoul(field);
            v = index < a.positional.size() ? &a.positional[index] : nullptr;
            if (!v) fail(ErrorKind::VALUE, "Replacement index " + std::to_string(index) + " out of range for positional args tuple");
        } else {
            for (const auto& [k, val] : a.keyword)
                if (k == field) v = &val;
            if (!v) fail(ErrorKind::VALUE, "KeyError: '" + field + "'");
        }
        append_str(out, *v);
        i = close;
    }
    return str_value(std::move(out));
}

// dict.get(key, default=None)
Value m_get(Renderer&, const Value& self, CallArgs& a) {
    if (a.positional.empty() || a.positional.size() > 2 || !a.keyword.empty())
        fail(ErrorKind::TYPE, "get expected 1 or 2 arguments, got " + std::to_string(a.positional.size()));
    Value out;
    if (self.dict_find(a.positional[0], out)) return out;
    return a.positional.size() > 1 ? a.positional[1] : Value::none();
}

Value m_items(Renderer&, const Value& self, CallArgs& a) {
    a.check("items", {});
    std::vector<Value> items;
    items.reserve(self.dict_size());
    self.dict_for_each([&](const Value& k, const Value& v) { items.push_back(Value::list({k, v}, true)); });
    return Value::list(std::move(items));
}
Value m_keys(Renderer&, const Value& self, CallArgs& a) {
    a.check("keys", {});
    return Value::list(iterate(self));
}
Value m_values(Renderer&, const Value& self, CallArgs& a) {
    a.check("values", {});
    std::vector<Value> items;
    self.dict_for_each([&](const Value&, const Value& v) { items.push_back(v); });
    return Value::list(std::move(items));
}
Value m_copy(Renderer&, const Value& self, CallArgs&) { return self; }  // immutable: sharing is copying

Value m_index(Renderer& r, const Value& self, CallArgs& a) {
    if (self.is_string()) return m_find<false, true>(r, self, a);
    const Value* x = a.get(0, "value");
    if (!x) fail(ErrorKind::TYPE, "index expected at least 1 argument, got 0");
    for (size_t i = 0; i < self.list_size(); i++)
        if (equal(self.list_at(i), *x)) return Value::integer(static_cast<int64_t>(i));
    fail(ErrorKind::VALUE, "value is not in list");
}

const Method STR_METHODS[] = {
    {"strip", m_strip<Strip::BOTH>}, {"lstrip", m_strip<Strip::LEFT>}, {"rstrip", m_strip<Strip::RIGHT>},
    {"split", m_split}, {"rsplit", m_rsplit}, {"splitlines", m_splitlines},
    {"startswith", m_affix<true>}, {"endswith", m_affix<false>}, {"replace", m_replace},
    {"upper", m_upper}, {"lower", m_lower}, {"casefold", m_lower}, {"title", m_title}, {"capitalize", m_capitalize},
    {"find", m_find<false, false>}, {"rfind", m_find<true, false>}, {"index", m_index}, {"rindex", m_find<true, true>},
    {"count", m_count}, {"join", m_join}, {"format", m_format},
    {"isalpha", m_is<py_isalpha>}, {"isdigit", m_is<py_isdigit>}, {"isdecimal", m_is<py_isdigit>},
    {"isnumeric", m_is<py_isdigit>}, {"isalnum", m_is<is_alnum>}, {"isspace", m_is<py_isspace>},
    {"isascii", m_is<is_ascii_cp>}, {"isupper", m_case_is<true>}, {"islower", m_case_is<false>},
    {"ljust", m_pad<0>}, {"rjust", m_pad<1>}, {"center", m_pad<2>}, {"zfill", m_zfill},
    {"removeprefix", m_remove_affix<true>}, {"removesuffix", m_remove_affix<false>},
    {"partition", m_partition<false>}, {"rpartition", m_partition<true>},
    {"encode", nullptr}, {"expandtabs", nullptr}, {"format_map", nullptr}, {"isidentifier", nullptr},
    {"isprintable", nullptr}, {"istitle", nullptr}, {"maketrans", nullptr}, {"swapcase", nullptr}, {"translate", nullptr},
};
const Method DICT_METHODS[] = {{"get", m_get}, {"items", m_items}, {"keys", m_keys}, {"values", m_values}, {"copy", m_copy}};
const Method LIST_METHODS[] = {{"count", m_count}, {"index", m_index}, {"copy", m_copy}};
const char* const DICT_UNSAFE[] = {"clear", "pop", "popitem", "setdefault", "update"};
const char* const LIST_UNSAFE[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};

template <size_t N>
const Method* find_in(const Method (&table)[N], std::string_view name) {
    for (const Method& m : table)
        if (name == m.name) return &m;
    return nullptr;
}
template <size_t N>
bool listed(const char* const (&names)[N], std::string_view name) {
    for (const char* n : names)
        if (name == n) return true;
    return false;
}

const Method* find_method(const Value& obj, std::string_view name) {
    switch (obj.kind()) {
    case Kind::STRING: return find_in(STR_METHODS, name);
    case Kind::DICT: return find_in(DICT_METHODS, name);
    case Kind::LIST: return find_in(LIST_METHODS, name);
    default: return nullptr;
    }
}

class BoundMethod : public Callable {
public:
    BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    std::string repr() const override { return "<built-in method " + name_ + " of " + jinja::type_name(self_) + " object>"; }
    Value call(Renderer& r, CallArgs& args) const override { return call_method(r, self_, name_, args); }

private:
    Value self_;
    std::string name_;
};

}  // namespace

MethodKind method_kind(const Value& obj, std::string_view name) {
    if (find_method(obj, name)) return MethodKind::SAFE;
    if (obj.kind() == Kind::DICT && listed(DICT_UNSAFE, name)) return MethodKind::UNSAFE;
    if (obj.kind() == Kind::LIST && listed(LIST_UNSAFE, name)) return MethodKind::UNSAFE;
    return MethodKind::NONE;
}

void fail_unsafe(const Value& obj, std::string_view name) {
    fail(ErrorKind::SECURITY, "access to attribute '" + std::string(name) + "' of '" + type_name(obj) + "' object is unsafe.");
}

Value bound_method(const Value& obj, std::string_view name) {
    if (method_kind(obj, name) == MethodKind::UNSAFE)  // the sandbox hands out an undefined that refuses use
        return Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(obj) + "' object is unsafe.",
                                ErrorKind::SECURITY);
    return Value::object(std::make_shared<BoundMethod>(obj, std::string(name)));
}

Value call_method(Renderer& r, const Value& obj, std::string_view name, CallArgs& args) {
    const Method* m = find_method(obj, name);
    if (!m) fail_unsafe(obj, name);
    if (!m->fn) fail(ErrorKind::RUNTIME, type_name(obj) + "." + std::string(name) + "() is not supported by tinyllm's templates");
    return m->fn(r, obj, args);
}

}  // namespace jinja
