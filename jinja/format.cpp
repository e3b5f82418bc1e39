// Python's printf-style string formatting, `'%s: %5.2f' % (name, x)` and the |format filter:
// conversions s r a d i u x X o e E f F g G c %, flags, width, precision and %(key)s with a dict.
#include "jinja/render_impl.h"
#include "jinja/unicode_impl.h"

#include <cmath>
#include <cstdio>

namespace jinja {

namespace {

// One conversion of `value` for the spec (flags, width, precision, type) the way CPython does it.
std::string convert(const std::string& flags, int width, int precision, char type, const Value& value) {
    std::string body;
    if (type == 's' || type == 'r' || type == 'a') {
        if (type == 's') append_str(body, value);
        else append_repr(body, value);
        if (precision >= 0) body = body.substr(0, utf8_offset(body, static_cast<size_t>(precision)));
        size_t n = utf8_length(body);
        if (static_cast<size_t>(width) > n) {
            std::string pad(static_cast<size_t>(width) - n, ' ');
            body = flags.find('-') != std::string::npos ? body + pad : pad + body;
        }
        return body;
    }
    if (type == 'c') {
        if (value.is_string() && utf8_length(value.str()) == 1) return convert(flags, width, -1, 's', value);
        if (!value.is_number() || value.kind() == Kind::FLOAT) fail(ErrorKind::TYPE, "%c requires int or char");
        std::string ch;
        utf8_append(ch, static_cast<char32_t>(value.as_int()));
        return convert(flags, width, -1, 's', Value::string(ch));
    }
    if (!value.is_number()) fail(ErrorKind::TYPE, std::string("%") + type + " format: a real number is required, not " + type_name(value));
    std::string spec = "%" + flags + (width > 0 ? std::to_string(width) : "") + (precision >= 0 ? "." + std::to_string(precision) : "");
    char buf[512];
    if (type == 'd' || type == 'i' || type == 'u' || type == 'x' || type == 'X' || type == 'o') {
        if (value.kind() == Kind::FLOAT && type != 'd' && type != 'i' && type != 'u')
            fail(ErrorKind::TYPE, std::string("%") + type + " format: an integer is required, not float");
        double f = value.as_float();
        if (value.kind() == Kind::FLOAT && !std::isfinite(f)) fail(ErrorKind::VALUE, "cannot convert float to integer");
        long long i = value.kind() == Kind::FLOAT ? static_cast<long long>(f) : value.as_int();
        char c = type == 'i' || type == 'u' ? 'd' : type;
        std::snprintf(buf, sizeof buf, (spec + "ll" + c).c_str(), i);
        std::string s = buf;
        if (flags.find('#') != std::string::npos && type == 'o') {  // Python writes 0o17, C writes 017
            size_t zero = s.find('0');
            if (zero != std::string::npos) s.insert(zero + 1, "o");
        }
        return s;
    }
    std::snprintf(buf, sizeof buf, (spec + type).c_str(), value.as_float());
    return buf;
}

}  // namespace

Value percent_format(const Value& format, const Value& args) {
    bool is_tuple = args.kind() == Kind::LIST && args.is_tuple();
    std::vector<Value> values = is_tuple ? iterate(args) : std::vector<Value>{args};
    std::string_view f = format.str();
    std::string out;
    size_t next = 0;
    bool used_mapping = false;
    for (size_t i = 0; i < f.size(); i++) {
        if (f[i] != '%') {
            out += f[i];
            continue;
        }
        auto at_end = [&] {
            if (i >= f.size()) fail(ErrorKind::VALUE, "incomplete format");
        };
        i++;
        at_end();
        const Value* value = nullptr;
        Value keyed;
        if (f[i] == '(') {  // %(key)s takes the value from a dict argument
            size_t close = f.find(')', i);
            if (close == std::string_view::npos) fail(ErrorKind::VALUE, "incomplete format key");
            if (args.kind() != Kind::DICT) fail(ErrorKind::TYPE, "format requires a mapping");
            if (!args.dict_find(f.substr(i + 1, close - i - 1), keyed))
                fail(ErrorKind::VALUE, "KeyError: '" + std::string(f.substr(i + 1, close - i - 1)) + "'");
            value = &keyed;
            used_mapping = true;
            i = close + 1;
            at_end();
        }
        std::string flags;
        while (i < f.size() && std::string_view("#0- +").find(f[i]) != std::string_view::npos) flags += f[i++];
        int width = 0, precision = -1;
        while (i < f.size() && f[i] >= '0' && f[i] <= '9') width = std::min(width * 10 + (f[i++] - '0'), 400);
        if (i < f.size() && f[i] == '.') {
            precision = 0;
            while (++i < f.size() && f[i] >= '0' && f[i] <= '9') precision = std::min(precision * 10 + (f[i] - '0'), 400);
        }
        while (i < f.size() && (f[i] == 'l' || f[i] == 'h' || f[i] == 'L')) i++;  // length modifiers are ignored
        at_end();
        char type = f[i];
        if (type == '%') {
            out += '%';
            continue;
        }
        if (std::string_view("sradiuxXoeEfFgGc").find(type) == std::string_view::npos)
            fail(ErrorKind::VALUE, std::string("unsupported format character '") + type + "'");
        if (!value) {
            if (next >= values.size()) fail(ErrorKind::TYPE, "not enough arguments for format string");
            value = &values[next++];
        }
        out += convert(flags, width, precision, type, *value);
    }
    if (!used_mapping && next < values.size() && !(values.size() == 1 && args.kind() == Kind::DICT))
        fail(ErrorKind::TYPE, "not all arguments converted during string formatting");
    return Value::string(std::move(out));
}

}  // namespace jinja
