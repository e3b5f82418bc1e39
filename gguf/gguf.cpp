// GGUF reader: a bounds-checked cursor over the mmap'd bytes; every count is checked against the
// bytes left before anything is allocated, so hostile files fail with a message, never a crash.
#include "gguf/gguf.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <regex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gguf {

namespace {

constexpr uint32_t GGUF_MAGIC = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t MAX_DIMS = 4;
constexpr uint32_t MAX_ARRAY_DEPTH = 8;

[[noreturn]] void fail(const std::string& file, const std::string& what) {
    throw Error("[gguf] " + file + ": " + what);
}

bool valid_utf8(std::string_view s) {
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
        static constexpr uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += n + 1;
    }
    return true;
}

// Bounds-checked little-endian reader over one file image.
struct Cursor {
    const uint8_t* data;
    size_t size;
    size_t pos = 0;
    const std::string& file;

    [[noreturn]] void truncated(const char* field) const {
        fail(file, std::string("truncated while reading ") + field + " at offset " + std::to_string(pos) +
                       " (file is " + std::to_string(size) + " bytes)");
    }
    void need(uint64_t n, const char* field) const {
        if (n > size - pos) truncated(field);
    }
    template <class T> T read(const char* field) {
        need(sizeof(T), field);
        T v;
        std::memcpy(&v, data + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    std::string read_string(const char* field) {
        size_t at = pos;
        uint64_t n = read<uint64_t>(field);
        if (n > size - pos)
            fail(file, std::string(field) + " at offset " + std::to_string(at) + ": string length " +
                           std::to_string(n) + " exceeds the " + std::to_string(size - pos) + " bytes left");
        std::string s(reinterpret_cast<const char*>(data + pos), n);
        pos += n;
        return s;
    }
};

size_t scalar_size(ValueType t) {
    switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;  // at least the length prefix
    case ValueType::ARRAY: return 12;  // at least type + count
    }
    return 0;
}

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

Value read_value(Cursor& c, ValueType type, const std::string& key, uint32_t depth) {
    Value v;
    v.type = type;
    switch (type) {
    case ValueType::UINT8: v.v = uint64_t(c.read<uint8_t>(key.c_str())); break;
    case ValueType::INT8: v.v = int64_t(c.read<int8_t>(key.c_str())); break;
    case ValueType::UINT16: v.v = uint64_t(c.read<uint16_t>(key.c_str())); break;
    case ValueType::INT16: v.v = int64_t(c.read<int16_t>(key.c_str())); break;
    case ValueType::UINT32: v.v = uint64_t(c.read<uint32_t>(key.c_str())); break;
    case ValueType::INT32: v.v = int64_t(c.read<int32_t>(key.c_str())); break;
    case ValueType::UINT64: v.v = c.read<uint64_t>(key.c_str()); break;
    case ValueType::INT64: v.v = c.read<int64_t>(key.c_str()); break;
    case ValueType::FLOAT32: v.v = double(c.read<float>(key.c_str())); break;
    case ValueType::FLOAT64: v.v = c.read<double>(key.c_str()); break;
    case ValueType::BOOL: {
        size_t at = c.pos;
        uint8_t b = c.read<uint8_t>(key.c_str());
        if (b > 1) fail(c.file, "metadata '" + key + "' at offset " + std::to_string(at) + ": bool value " +
                                    std::to_string(b) + " is not 0 or 1");
        v.v = b != 0;
        break;
    }
    case ValueType::STRING: v.v = c.read_string(key.c_str()); break;
    case ValueType::ARRAY: {
        if (depth >= MAX_ARRAY_DEPTH) fail(c.file, "metadata '" + key + "': arrays nested too deeply");
        size_t at = c.pos;
        uint32_t et = c.read<uint32_t>(key.c_str());
        if (!known_value_type(et))
            fail(c.file, "metadata '" + key + "' at offset " + std::to_string(at) + ": unknown array element type " +
                             std::to_string(et));
        v.elem_type = static_cast<ValueType>(et);
        uint64_t n = c.read<uint64_t>(key.c_str());
        if (n > (c.size - c.pos) / scalar_size(v.elem_type))
            fail(c.file, "metadata '" + key + "' at offset " + std::to_string(at) + ": array count " +
                             std::to_string(n) + " exceeds the bytes left in the file");
        std::vector<Value> items;
        items.reserve(n);
        for (uint64_t i = 0; i < n; i++) items.push_back(read_value(c, v.elem_type, key, depth + 1));
        v.v = std::move(items);
        break;
    }
    }
    return v;
}

// "<prefix>-00001-of-00003.gguf" -> (prefix, 1, 3)
bool parse_split_name(const std::string& path, std::string& prefix, int& index, int& count) {
    static const std::regex re(R"((.*)-(\d{5})-of-(\d{5})\.gguf$)");
    std::smatch m;
    if (!std::regex_match(path, m, re)) return false;
    prefix = m[1];
    index = std::stoi(m[2]);
    count = std::stoi(m[3]);
    return true;
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
            if (*u > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
            out = static_cast<T>(*u);
            return true;
        }
        if (auto i = std::get_if<int64_t>(&v.v)) {
            if (*i < static_cast<int64_t>(std::numeric_limits<T>::min())) return false;
            if (*i > 0 && static_cast<uint64_t>(*i) > static_cast<uint64_t>(std::numeric_limits<T>::max())) return false;
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

}  // namespace

const char* value_type_name(ValueType t) {
    static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "string", "array", "u64", "i64", "f64"};
    auto i = static_cast<uint32_t>(t);
    return i < 13 ? names[i] : "?";
}

int64_t TensorInfo::n_elements() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
}

Mapping::Mapping(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(path, "not a regular file");
    }
    size_ = static_cast<size_t>(st.st_size);
    if (size_ > 0) {
        void* p = mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            ::close(fd);
            fail(path, std::string("mmap failed: ") + std::strerror(errno));
        }
        data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
}

Mapping::~Mapping() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

std::unique_ptr<File> File::open(const std::string& path) {
    std::unique_ptr<File> f(new File());
    f->path_ = path;
    std::string prefix;
    int index = 0, count = 0;
    std::vector<std::string> parts{path};
    if (parse_split_name(path, prefix, index, count)) {
        if (index != 1)
            fail(path, "this is part " + std::to_string(index) + " of " + std::to_string(count) +
                           " of a split model: open the first part (" + prefix + "-00001-of-" +
                           path.substr(path.size() - 10, 5) + ".gguf)");
        if (count < 1) fail(path, "split count is 0");
        parts.clear();
        char buf[32];
        for (int i = 1; i <= count; i++) {
            std::snprintf(buf, sizeof buf, "-%05d-of-%05d.gguf", i, count);
            parts.push_back(prefix + buf);
        }
    }
    f->n_parts_ = parts.size();
    for (size_t i = 0; i < parts.size(); i++) {
        f->maps_.push_back(std::make_unique<Mapping>(parts[i]));
        f->parse(f->maps_.back()->data(), f->maps_.back()->size(), parts[i], static_cast<uint32_t>(i), i == 0);
    }
    if (parts.size() > 1) {
        auto declared = f->get_or<uint16_t>("split.count", 0);
        if (declared != parts.size())
            fail(path, "split.count is " + std::to_string(declared) + " but the file name says " +
                           std::to_string(parts.size()) + " parts");
    }
    return f;
}

std::unique_ptr<File> File::from_memory(const uint8_t* data, size_t size, const std::string& name) {
    std::unique_ptr<File> f(new File());
    f->path_ = name;
    f->parse(data, size, name, 0, true);
    return f;
}

void File::parse(const uint8_t* data, size_t size, const std::string& name, uint32_t file_index, bool first) {
    Cursor c{data, size, 0, name};
    uint32_t magic = c.read<uint32_t>("magic");
    if (magic != GGUF_MAGIC) {
        char got[5] = {};
        std::memcpy(got, &magic, 4);
        for (char& ch : got) if (ch && (ch < 32 || ch > 126)) ch = '?';
        fail(name, std::string("bad magic '") + got + "' at offset 0 (expected 'GGUF'): not a GGUF file");
    }
    uint32_t version = c.read<uint32_t>("version");
    if (version != 2 && version != 3)
        fail(name, "unsupported GGUF version " + std::to_string(version) + " at offset 4 (supported: 2, 3)");
    if (first) version_ = version;
    uint64_t n_tensors = c.read<uint64_t>("tensor count");
    uint64_t n_kv = c.read<uint64_t>("metadata count");
    // Each tensor info needs >= 24 bytes, each key/value >= 13: reject impossible counts up front.
    if (n_tensors > (size - c.pos) / 24)
        fail(name, "tensor count " + std::to_string(n_tensors) + " at offset 8 is larger than the file allows");
    if (n_kv > (size - c.pos) / 13)
        fail(name, "metadata count " + std::to_string(n_kv) + " at offset 16 is larger than the file allows");

    uint64_t alignment = 32;
    std::map<std::string, size_t, std::less<>> part_keys;
    for (uint64_t i = 0; i < n_kv; i++) {
        size_t at = c.pos;
        std::string key = c.read_string("metadata key");
        if (key.empty()) fail(name, "empty metadata key at offset " + std::to_string(at));
        if (!valid_utf8(key)) fail(name, "metadata key at offset " + std::to_string(at) + " is not valid UTF-8");
        if (part_keys.count(key)) fail(name, "duplicate metadata key '" + key + "' at offset " + std::to_string(at));
        part_keys[key] = i;
        size_t tat = c.pos;
        uint32_t t = c.read<uint32_t>("metadata type");
        if (!known_value_type(t))
            fail(name, "metadata '" + key + "' at offset " + std::to_string(tat) + ": unknown value type " +
                           std::to_string(t));
        Value v = read_value(c, static_cast<ValueType>(t), key, 0);
        if (key == "general.alignment") {
            uint32_t a = 0;
            if (v.type != ValueType::UINT32 || !convert(v, a) || a == 0 || (a & (a - 1)) != 0)
                fail(name, "general.alignment at offset " + std::to_string(at) + " must be a power-of-two u32");
            alignment = a;
        }
        if (first) {
            kv_index_[key] = kv_.size();
            kv_.emplace_back(std::move(key), std::move(v));
        }
    }
    if (first) alignment_ = alignment;

    struct Raw { TensorInfo info; size_t at; };
    std::vector<Raw> raw;
    raw.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; i++) {
        size_t at = c.pos;
        TensorInfo t;
        t.name = c.read_string("tensor name");
        if (!valid_utf8(t.name)) fail(name, "tensor name at offset " + std::to_string(at) + " is not valid UTF-8");
        uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
        if (n_dims == 0 || n_dims > MAX_DIMS)
            fail(name, "tensor '" + t.name + "' at offset " + std::to_string(at) + ": " + std::to_string(n_dims) +
                           " dimensions (1 to 4 allowed)");
        uint64_t n_el = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            int64_t dim = c.read<int64_t>("tensor dimension");
            if (dim <= 0)
                fail(name, "tensor '" + t.name + "' at offset " + std::to_string(at) + ": dimension " +
                               std::to_string(d) + " is " + std::to_string(dim));
            if (n_el > static_cast<uint64_t>(INT64_MAX) / static_cast<uint64_t>(dim))
                fail(name, "tensor '" + t.name + "' at offset " + std::to_string(at) +
                               ": element count overflows 64 bits");
            n_el *= static_cast<uint64_t>(dim);
            t.dims.push_back(dim);
        }
        uint32_t type = c.read<uint32_t>("tensor type");
        const TypeTraits* tr = type_traits(type);
        if (!tr)
            fail(name, "tensor '" + t.name + "' at offset " + std::to_string(at) + ": unknown tensor type " +
                           std::to_string(type));
        t.type = tr->type;
        if (t.dims[0] % tr->block_size != 0)
            fail(name, "tensor '" + t.name + "': row of " + std::to_string(t.dims[0]) + " elements is not a multiple of " +
                           tr->name + "'s block size " + std::to_string(tr->block_size));
        uint64_t blocks = n_el / tr->block_size;
        if (blocks > UINT64_MAX / tr->bytes_per_block)
            fail(name, "tensor '" + t.name + "': byte size overflows 64 bits");
        t.n_bytes = blocks * tr->bytes_per_block;
        t.offset = c.read<uint64_t>("tensor offset");
        t.file_index = file_index;
        raw.push_back({std::move(t), at});
    }

    // Data section starts at the next multiple of the alignment.
    uint64_t data_start = (c.pos + alignment - 1) / alignment * alignment;
    if (n_tensors > 0 && data_start > size)
        fail(name, "data section would start at offset " + std::to_string(data_start) + ", past the end of the file");
    uint64_t data_size = n_tensors > 0 ? size - data_start : 0;

    std::vector<std::pair<uint64_t, size_t>> spans;  // (offset, index into raw) to detect overlaps
    for (size_t i = 0; i < raw.size(); i++) {
        TensorInfo& t = raw[i].info;
        std::string where = "tensor '" + t.name + "' (info at offset " + std::to_string(raw[i].at) + ")";
        if (t.offset % alignment != 0)
            fail(name, where + ": data offset " + std::to_string(t.offset) + " is not aligned to " +
                           std::to_string(alignment));
        if (t.offset > data_size || t.n_bytes > data_size - t.offset)
            fail(name, where + ": data [" + std::to_string(data_start + t.offset) + ", " +
                           std::to_string(data_start + t.offset + t.n_bytes) + ") ends past end of file (" +
                           std::to_string(size) + " bytes)");
        t.data = data + data_start + t.offset;
        if (tensor_index_.count(t.name)) fail(name, where + ": duplicate tensor name");
        spans.emplace_back(t.offset, i);
        tensor_index_[t.name] = tensors_.size() + i;
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); i++) {
        const TensorInfo& a = raw[spans[i - 1].second].info;
        const TensorInfo& b = raw[spans[i].second].info;
        if (a.offset + a.n_bytes > b.offset)
            fail(name, "tensors '" + a.name + "' and '" + b.name + "' overlap in the data section");
    }
    for (Raw& r : raw) tensors_.push_back(std::move(r.info));
    part_sizes_.push_back(size);
}

uint64_t File::file_size() const {
    uint64_t n = 0;
    for (uint64_t s : part_sizes_) n += s;
    return n;
}

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

const TensorInfo* File::find_tensor(std::string_view name) const {
    auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const TensorInfo& File::tensor(std::string_view name) const {
    const TensorInfo* t = find_tensor(name);
    if (!t) fail(path_, "missing tensor '" + std::string(name) + "'");
    return *t;
}

}  // namespace gguf
