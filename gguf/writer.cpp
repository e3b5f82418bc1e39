// GGUF v3 writer for tests and tools: validates what it is given (the reader must accept every
// file it writes), lays tensors out aligned and padded as ggml does, and writes split sets.
#include "gguf/gguf_impl.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace gguf {

using namespace detail;

namespace {

constexpr size_t MAX_TENSOR_NAME = 63;  // ggml's GGML_MAX_NAME (64) includes the terminating NUL

struct Buffer {
    std::vector<uint8_t> bytes;

    template <class T> void put(T v) {
        size_t at = bytes.size();
        bytes.resize(at + sizeof(T));
        std::memcpy(bytes.data() + at, &v, sizeof(T));
    }
    void put_string(const std::string& s) {
        put<uint64_t>(s.size());
        bytes.insert(bytes.end(), s.begin(), s.end());
    }
    void pad_to(uint64_t alignment) { bytes.resize(align_up(bytes.size(), alignment), 0); }
};

void put_value(Buffer& b, const Value& v) {
    switch (v.type) {
    case ValueType::UINT8: b.put<uint8_t>(static_cast<uint8_t>(std::get<uint64_t>(v.v))); break;
    case ValueType::UINT16: b.put<uint16_t>(static_cast<uint16_t>(std::get<uint64_t>(v.v))); break;
    case ValueType::UINT32: b.put<uint32_t>(static_cast<uint32_t>(std::get<uint64_t>(v.v))); break;
    case ValueType::UINT64: b.put<uint64_t>(std::get<uint64_t>(v.v)); break;
    case ValueType::INT8: b.put<int8_t>(static_cast<int8_t>(std::get<int64_t>(v.v))); break;
    case ValueType::INT16: b.put<int16_t>(static_cast<int16_t>(std::get<int64_t>(v.v))); break;
    case ValueType::INT32: b.put<int32_t>(static_cast<int32_t>(std::get<int64_t>(v.v))); break;
    case ValueType::INT64: b.put<int64_t>(std::get<int64_t>(v.v)); break;
    case ValueType::FLOAT32: b.put<float>(static_cast<float>(std::get<double>(v.v))); break;
    case ValueType::FLOAT64: b.put<double>(std::get<double>(v.v)); break;
    case ValueType::BOOL: b.put<uint8_t>(std::get<bool>(v.v) ? 1 : 0); break;
    case ValueType::STRING: b.put_string(std::get<std::string>(v.v)); break;
    case ValueType::ARRAY:
        b.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
        b.put<uint64_t>(v.array().size());
        for (const Value& item : v.array()) put_value(b, item);
        break;
    }
}

// A value the reader will read back identically: right variant alternative, numbers within their
// type, arrays of one element type, nesting within the reader's limit.
void check_value(const Value& v, const std::string& key, uint32_t depth) {
    auto bad = [&](const std::string& why) { fail("writer", "metadata '" + key + "': " + why); };
    if (static_cast<uint32_t>(v.type) > static_cast<uint32_t>(ValueType::FLOAT64)) bad("unknown value type");
    if (!well_formed(v)) bad(std::string("the value does not hold a ") + value_type_name(v.type));
    if (const auto* u = std::get_if<uint64_t>(&v.v)) Value::make_uint(v.type, *u);
    if (const auto* i = std::get_if<int64_t>(&v.v)) Value::make_int(v.type, *i);
    if (!v.is_array()) return;
    if (depth + 1 >= MAX_ARRAY_DEPTH) bad("arrays nested deeper than " + std::to_string(MAX_ARRAY_DEPTH));
    for (const Value& item : v.array()) {
        if (item.type != v.elem_type) bad(std::string("an array of ") + value_type_name(v.elem_type) + " holds a " + value_type_name(item.type));
        check_value(item, key, depth + 1);
    }
}

}  // namespace

Writer::Writer(uint64_t alignment) : alignment_(alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > UINT32_MAX)
        fail("writer", "alignment " + std::to_string(alignment) + " is not a u32 power of two");
    if (alignment != DEFAULT_ALIGNMENT) set_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void Writer::set(const std::string& key, Value value) {
    if (key.empty() || !valid_utf8(key)) fail("writer", "metadata key '" + key + "' is empty or not UTF-8");
    check_value(value, key, 0);
    if (key == "general.alignment") {
        const auto* a = std::get_if<uint64_t>(&value.v);
        if (value.type != ValueType::UINT32 || *a == 0 || (*a & (*a - 1)) != 0)
            fail("writer", "general.alignment must be a u32 power of two");
        alignment_ = *a;
    }
    for (auto& [k, v] : kv_) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    kv_.emplace_back(key, std::move(value));
}

void Writer::set_u32(const std::string& key, uint32_t v) { set(key, Value::make_uint(ValueType::UINT32, v)); }
void Writer::set_i32(const std::string& key, int32_t v) { set(key, Value::make_int(ValueType::INT32, v)); }
void Writer::set_f32(const std::string& key, float v) { set(key, Value::make_float(ValueType::FLOAT32, v)); }
void Writer::set_bool(const std::string& key, bool v) { set(key, Value::make_bool(v)); }
void Writer::set_str(const std::string& key, const std::string& v) { set(key, Value::make_string(v)); }

void Writer::set_str_array(const std::string& key, const std::vector<std::string>& v) {
    std::vector<Value> items;
    items.reserve(v.size());
    for (const std::string& s : v) items.push_back(Value::make_string(s));
    set(key, Value::make_array(ValueType::STRING, std::move(items)));
}

void Writer::add_tensor(const std::string& name, Type type, const std::vector<int64_t>& dims, const void* data,
                        size_t n_bytes) {
    std::string where = "tensor '" + name + "'";
    if (name.empty() || name.size() > MAX_TENSOR_NAME || !valid_utf8(name))
        fail("writer", where + ": a name must be 1 to 63 bytes of UTF-8");
    for (const PendingTensor& t : tensors_)
        if (t.name == name) fail("writer", where + ": duplicate tensor name");
    const TypeTraits* tr = type_traits(static_cast<uint32_t>(type));
    if (!tr) fail("writer", where + ": unknown type " + std::to_string(static_cast<uint32_t>(type)));
    if (dims.empty() || dims.size() > MAX_DIMS) fail("writer", where + ": 1 to 4 dimensions allowed");
    int64_t n = 1;
    for (int64_t d : dims) {
        if (d < 0 || (d > 0 && n > INT64_MAX / d)) fail("writer", where + ": bad dimensions");
        n *= d;
    }
    if (dims[0] % tr->block_size != 0)
        fail("writer", where + ": a row of " + std::to_string(dims[0]) + " is not a multiple of the block size " +
                           std::to_string(tr->block_size));
    auto expected = row_bytes(type, n);
    if (!expected || *expected != n_bytes)
        fail("writer", where + ": " + std::to_string(n_bytes) + " bytes given, " + tr->name + " " +
                           std::to_string(n) + " elements need " + (expected ? std::to_string(*expected) : "too many"));
    auto p = static_cast<const uint8_t*>(data);
    tensors_.push_back({name, type, dims, std::vector<uint8_t>(p, p + n_bytes)});
}

std::vector<uint8_t> Writer::image(const std::vector<std::pair<std::string, Value>>& kv, size_t first_tensor,
                                   size_t n_tensors) const {
    Buffer b;
    b.put<uint32_t>(GGUF_MAGIC);
    b.put<uint32_t>(GGUF_VERSION);
    b.put<uint64_t>(n_tensors);
    b.put<uint64_t>(kv.size());
    for (const auto& [key, value] : kv) {
        b.put_string(key);
        b.put<uint32_t>(static_cast<uint32_t>(value.type));
        put_value(b, value);
    }
    uint64_t offset = 0;  // within the data section; every tensor starts aligned
    for (size_t i = first_tensor; i < first_tensor + n_tensors; i++) {
        const PendingTensor& t = tensors_[i];
        b.put_string(t.name);
        b.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
        for (int64_t d : t.dims) b.put<int64_t>(d);
        b.put<uint32_t>(static_cast<uint32_t>(t.type));
        b.put<uint64_t>(offset);
        offset = align_up(offset + t.data.size(), alignment_);
    }
    if (n_tensors > 0) b.pad_to(alignment_);
    for (size_t i = first_tensor; i < first_tensor + n_tensors; i++) {
        b.bytes.insert(b.bytes.end(), tensors_[i].data.begin(), tensors_[i].data.end());
        b.pad_to(alignment_);
    }
    return std::move(b.bytes);
}

std::vector<uint8_t> Writer::bytes() const { return image(kv_, 0, tensors_.size()); }

namespace {

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) fail(path, std::string("cannot create: ") + std::strerror(errno));
    bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = std::fclose(f) == 0 && ok;
    if (!ok) fail(path, "write failed");
}

}  // namespace

void Writer::write(const std::string& path) const { write_file(path, bytes()); }

std::vector<std::string> Writer::write_split(const std::string& prefix, uint32_t n_parts) const {
    if (n_parts < 1 || n_parts > 99999 || n_parts > tensors_.size())
        fail("writer", "cannot split " + std::to_string(tensors_.size()) + " tensors into " + std::to_string(n_parts) + " parts");
    std::vector<std::pair<std::string, Value>> base;  // what every part but the first carries
    if (alignment_ != DEFAULT_ALIGNMENT)
        base.emplace_back("general.alignment", Value::make_uint(ValueType::UINT32, alignment_));
    std::vector<std::string> paths;
    for (uint32_t p = 0; p < n_parts; p++) {
        auto kv = p == 0 ? kv_ : base;
        std::erase_if(kv, [](const auto& e) {
            return e.first == KEY_SPLIT_NO || e.first == KEY_SPLIT_COUNT || e.first == KEY_SPLIT_TENSORS_COUNT;
        });
        kv.emplace_back(KEY_SPLIT_NO, Value::make_uint(ValueType::UINT16, p));
        kv.emplace_back(KEY_SPLIT_COUNT, Value::make_uint(ValueType::UINT16, n_parts));
        kv.emplace_back(KEY_SPLIT_TENSORS_COUNT, Value::make_int(ValueType::INT32, static_cast<int64_t>(tensors_.size())));
        size_t first = tensors_.size() * p / n_parts, last = tensors_.size() * (p + 1) / n_parts;
        paths.push_back(split_part_path(prefix, p + 1, n_parts));
        write_file(paths.back(), image(kv, first, last - first));
    }
    return paths;
}

}  // namespace gguf
