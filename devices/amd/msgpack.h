// A small MessagePack reader for the AMDGPU code-object metadata note (NT_AMDGPU_METADATA).
// Spec: https://github.com/msgpack/msgpack/blob/master/spec.md. Every length is checked: a hostile
// note is an amd::Error, never a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace amd::msgpack {

struct MapEntry;

struct Value {
    enum class Type { NIL, BOOL, INT, FLOAT, STR, BIN, ARRAY, MAP };
    Type type = Type::NIL;
    bool boolean = false;
    int64_t integer = 0;  // INT (uint64 values above INT64_MAX are rejected: metadata never needs them)
    double real = 0;
    std::string str;      // STR and BIN bytes
    std::vector<Value> array;
    std::vector<MapEntry> map;  // not std::pair<Value, Value>: clang rejects a pair of a type still incomplete

    const Value* get(std::string_view key) const;  // a MAP's value for a string key, or nullptr
    std::optional<int64_t> as_int() const;
    const std::string* as_str() const;
};

struct MapEntry {
    Value key, value;
};

Value parse(std::span<const uint8_t> bytes, const std::string& where);

}  // namespace amd::msgpack
