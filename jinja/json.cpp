// tojson: Python's json.dumps over template values, byte for byte (separators, indent, ensure_ascii,
// sort_keys, float repr, escapes), as transformers' tojson filter calls it.
#include "jinja/budget_impl.h"
#include "jinja/unicode_impl.h"
#include "jinja/value_impl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace jinja {

namespace {

constexpr int MAX_DEPTH = 512;  // deeper input is refused rather than risking the stack

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (size_t i = 0; i < s.size();) {
        const size_t at = i;
        char32_t cp = utf8_next(s, i);
        if (cp >= 0x80 && i == at + 1) {  // a byte that is not UTF-8 (the server's literal-span marks) stays as it is
            out += s[at];
            continue;
        }
        switch (cp) {
        case '"': out += "\\\""; continue;
        case '\\': out += "\\\\"; continue;
        case '\n': out += "\\n"; continue;
        case '\r': out += "\\r"; continue;
        case '\t': out += "\\t"; continue;
        case '\b': out += "\\b"; continue;
        case '\f': out += "\\f"; continue;
        default: break;
        }
        char buf[16];
        if (cp < 0x20 || (ensure_ascii && cp >= 0x80 && cp < 0x10000)) {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
            out += buf;
        } else if (ensure_ascii && cp >= 0x10000) {
            char32_t v = cp - 0x10000;  // UTF-16 surrogate pair
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 | (v >> 10)),
                          static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
            out += buf;
        } else {
            utf8_append(out, cp);
        }
    }
    out += '"';
}

void append_json_float(std::string& out, double f) {
    if (std::isnan(f)) out += "NaN";
    else if (std::isinf(f)) out += f < 0 ? "-Infinity" : "Infinity";
    else append_float_repr(out, f);
}

// json.dumps turns None/bool/int/float keys into strings; other keys are a TypeError.
std::string json_key(const Value& key) {
    switch (key.kind()) {
    case Kind::STRING: return std::string(key.str());
    case Kind::NONE: return "null";
    case Kind::BOOL: return key.as_bool() ? "true" : "false";
    case Kind::INT: return std::to_string(key.as_int());
    case Kind::FLOAT: {
        std::string s;
        append_json_float(s, key.as_float());
        return s;
    }
    default: fail(ErrorKind::TYPE, "keys must be str, int, float, bool or None, not " + type_name(key));
    }
}

class JsonWriter {
public:
    JsonWriter(std::string& out, const JsonOptions& o) : out_(out), o_(o) {}

    void write(const Value& v, int depth) {
        if (depth > MAX_DEPTH) fail(ErrorKind::VALUE, "tojson: value nested too deeply");
        budget_step();
        budget_check_stack();
        switch (v.kind()) {
        case Kind::NONE: out_ += "null"; return;
        case Kind::BOOL: out_ += v.as_bool() ? "true" : "false"; return;
        case Kind::INT: out_ += std::to_string(v.as_int()); return;
        case Kind::FLOAT: append_json_float(out_, v.as_float()); return;
        case Kind::STRING:
            budget_reserve(out_.size() + v.str().size());
            append_json_string(out_, v.str(), o_.ensure_ascii);
            return;
        case Kind::LIST: {
            if (v.list_size() == 0) {
                out_ += "[]";
                return;
            }
            out_ += '[';
            for (size_t i = 0; i < v.list_size(); i++) {
                separator(i == 0, depth + 1);
                write(v.list_at(i), depth + 1);
            }
            close(depth);
            out_ += ']';
            return;
        }
        case Kind::DICT: write_dict(v, depth); return;
        default: fail(ErrorKind::TYPE, "Object of type " + type_name(v) + " is not JSON serializable");
        }
    }

private:
    std::string& out_;
    const JsonOptions& o_;

    void separator(bool first, int depth) {
        if (!first) out_ += o_.item_separator;
        if (o_.indent_set) {
            out_ += '\n';
            for (int i = 0; i < depth; i++) out_ += o_.indent;
        }
    }
    void close(int depth) {
        if (!o_.indent_set) return;
        out_ += '\n';
        for (int i = 0; i < depth; i++) out_ += o_.indent;
    }

    void write_dict(const Value& v, int depth) {
        if (v.dict_size() == 0) {
            out_ += "{}";
            return;
        }
        std::vector<std::pair<std::string, Value>> items;
        items.reserve(v.dict_size());
        v.dict_for_each([&](const Value& k, const Value& val) { items.emplace_back(json_key(k), val); });
        if (o_.sort_keys)
            std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        out_ += '{';
        for (size_t i = 0; i < items.size(); i++) {
            separator(i == 0, depth + 1);
            append_json_string(out_, items[i].first, o_.ensure_ascii);
            out_ += o_.key_separator;
            write(items[i].second, depth + 1);
        }
        close(depth);
        out_ += '}';
    }
};

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options) {
    std::string out;
    JsonWriter(out, options).write(v, 0);
    return out;
}

}  // namespace jinja
