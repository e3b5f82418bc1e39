// Jinja's builtin filters (jinja2/filters.py, 3.1) plus transformers' tojson, with the same argument
// names, defaults and edge cases. Filters that return generators in Jinja return lists here.
#include "jinja/render_impl.h"
#include "jinja/unicode_impl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace jinja {

namespace {

Value str_value(std::string s) { return Value::string(std::move(s)); }
const Value* arg(const CallArgs& a, size_t i, const char* name) { return a.get(i, name); }
bool flag(const CallArgs& a, size_t i, const char* name) {
    const Value* v = a.get(i, name);
    return v && truthy(*v);
}
std::string soft_str(const Value& v) { return to_str(v); }

// Jinja's make_attrgetter: "a.b.0" walks items (then attributes) one dotted part at a time.
Value attribute_of(Renderer& r, Value item, const Value& attribute, const Value* fallback = nullptr) {
    std::vector<Value> parts;
    if (attribute.is_string()) {
        std::string_view s = attribute.str();
        for (size_t start = 0;;) {
            size_t dot = s.find('.', start);
            std::string_view part = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
            bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
            parts.push_back(digits ? Value::integer(std::stoll(std::string(part))) : Value::string(std::string(part)));
            if (dot == std::string_view::npos) break;
            start = dot + 1;
        }
    } else {
        parts.push_back(attribute);
    }
    for (const Value& part : parts) {
        item = r.get_item(item, part);
        if (fallback && !fallback->is_none() && item.is_undefined()) item = *fallback;
    }
    return item;
}

Value lower_if_string(const Value& v) { return v.is_string() ? str_value(py_lower(v.str())) : v; }

Value f_default(Renderer&, const Value& v, CallArgs& a) {
    a.check("default", {"default_value", "boolean"});
    const Value* d = arg(a, 0, "default_value");
    if (v.is_undefined() || (flag(a, 1, "boolean") && !truthy(v))) return d ? *d : str_value("");
    return v;
}

Value f_length(Renderer&, const Value& v, CallArgs& a) {
    a.check("length", {});
    return Value::integer(static_cast<int64_t>(length(v)));
}

Value f_string(Renderer&, const Value& v, CallArgs& a) {
    a.check("string", {});
    return v.is_string() ? v : str_value(soft_str(v));
}

Value f_safe(Renderer&, const Value& v, CallArgs& a) {
    a.check("safe", {});
    return Value::string(soft_str(v), true);
}

Value f_trim(Renderer&, const Value& v, CallArgs& a) {
    a.check("trim", {"chars"});
    const Value* chars = arg(a, 0, "chars");
    bool given = chars && !chars->is_none();
    std::string s = soft_str(v), c = given ? soft_str(*chars) : "";
    return Value::string(std::string(py_strip(s, c, given, Strip::BOTH)), v.is_safe());
}

Value f_upper(Renderer&, const Value& v, CallArgs&) { return str_value(py_upper(soft_str(v))); }
Value f_lower(Renderer&, const Value& v, CallArgs&) { return str_value(py_lower(soft_str(v))); }
Value f_title(Renderer&, const Value& v, CallArgs&) { return str_value(py_title(soft_str(v))); }
Value f_capitalize(Renderer&, const Value& v, CallArgs&) { return str_value(py_capitalize(soft_str(v))); }

Value f_replace(Renderer& r, const Value& v, CallArgs& a) {
    a.check("replace", {"old", "new", "count"});
    CallArgs m;
    for (size_t i = 0; i < 3; i++) {
        const Value* x = arg(a, i, i == 0 ? "old" : i == 1 ? "new" : "count");
        if (!x && i < 2) fail(ErrorKind::TYPE, "replace() missing required arguments");
        if (x) m.positional.push_back(i < 2 ? str_value(soft_str(*x)) : (x->is_none() ? Value::integer(-1) : *x));
    }
    return call_method(r, str_value(soft_str(v)), "replace", m);
}

Value f_join(Renderer& r, const Value& v, CallArgs& a) {
    a.check("join", {"d", "attribute"});
    const Value* d = arg(a, 0, "d");
    const Value* attribute = arg(a, 1, "attribute");
    std::string sep = d ? soft_str(*d) : "", out;
    std::vector<Value> items = iterate(v);
    const bool by_attribute = attribute && !attribute->is_none();
    if (!by_attribute) {  // strings joined as they are: an amplifying join fails the budget before copying
        size_t total = 0;
        for (size_t i = 0; i < items.size() && items[i].is_string(); i++) total += (i ? sep.size() : 0) + items[i].str().size();
        budget_reserve(total);
    }
    for (size_t i = 0; i < items.size(); i++) {
        if (i) out += sep;
        append_str(out, by_attribute ? attribute_of(r, items[i], *attribute) : items[i]);
        budget_reserve(out.size());
    }
    return str_value(std::move(out));
}

Value f_list(Renderer&, const Value& v, CallArgs& a) {
    a.check("list", {});
    return Value::list(iterate(v));
}

Value f_items(Renderer&, const Value& v, CallArgs& a) {
    a.check("items", {});
    if (v.is_undefined()) return Value::list({});
    if (v.kind() != Kind::DICT) fail(ErrorKind::TYPE, "Can only get item pairs from a mapping.");
    std::vector<Value> items;
    v.dict_for_each([&](const Value& k, const Value& x) { items.push_back(Value::list({k, x}, true)); });
    return Value::list(std::move(items));
}

Value f_tojson(Renderer&, const Value& v, CallArgs& a) {
    a.check("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonOptions o;
    o.ensure_ascii = flag(a, 0, "ensure_ascii");
    o.sort_keys = flag(a, 3, "sort_keys");
    if (const Value* indent = arg(a, 1, "indent"); indent && !indent->is_none()) {
        o.indent_set = true;
        if (indent->is_string()) o.indent = std::string(indent->str());
        else if (indent->is_number() && indent->kind() != Kind::FLOAT) o.indent = std::string(std::clamp<int64_t>(indent->as_int(), 0, 1024), ' ');
        else fail(ErrorKind::TYPE, "tojson: indent must be an int or a string");
        o.item_separator = ",";
    }
    if (const Value* sep = arg(a, 2, "separators"); sep && !sep->is_none()) {
        std::vector<Value> parts = iterate(*sep);
        if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string())
            fail(ErrorKind::VALUE, "tojson: separators must be a pair of strings");
        o.item_separator = std::string(parts[0].str());
        o.key_separator = std::string(parts[1].str());
    }
    return str_value(to_json(v, o));
}

// select/reject(test, *args) and selectattr/rejectattr(attribute, test, *args).
Value select_impl(Renderer& r, const Value& v, CallArgs& a, bool keep_matching, bool by_attribute) {
    size_t off = by_attribute ? 1 : 0;
    if (by_attribute && a.positional.empty()) fail(ErrorKind::RUNTIME, "Missing parameter for attribute name");
    CallArgs test_args;
    test_args.positional.assign(a.positional.begin() + std::min(a.positional.size(), off + 1), a.positional.end());
    test_args.keyword = a.keyword;
    bool has_test = a.positional.size() > off;
    std::string test = has_test ? soft_str(a.positional[off]) : "";
    std::vector<Value> out;
    for (Value& item : iterate(v)) {
        Value x = by_attribute ? attribute_of(r, item, a.positional[0]) : item;
        CallArgs call = test_args;
        bool ok = has_test ? r.apply_test(test, x, call) : truthy(x);
        if (ok == keep_matching) out.push_back(std::move(item));
    }
    return Value::list(std::move(out));
}
Value f_select(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, false); }
Value f_reject(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, false); }
Value f_selectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, true); }
Value f_rejectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, true); }

Value f_map(Renderer& r, const Value& v, CallArgs& a) {
    std::vector<Value> out;
    const Value* attribute = nullptr;
    for (const auto& [k, x] : a.keyword)
        if (k == "attribute") attribute = &x;
    if (a.positional.empty() && attribute) {
        const Value* fallback = nullptr;
        for (const auto& [k, x] : a.keyword) {
            if (k == "default") fallback = &x;
            else if (k != "attribute") fail(ErrorKind::RUNTIME, "Unexpected keyword argument '" + k + "'");
        }
        for (const Value& item : iterate(v)) out.push_back(attribute_of(r, item, *attribute, fallback));
        return Value::list(std::move(out));
    }
    if (a.positional.empty()) fail(ErrorKind::RUNTIME, "map requires a filter argument");
    std::string filter = soft_str(a.positional[0]);
    for (const Value& item : iterate(v)) {
        CallArgs call;
        call.positional.assign(a.positional.begin() + 1, a.positional.end());
        call.keyword = a.keyword;
        out.push_back(r.apply_filter(filter, item, call));
    }
    return Value::list(std::move(out));
}

// The sort key of `item` for sort/unique/min/max: an attribute (comma-separated: several), lower-cased.
std::vector<Value> sort_key(Renderer& r, const Value& item, const Value* attribute, bool case_sensitive) {
    std::vector<Value> key;
    if (!attribute || attribute->is_none()) {
        key.push_back(item);
    } else if (attribute->is_string()) {
        std::string_view s = attribute->str();
        for (size_t start = 0;;) {
            size_t comma = s.find(',', start);
            key.push_back(attribute_of(r, item, str_value(std::string(s.substr(start, comma - start)))));
            if (comma == std::string_view::npos) break;
            start = comma + 1;
        }
    } else {
        key.push_back(attribute_of(r, item, *attribute));
    }
    if (!case_sensitive)
        for (Value& k : key) k = lower_if_string(k);
    return key;
}

bool key_less(const std::vector<Value>& a, const std::vector<Value>& b) {
    for (size_t i = 0; i < a.size(); i++) {
        if (less(a[i], b[i], "<")) return true;
        if (less(b[i], a[i], "<")) return false;
    }
    return false;
}

std::vector<Value> sorted(Renderer& r, const Value& v, const Value* attribute, bool case_sensitive, bool reverse) {
    std::vector<std::pair<std::vector<Value>, Value>> keyed;
    for (Value& item : iterate(v)) keyed.emplace_back(sort_key(r, item, attribute, case_sensitive), std::move(item));
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
        return reverse ? key_less(y.first, x.first) : key_less(x.first, y.first);
    });
    std::vector<Value> out;
    for (auto& k : keyed) out.push_back(std::move(k.second));
    return out;
}

Value f_sort(Renderer& r, const Value& v, CallArgs& a) {
    a.check("sort", {"reverse", "case_sensitive", "attribute"});
    return Value::list(sorted(r, v, arg(a, 2, "attribute"), flag(a, 1, "case_sensitive"), flag(a, 0, "reverse")));
}

Value f_dictsort(Renderer& r, const Value& v, CallArgs& a) {
    a.check("dictsort", {"case_sensitive", "by", "reverse"});
    require_defined(v);
    if (v.kind() != Kind::DICT) fail(ErrorKind::TYPE, "'" + type_name(v) + "' object has no attribute 'items'");
    const Value* by = arg(a, 1, "by");
    std::string by_s = by ? soft_str(*by) : "key";
    if (by_s != "key" && by_s != "value") fail(ErrorKind::RUNTIME, "You can only sort by either \"key\" or \"value\"");
    std::vector<Value> items;
    v.dict_for_each([&](const Value& k, const Value& x) { items.push_back(Value::list({k, x}, true)); });
    Value position = Value::integer(by_s == "key" ? 0 : 1);
    return Value::list(sorted(r, Value::list(std::move(items)), &position, flag(a, 0, "case_sensitive"), flag(a, 2, "reverse")));
}

Value f_unique(Renderer& r, const Value& v, CallArgs& a) {
    a.check("unique", {"case_sensitive", "attribute"});
    std::vector<Value> out;
    std::vector<Value> seen;
    for (Value& item : iterate(v)) {
        Value key = sort_key(r, item, arg(a, 1, "attribute"), flag(a, 0, "case_sensitive"))[0];
        if (key.kind() == Kind::DICT || (key.kind() == Kind::LIST && !key.is_tuple()))
            fail(ErrorKind::TYPE, "unhashable type: '" + type_name(key) + "'");
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
            seen.push_back(key);
            out.push_back(std::move(item));
        }
    }
    return Value::list(std::move(out));
}

template <bool MAX>
Value f_minmax(Renderer& r, const Value& v, CallArgs& a) {
    a.check(MAX ? "max" : "min", {"case_sensitive", "attribute"});
    std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
    std::vector<Value> all = sorted(r, Value::list(std::move(items)), arg(a, 1, "attribute"), flag(a, 0, "case_sensitive"), MAX);
    return all.front();
}

Value f_first(Renderer&, const Value& v, CallArgs&) {
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}
Value f_last(Renderer&, const Value& v, CallArgs&) {
    std::vector<Value> items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value f_reverse(Renderer&, const Value& v, CallArgs&) {
    if (v.is_string()) {
        std::vector<Value> chars = iterate(v);
        std::string out;
        for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->str();
        return str_value(std::move(out));
    }
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
}

Value f_sum(Renderer& r, const Value& v, CallArgs& a) {
    a.check("sum", {"attribute", "start"});
    const Value* attribute = arg(a, 0, "attribute");
    const Value* start = arg(a, 1, "start");
    Value total = start ? *start : Value::integer(0);
    for (const Value& item : iterate(v))
        total = binary_op(Op::ADD, total, attribute && !attribute->is_none() ? attribute_of(r, item, *attribute) : item);
    return total;
}

Value f_abs(Renderer&, const Value& v, CallArgs&) {
    if (v.kind() == Kind::FLOAT) return Value::number(std::fabs(v.as_float()));
    if (v.is_number()) return binary_op(Op::MUL, Value::integer(v.as_int() < 0 ? -1 : 1), v);
    fail(ErrorKind::TYPE, "bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_int(Renderer&, const Value& v, CallArgs& a) {
    a.check("int", {"default", "base"});
    const Value* d = arg(a, 0, "default");
    require_defined(v);  // int(Undefined) raises
    Value fallback = d ? *d : Value::integer(0);
    if (v.is_number()) return v.kind() == Kind::FLOAT ? (std::isfinite(v.as_float()) ? Value::integer(static_cast<int64_t>(v.as_float())) : fallback) : Value::integer(v.as_int());
    if (!v.is_string()) return fallback;
    std::string s(py_strip(v.str(), {}, false, Strip::BOTH));
    int base = static_cast<int>(arg(a, 1, "base") ? arg(a, 1, "base")->as_int() : 10);
    char* end = nullptr;
    errno = 0;
    long long i = std::strtoll(s.c_str(), &end, base);
    if (!s.empty() && *end == 0 && errno == 0) return Value::integer(i);
    double f = std::strtod(s.c_str(), &end);  // int(float(value))
    if (!s.empty() && *end == 0 && std::isfinite(f)) return Value::integer(static_cast<int64_t>(f));
    return fallback;
}

Value f_float(Renderer&, const Value& v, CallArgs& a) {
    a.check("float", {"default"});
    const Value* d = arg(a, 0, "default");
    require_defined(v);
    if (v.is_number()) return Value::number(v.as_float());
    if (v.is_string()) {
        std::string s(py_strip(v.str(), {}, false, Strip::BOTH));
        char* end = nullptr;
        double f = std::strtod(s.c_str(), &end);
        if (!s.empty() && *end == 0) return Value::number(f);
    }
    return d ? *d : Value::number(0.0);
}

Value f_round(Renderer&, const Value& v, CallArgs& a) {
    a.check("round", {"precision", "method"});
    const Value* p = arg(a, 0, "precision");
    const Value* m = arg(a, 1, "method");
    std::string method = m ? soft_str(*m) : "common";
    if (method != "common" && method != "ceil" && method != "floor") fail(ErrorKind::RUNTIME, "method must be common, ceil or floor");
    if (!v.is_number()) fail(ErrorKind::TYPE, "type " + type_name(v) + " doesn't define __round__ method");
    int64_t digits = p ? p->as_int() : 0;
    if (method == "common") {  // Python's round(): correctly rounded, ties to even, on the exact binary value
        if (v.kind() != Kind::FLOAT) return v;
        if (digits >= 0 && digits <= 300) {
            char buf[512];
            std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(digits), v.as_float());
            return Value::number(std::strtod(buf, nullptr));
        }
    }
    double scale = std::pow(10.0, static_cast<double>(digits)), x = v.as_float() * scale;
    double rounded = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value::number(rounded / scale);
}

Value f_indent(Renderer&, const Value& v, CallArgs& a) {
    a.check("indent", {"width", "first", "blank"});
    require_defined(v);  // Jinja appends "\n" to the value first
    const Value* w = arg(a, 0, "width");
    std::string pad = w && w->is_string() ? std::string(w->str()) : std::string(w ? std::clamp<int64_t>(w->as_int(), 0, 1024) : 4, ' ');
    std::string s = soft_str(v) + "\n";
    std::vector<std::string> lines;
    for (size_t start = 0, nl; (nl = s.find('\n', start)) != std::string::npos; start = nl + 1) lines.push_back(s.substr(start, nl - start));
    std::string out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); i++) {
        out += "\n" + ((!lines[i].empty() || flag(a, 2, "blank")) ? pad + lines[i] : lines[i]);
        budget_reserve(out.size());
    }
    return str_value(flag(a, 1, "first") ? pad + out : out);
}

Value f_center(Renderer& r, const Value& v, CallArgs& a) {
    a.check("center", {"width"});
    CallArgs m;
    m.positional.push_back(arg(a, 0, "width") ? *arg(a, 0, "width") : Value::integer(80));
    return call_method(r, str_value(soft_str(v)), "center", m);
}

Value f_escape(Renderer&, const Value& v, CallArgs&) {
    if (v.is_safe()) return v;
    std::string out;
    for (char c : soft_str(v)) {
        const char* rep = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '\'' ? "&#39;" : c == '"' ? "&#34;" : nullptr;
        if (rep) out += rep;
        else out += c;
    }
    return Value::string(std::move(out), true);
}

Value f_attr(Renderer& r, const Value& v, CallArgs& a) {
    a.check("attr", {"name"});
    const Value* name = arg(a, 0, "name");
    if (!name) fail(ErrorKind::TYPE, "attr() missing required argument 'name'");
    return r.get_attr(v, soft_str(*name));
}

Value f_format(Renderer&, const Value& v, CallArgs& a) {  // soft_str(value) % (kwargs or args)
    if (!a.positional.empty() && !a.keyword.empty()) fail(ErrorKind::RUNTIME, "can't handle positional and keyword arguments at the same time");
    if (a.keyword.empty()) return percent_format(str_value(soft_str(v)), Value::list(a.positional, true));
    std::vector<std::pair<Value, Value>> kw;
    for (const auto& [k, x] : a.keyword) kw.emplace_back(str_value(k), x);
    return percent_format(str_value(soft_str(v)), Value::dict(std::move(kw)));
}

Value f_truncate(Renderer&, const Value& v, CallArgs& a) {
    a.check("truncate", {"length", "killwords", "end", "leeway"});
    std::string s = soft_str(v);
    const Value* len_v = arg(a, 0, "length");
    const Value* end_v = arg(a, 2, "end");
    const Value* leeway_v = arg(a, 3, "leeway");
    int64_t length = len_v ? len_v->as_int() : 255, leeway = leeway_v && !leeway_v->is_none() ? leeway_v->as_int() : 5;
    std::string end = end_v ? soft_str(*end_v) : "...";
    int64_t n = static_cast<int64_t>(utf8_length(s)), n_end = static_cast<int64_t>(utf8_length(end));
    if (length < n_end) fail(ErrorKind::RUNTIME, "expected length >= " + std::to_string(n_end) + ", got " + std::to_string(length));
    if (n <= length + leeway) return str_value(s);
    std::string head = s.substr(0, utf8_offset(s, static_cast<size_t>(length - n_end)));
    if (!flag(a, 1, "killwords")) {
        size_t space = head.rfind(' ');
        if (space != std::string::npos) head.resize(space);
    }
    return str_value(head + end);
}

Value f_pprint(Renderer&, const Value& v, CallArgs&) {
    std::string out;
    append_repr(out, v);
    return str_value(std::move(out));
}

Value f_wordcount(Renderer&, const Value& v, CallArgs&) {
    std::string s = soft_str(v);
    int64_t n = 0;
    bool in_word = false;
    for (size_t i = 0; i < s.size();) {
        char32_t cp = utf8_next(s, i);
        bool word = py_isalpha(cp) || py_isdigit(cp) || cp == '_';
        n += word && !in_word;
        in_word = word;
    }
    return Value::integer(n);
}

Value f_batch(Renderer&, const Value& v, CallArgs& a) {
    a.check("batch", {"linecount", "fill_with"});
    const Value* count = arg(a, 0, "linecount");
    if (!count || !count->is_number() || count->as_int() <= 0) fail(ErrorKind::VALUE, "batch: linecount must be a positive integer");
    size_t n = static_cast<size_t>(count->as_int());
    const Value* fill = arg(a, 1, "fill_with");
    std::vector<Value> out, row;
    for (Value& item : iterate(v)) {
        row.push_back(std::move(item));
        if (row.size() == n) out.push_back(Value::list(std::move(row))), row.clear();
    }
    if (!row.empty()) {
        if (fill && !fill->is_none()) row.resize(n, *fill);
        out.push_back(Value::list(std::move(row)));
    }
    return Value::list(std::move(out));
}

struct NamedFilter {
    const char* name;
    FilterFn fn;
};
const NamedFilter FILTERS[] = {
    {"abs", f_abs}, {"attr", f_attr}, {"batch", f_batch}, {"capitalize", f_capitalize}, {"center", f_center},
    {"count", f_length}, {"d", f_default}, {"default", f_default}, {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape}, {"first", f_first}, {"float", f_float}, {"format", f_format}, {"indent", f_indent},
    {"int", f_int}, {"items", f_items}, {"join", f_join}, {"last", f_last}, {"length", f_length}, {"list", f_list},
    {"lower", f_lower}, {"map", f_map}, {"max", f_minmax<true>}, {"min", f_minmax<false>}, {"pprint", f_pprint},
    {"reject", f_reject}, {"rejectattr", f_rejectattr}, {"replace", f_replace}, {"reverse", f_reverse},
    {"round", f_round}, {"safe", f_safe}, {"select", f_select}, {"selectattr", f_selectattr}, {"sort", f_sort},
    {"string", f_string}, {"sum", f_sum}, {"title", f_title}, {"tojson", f_tojson}, {"trim", f_trim}, {"truncate", f_truncate},
    {"unique", f_unique}, {"upper", f_upper}, {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
    for (const NamedFilter& f : FILTERS)
        if (name == f.name) return f.fn;
    return nullptr;
}

}  // namespace jinja
