// MessagePack decoding for code-object metadata (see msgpack.h).
#include "devices/amd/msgpack.h"

#include "devices/amd/amd.h"

#include <bit>
#include <cstring>

namespace amd::msgpack {

namespace {

constexpr int MAX_DEPTH = 64;  // metadata nests ~4 deep; a deeper note is hostile

class Reader {
public:
    Reader(std::span<const uint8_t> b, const std::string& where) : b_(b), where_(where) {}

    Value value(int depth) {
        if (depth > MAX_DEPTH) fail("nesting deeper than " + std::to_string(MAX_DEPTH));
        uint8_t tag = u8();
        Value v;
        if (tag <= 0x7f) return integer(tag);
        if (tag >= 0xe0) return integer(static_cast<int8_t>(tag));
        if ((tag & 0xf0) == 0x80) return map(tag & 0x0f, depth);
        if ((tag & 0xf0) == 0x90) return array(tag & 0x0f, depth);
        if ((tag & 0xe0) == 0xa0) return string(tag & 0x1f, Value::Type::STR);
        switch (tag) {
        case 0xc0: return v;
        case 0xc2: case 0xc3:
            v.type = Value::Type::BOOL;
            v.boolean = tag == 0xc3;
            return v;
        case 0xc4: return string(u8(), Value::Type::BIN);
        case 0xc5: return string(be(2), Value::Type::BIN);
        case 0xc6: return string(be(4), Value::Type::BIN);
        case 0xca: {
            uint32_t bits = static_cast<uint32_t>(be(4));
            v.type = Value::Type::FLOAT;
            v.real = std::bit_cast<float>(bits);
            return v;
        }
        case 0xcb:
            v.type = Value::Type::FLOAT;
            v.real = std::bit_cast<double>(be(8));
            return v;
        case 0xcc: return integer(u8());
        case 0xcd: return integer(be(2));
        case 0xce: return integer(be(4));
        case 0xcf: {
            uint64_t u = be(8);
            if (u > static_cast<uint64_t>(INT64_MAX)) fail("integer out of range");
            return integer(static_cast<int64_t>(u));
        }
        case 0xd0: return integer(static_cast<int8_t>(u8()));
        case 0xd1: return integer(static_cast<int16_t>(be(2)));
        case 0xd2: return integer(static_cast<int32_t>(be(4)));
        case 0xd3: return integer(static_cast<int64_t>(be(8)));
        case 0xd9: return string(u8(), Value::Type::STR);
        case 0xda: return string(be(2), Value::Type::STR);
        case 0xdb: return string(be(4), Value::Type::STR);
        case 0xdc: return array(be(2), depth);
        case 0xdd: return array(be(4), depth);
        case 0xde: return map(be(2), depth);
        case 0xdf: return map(be(4), depth);
        default: fail("unsupported type byte 0x" + hex(tag));
        }
    }

    size_t pos() const { return pos_; }

    [[noreturn]] void fail(const std::string& what) const {
        throw Error("[amd] " + where_ + ": metadata note: " + what + " at byte " + std::to_string(pos_));
    }

private:
    static std::string hex(unsigned x) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%02x", x);
        return buf;
    }
    void need(uint64_t n) const {
        if (n > b_.size() - pos_) fail("truncated (needs " + std::to_string(n) + " more bytes)");
    }
    uint8_t u8() {
        need(1);
        return b_[pos_++];
    }
    uint64_t be(int n) {
        need(n);
        uint64_t x = 0;
        for (int i = 0; i < n; i++) x = x << 8 | b_[pos_++];
        return x;
    }
    static Value integer(int64_t x) {
        Value v;
        v.type = Value::Type::INT;
        v.integer = x;
        return v;
    }
    Value string(uint64_t n, Value::Type type) {
        need(n);
        Value v;
        v.type = type;
        v.str.assign(reinterpret_cast<const char*>(b_.data() + pos_), n);
        pos_ += n;
        return v;
    }
    Value array(uint64_t n, int depth) {
        need(n);  // every element takes at least one byte: bounds the reservation
        Value v;
        v.type = Value::Type::ARRAY;
        v.array.reserve(n);
        for (uint64_t i = 0; i < n; i++) v.array.push_back(value(depth + 1));
        return v;
    }
    Value map(uint64_t n, int depth) {
        need(2 * n);
        Value v;
        v.type = Value::Type::MAP;
        v.map.reserve(n);
        for (uint64_t i = 0; i < n; i++) {
            Value key = value(depth + 1);
            v.map.push_back({std::move(key), value(depth + 1)});
        }
        return v;
    }

    std::span<const uint8_t> b_;
    const std::string& where_;
    size_t pos_ = 0;
};

}  // namespace

const Value* Value::get(std::string_view key) const {
    if (type != Type::MAP) return nullptr;
    for (const auto& [k, v] : map)
        if (k.type == Type::STR && k.str == key) return &v;
    return nullptr;
}

std::optional<int64_t> Value::as_int() const {
    if (type == Type::INT) return integer;
    return std::nullopt;
}

const std::string* Value::as_str() const { return type == Type::STR ? &str : nullptr; }

Value parse(std::span<const uint8_t> bytes, const std::string& where) {
    Reader r(bytes, where);
    Value v = r.value(0);
    for (size_t i = r.pos(); i < bytes.size(); i++)  // notes pad their descriptor with zeros
        if (bytes[i] != 0) r.fail("trailing bytes after the document");
    return v;
}

}  // namespace amd::msgpack
