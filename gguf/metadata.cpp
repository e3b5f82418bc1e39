// GGUF metadata: building well-formed values, and typed lookups (File::get<T>) that convert only
// when the stored value fits, with errors naming the key and the file.
#include "gguf/gguf_impl.h"

#include <cstdio>
#include <limits>
#include <type_traits>

namespace gguf {

namespace detail {

void fail(const std::string& where, const std::string& what) { throw Error("[gguf] " + where + ": " + what); }

bool valid_utf8(std::string_view s) {
    static constexpr uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};  // shortest form per length
    size_t i = 0;
    while (i < s.size()) {
        auto c = static_cast<unsigned char>(s[i]);
        int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
        if (n < 0 || (n > 0 && i + n >= s.size())) return false;
        uint32_t cp = n == 0 ? c : c & (0x3f >> n);
        for (int k = 1; k <= n; k++) {
            auto cc = static_cast<unsigned char>(s[i + k]);
            if ((cc >> 6) != 2) return false;
            cp = (cp << 6) | (cc & 0x3f);
        }
        if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += n + 1;
    }
    return true;
}

std::string split_part_path(const std::string& prefix, uint32_t part, uint32_t count) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "-%05u-of-%05u.gguf", part, count);
    return prefix + buf;
}

}  // namespace detail

using detail::fail;

namespace {

template <class T> bool fits(uint64_t x) { return x <= static_cast<uint64_t>(std::numeric_limits<T>::max()); }
template <class T> bool fits(int64_t x) {
    return x >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
           x <= static_cast<int64_t>(std::numeric_limits<T>::max());
}

template <class T> bool convert(const Value& v, T& out);

template <class T> bool convert_scalar(const Value& v, T& out) {
    if constexpr (std::is_same_v<T, bool>) {
        if (v.type != ValueType::BOOL) return false;
        out = std::get<bool>(v.v);
        return true;
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (v.type != ValueType::STRING) return false;
        out = std::get<std::string>(v.v);
        return true;
    } else if constexpr (std::is_floating_point_v<T>) {
        if (auto d = std::get_if<double>(&v.v)) out = static_cast<T>(*d);
        else if (auto u = std::get_if<uint64_t>(&v.v)) out = static_cast<T>(*u);
        else if (auto i = std::get_if<int64_t>(&v.v)) out = static_cast<T>(*i);
        else return false;
        return true;
    } else {
        static_assert(std::is_integral_v<T>);
        if (auto u = std::get_if<uint64_t>(&v.v)) {
            if (!fits<T>(*u)) return false;
            out = static_cast<T>(*u);
            return true;
        }
        if (auto i = std::get_if<int64_t>(&v.v)) {
            if (*i < 0 ? !fits<T>(*i) : !fits<T>(static_cast<uint64_t>(*i))) return false;
            out = static_cast<T>(*i);
            return true;
        }
        return false;
    }
}

template <class T> struct is_vector : std::false_type {};
template <class T> struct is_vector<std::vector<T>> : std::true_type {};

template <class T> bool convert(const Value& v, T& out) {
    if constexpr (is_vector<T>::value) {
        if (!v.is_array()) return false;
        out.clear();
        out.reserve(v.array().size());
        for (const Value& item : v.array()) {
            typename T::value_type x{};
            if (!convert(item, x)) return false;
            out.push_back(std::move(x));
        }
        return true;
    } else {
        return convert_scalar(v, out);
    }
}

// The variant alternative each stored type uses.
bool holds_right_alternative(const Value& v) {
    switch (v.type) {
    case ValueType::UINT8: case ValueType::UINT16: case ValueType::UINT32: case ValueType::UINT64:
        return std::holds_alternative<uint64_t>(v.v);
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64:
        return std::holds_alternative<int64_t>(v.v);
    case ValueType::FLOAT32: case ValueType::FLOAT64: return std::holds_alternative<double>(v.v);
    case ValueType::BOOL: return std::holds_alternative<bool>(v.v);
    case ValueType::STRING: return std::holds_alternative<std::string>(v.v);
    case ValueType::ARRAY: return std::holds_alternative<std::vector<Value>>(v.v);
    }
    return false;
}

}  // namespace

const char* value_type_name(ValueType t) {
    static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "string", "array", "u64", "i64", "f64"};
    auto i = static_cast<uint32_t>(t);
    return i < 13 ? names[i] : "?";
}

Value Value::make_uint(ValueType t, uint64_t x) {
    bool ok = t == ValueType::UINT8 ? fits<uint8_t>(x) : t == ValueType::UINT16 ? fits<uint16_t>(x)
            : t == ValueType::UINT32 ? fits<uint32_t>(x) : t == ValueType::UINT64;
    if (!ok) fail("value", std::to_string(x) + " is not a valid " + value_type_name(t));
    return Value{t, ValueType::UINT8, x};
}

Value Value::make_int(ValueType t, int64_t x) {
    bool ok = t == ValueType::INT8 ? fits<int8_t>(x) : t == ValueType::INT16 ? fits<int16_t>(x)
            : t == ValueType::INT32 ? fits<int32_t>(x) : t == ValueType::INT64;
    if (!ok) fail("value", std::to_string(x) + " is not a valid " + value_type_name(t));
    return Value{t, ValueType::UINT8, x};
}

Value Value::make_float(ValueType t, double x) {
    if (t != ValueType::FLOAT32 && t != ValueType::FLOAT64) fail("value", std::string(value_type_name(t)) + " is not a float type");
    return Value{t, ValueType::UINT8, t == ValueType::FLOAT32 ? double(float(x)) : x};
}

Value Value::make_bool(bool b) { return Value{ValueType::BOOL, ValueType::UINT8, b}; }

Value Value::make_string(std::string s) { return Value{ValueType::STRING, ValueType::UINT8, std::move(s)}; }

Value Value::make_array(ValueType elem_type, std::vector<Value> items) {
    for (size_t i = 0; i < items.size(); i++)
        if (items[i].type != elem_type || !holds_right_alternative(items[i]))
            fail("value", "array element " + std::to_string(i) + " is a " + value_type_name(items[i].type) +
                              ", not a " + value_type_name(elem_type));
    return Value{ValueType::ARRAY, elem_type, std::move(items)};
}

namespace detail {
bool well_formed(const Value& v) { return holds_right_alternative(v); }
}  // namespace detail

std::string File::architecture() const {
    const Value* v = find("general.architecture");
    return v && v->type == ValueType::STRING ? std::get<std::string>(v->v) : std::string();
}

std::string File::resolve(std::string_view key) const {
    if (!key.empty() && key[0] == '.') return architecture() + std::string(key);
    return std::string(key);
}

bool File::has(std::string_view key) const { return find(key) != nullptr; }

const Value* File::find(std::string_view key) const {
    auto it = kv_index_.find(resolve(key));
    return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

template <class T> T File::get(std::string_view key) const {
    std::string full = resolve(key);
    const Value* v = find(key);
    if (!v) fail(path_, "missing metadata key '" + full + "'");
    T out{};
    if (!convert(*v, out))
        fail(path_, "metadata key '" + full + "' has type " + value_type_name(v->type) +
                        (v->is_array() ? std::string(" of ") + value_type_name(v->elem_type) : std::string()) +
                        ", which does not convert to the requested type");
    return out;
}

#define GGUF_INSTANTIATE(T) template T File::get<T>(std::string_view) const;
GGUF_INSTANTIATE(bool)
GGUF_INSTANTIATE(uint8_t)
GGUF_INSTANTIATE(int8_t)
GGUF_INSTANTIATE(uint16_t)
GGUF_INSTANTIATE(int16_t)
GGUF_INSTANTIATE(uint32_t)
GGUF_INSTANTIATE(int32_t)
GGUF_INSTANTIATE(uint64_t)
GGUF_INSTANTIATE(int64_t)
GGUF_INSTANTIATE(float)
GGUF_INSTANTIATE(double)
GGUF_INSTANTIATE(std::string)
GGUF_INSTANTIATE(std::vector<bool>)
GGUF_INSTANTIATE(std::vector<uint8_t>)
GGUF_INSTANTIATE(std::vector<int8_t>)
GGUF_INSTANTIATE(std::vector<uint32_t>)
GGUF_INSTANTIATE(std::vector<int32_t>)
GGUF_INSTANTIATE(std::vector<uint64_t>)
GGUF_INSTANTIATE(std::vector<int64_t>)
GGUF_INSTANTIATE(std::vector<float>)
GGUF_INSTANTIATE(std::vector<double>)
GGUF_INSTANTIATE(std::vector<std::string>)
#undef GGUF_INSTANTIATE

}  // namespace gguf
