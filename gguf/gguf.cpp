// GGUF reader: a bounds-checked cursor over the mmap'd bytes. Every count is checked against the
// bytes left before anything is allocated and every tensor against its part's data section, so a
// hostile file fails with a message naming the file, the field and the offset — never a crash.
#include "gguf/gguf_impl.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace gguf {

using namespace detail;

// One parsed file image (a whole model, or one part of a split model).
struct File::Part {
    std::string path;
    uint32_t version = 0;
    uint64_t alignment = DEFAULT_ALIGNMENT;
    uint64_t size = 0;
    std::vector<std::pair<std::string, Value>> kv;
    std::vector<TensorInfo> tensors;

    const Value* find(std::string_view key) const {
        for (const auto& [k, v] : kv)
            if (k == key) return &v;
        return nullptr;
    }
    // An integer split.* key, or `fallback` when absent; anything else is an error.
    uint32_t split_key(const char* key, uint32_t fallback) const {
        const Value* v = find(key);
        if (!v) return fallback;
        const auto* u = std::get_if<uint64_t>(&v->v);
        const auto* i = std::get_if<int64_t>(&v->v);
        if (u && *u <= UINT32_MAX) return static_cast<uint32_t>(*u);
        if (i && *i >= 0 && *i <= INT32_MAX) return static_cast<uint32_t>(*i);
        fail(path, std::string(key) + " must be a small non-negative integer");
    }
};

namespace {

// Bounds-checked little-endian reader over one file image.
struct Cursor {
    const uint8_t* data;
    size_t size;
    const std::string& file;
    size_t pos = 0;
    uint64_t elements_left = MAX_METADATA_ELEMENTS;  // array elements this file may still declare

    size_t left() const { return size - pos; }
    // `field` + `detail` name what was being read; joined only on failure (vocabularies hold
    // hundreds of thousands of strings, so the happy path builds no messages).
    [[noreturn]] void truncated(const std::string& field, const char* detail) const {
        fail(file, "truncated while reading " + field + detail + " at offset " + std::to_string(pos) + " (file is " +
                       std::to_string(size) + " bytes)");
    }
    template <class T> T read(const std::string& field, const char* detail = "") {
        if (sizeof(T) > left()) truncated(field, detail);
        T v;
        std::memcpy(&v, data + pos, sizeof(T));
        pos += sizeof(T);
        return v;
    }
    std::string read_string(const std::string& field, uint64_t max_bytes = MAX_STRING) {
        size_t at = pos;
        uint64_t n = read<uint64_t>(field, " length");
        if (n > left())
            fail(file, field + " at offset " + std::to_string(at) + ": string length " + std::to_string(n) +
                           " exceeds the " + std::to_string(left()) + " bytes left in the file");
        if (n > max_bytes)
            fail(file, field + " at offset " + std::to_string(at) + ": string length " + std::to_string(n) +
                           " exceeds the limit of " + std::to_string(max_bytes));
        std::string s(reinterpret_cast<const char*>(data + pos), n);
        pos += n;
        return s;
    }
};

bool known_value_type(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::FLOAT64); }

// Fewest bytes one stored value of type t can take: bounds how many a count may promise.
uint64_t min_value_size(ValueType t) {
    switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: return 1;
    case ValueType::UINT16: case ValueType::INT16: return 2;
    case ValueType::UINT32: case ValueType::INT32: case ValueType::FLOAT32: return 4;
    case ValueType::UINT64: case ValueType::INT64: case ValueType::FLOAT64: return 8;
    case ValueType::STRING: return 8;   // the length
    case ValueType::ARRAY: return 12;   // element type + count
    }
    return 1;
}

// The most elements / bytes a metadata key's arrays and strings may have (gguf_impl.h).
struct KeyCaps {
    uint64_t max_count = MAX_ARRAY;
    uint64_t max_string = MAX_STRING;
};
KeyCaps caps_of(std::string_view key) {
    KeyCaps caps;
    if (key == "tokenizer.ggml.tokens" || key == "tokenizer.ggml.scores" || key == "tokenizer.ggml.token_type")
        caps.max_count = MAX_VOCAB;
    if (key == "tokenizer.ggml.merges") caps.max_count = MAX_MERGES;
    if (key.rfind("tokenizer.chat_template", 0) == 0) caps.max_string = MAX_TEMPLATE;
    return caps;
}

Value read_value(Cursor& c, ValueType type, const std::string& field, uint32_t depth, const KeyCaps& caps) {
    Value v;
    v.type = type;
    switch (type) {
    case ValueType::UINT8: v.v = uint64_t(c.read<uint8_t>(field)); break;
    case ValueType::INT8: v.v = int64_t(c.read<int8_t>(field)); break;
    case ValueType::UINT16: v.v = uint64_t(c.read<uint16_t>(field)); break;
    case ValueType::INT16: v.v = int64_t(c.read<int16_t>(field)); break;
    case ValueType::UINT32: v.v = uint64_t(c.read<uint32_t>(field)); break;
    case ValueType::INT32: v.v = int64_t(c.read<int32_t>(field)); break;
    case ValueType::UINT64: v.v = c.read<uint64_t>(field); break;
    case ValueType::INT64: v.v = c.read<int64_t>(field); break;
    case ValueType::FLOAT32: v.v = double(c.read<float>(field)); break;
    case ValueType::FLOAT64: v.v = c.read<double>(field); break;
    case ValueType::BOOL: {
        size_t at = c.pos;
        uint8_t b = c.read<uint8_t>(field);
        if (b > 1) fail(c.file, field + " at offset " + std::to_string(at) + ": bool value " + std::to_string(b) + " is not 0 or 1");
        v.v = b != 0;
        break;
    }
    case ValueType::STRING: v.v = c.read_string(field, caps.max_string); break;
    case ValueType::ARRAY: {
        size_t at = c.pos;
        if (depth >= MAX_ARRAY_DEPTH)
            fail(c.file, field + " at offset " + std::to_string(at) + ": arrays nested deeper than " + std::to_string(MAX_ARRAY_DEPTH));
        uint32_t et = c.read<uint32_t>(field, " element type");
        if (!known_value_type(et))
            fail(c.file, field + " at offset " + std::to_string(at) + ": unknown array element type " + std::to_string(et));
        v.elem_type = static_cast<ValueType>(et);
        uint64_t n = c.read<uint64_t>(field, " element count");
        if (n > c.left() / min_value_size(v.elem_type))
            fail(c.file, field + " at offset " + std::to_string(at) + ": array count " + std::to_string(n) +
                             " exceeds what the " + std::to_string(c.left()) + " bytes left in the file can hold");
        if (n > caps.max_count)
            fail(c.file, field + " at offset " + std::to_string(at) + ": array count " + std::to_string(n) +
                             " exceeds the limit of " + std::to_string(caps.max_count));
        if (n > c.elements_left)
            fail(c.file, field + " at offset " + std::to_string(at) + ": array count " + std::to_string(n) +
                             " exceeds the " + std::to_string(c.elements_left) + " metadata array elements left of the limit of " +
                             std::to_string(MAX_METADATA_ELEMENTS) + " per file");
        c.elements_left -= n;
        std::vector<Value> items;
        items.reserve(n);
        for (uint64_t i = 0; i < n; i++) items.push_back(read_value(c, v.elem_type, field, depth + 1, caps));
        v.v = std::move(items);
        break;
    }
    }
    return v;
}

// "<prefix>-00001-of-00003.gguf" -> (prefix, 1, 3)
bool parse_split_name(const std::string& path, std::string& prefix, uint32_t& index, uint32_t& count) {
    constexpr std::string_view shape = "-#####-of-#####.gguf";  // '#': a decimal digit
    if (path.size() < shape.size()) return false;
    std::string_view tail = std::string_view(path).substr(path.size() - shape.size());
    for (size_t i = 0; i < shape.size(); i++) {
        bool ok = shape[i] == '#' ? tail[i] >= '0' && tail[i] <= '9' : tail[i] == shape[i];
        if (!ok) return false;
    }
    prefix = path.substr(0, path.size() - shape.size());
    index = static_cast<uint32_t>(std::stoul(std::string(tail.substr(1, 5))));
    count = static_cast<uint32_t>(std::stoul(std::string(tail.substr(10, 5))));
    return true;
}

}  // namespace

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
            int err = errno;
            ::close(fd);
            fail(path, std::string("mmap failed: ") + std::strerror(err));
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
    f->maps_.push_back(std::make_unique<Mapping>(path));
    Part first = f->parse(f->maps_[0]->data(), f->maps_[0]->size(), path, 0);

    uint32_t count = first.split_key(KEY_SPLIT_COUNT, 1), no = first.split_key(KEY_SPLIT_NO, 0);
    std::string prefix;
    uint32_t name_index = 0, name_count = 0;
    bool named = parse_split_name(path, prefix, name_index, name_count);
    if (no != 0) {
        std::string first_part = named ? split_part_path(prefix, 1, name_count) : "the part with split.no = 0";
        fail(path, "this is part " + std::to_string(no + 1) + " of " + std::to_string(count) +
                       " of a split model (split.no = " + std::to_string(no) + "): open the first part, " + first_part);
    }
    if (count == 0) fail(path, "split.count is 0");
    if (count > 1 && (!named || name_index != 1 || name_count != count))
        fail(path, "split.count is " + std::to_string(count) + " but the file name does not follow " +
                       split_part_path("<name>", 1, count) + ", so the other parts cannot be found");

    uint64_t tensors_declared = first.split_key(KEY_SPLIT_TENSORS_COUNT, 0);
    bool has_tensors_count = first.find(KEY_SPLIT_TENSORS_COUNT) != nullptr;
    f->add_part(std::move(first), true);
    for (uint32_t i = 2; i <= count; i++) {
        std::string part_path = split_part_path(prefix, i, count);
        f->maps_.push_back(std::make_unique<Mapping>(part_path));
        Part part = f->parse(f->maps_.back()->data(), f->maps_.back()->size(), part_path, i - 1);
        if (part.split_key(KEY_SPLIT_NO, UINT32_MAX) != i - 1 || part.split_key(KEY_SPLIT_COUNT, 0) != count)
            fail(part_path, "expected split.no = " + std::to_string(i - 1) + " and split.count = " +
                                std::to_string(count) + " in part " + std::to_string(i) + " of " + path);
        f->add_part(std::move(part), false);
    }
    if (count > 1 && has_tensors_count && f->tensors_.size() != tensors_declared)
        fail(path, "split.tensors.count is " + std::to_string(tensors_declared) + " but the " + std::to_string(count) +
                       " parts hold " + std::to_string(f->tensors_.size()) + " tensors");
    return f;
}

std::unique_ptr<File> File::from_memory(const uint8_t* data, size_t size, const std::string& name) {
    std::unique_ptr<File> f(new File());
    f->path_ = name;
    f->add_part(f->parse(data, size, name, 0), true);
    return f;
}

// Merges a parsed part: metadata from the first part only (gguf-split puts it there), tensors
// from every part, their names unique across parts.
void File::add_part(Part part, bool first) {
    if (first) {
        version_ = part.version;
        alignment_ = part.alignment;
        for (auto& [key, value] : part.kv) {
            kv_index_[key] = kv_.size();
            kv_.emplace_back(std::move(key), std::move(value));
        }
    }
    for (TensorInfo& t : part.tensors) {
        if (auto it = tensor_index_.find(t.name); it != tensor_index_.end())
            fail(part.path, "duplicate tensor name '" + t.name + "' (also in " + part_paths_[tensors_[it->second].file_index] + ")");
        tensor_index_[t.name] = tensors_.size();
        tensors_.push_back(std::move(t));
    }
    part_paths_.push_back(part.path);
    part_sizes_.push_back(part.size);
    n_parts_ = part_paths_.size();
}

File::Part File::parse(const uint8_t* data, size_t size, const std::string& name, uint32_t file_index) {
    Part part;
    part.path = name;
    part.size = size;
    Cursor c{data, size, name};

    uint32_t magic = c.read<uint32_t>("magic");
    if (magic != GGUF_MAGIC) {
        char got[5] = {};
        std::memcpy(got, &magic, 4);
        for (char& ch : got)
            if (ch && (ch < 32 || ch > 126)) ch = '?';
        fail(name, std::string("bad magic '") + got + "' at offset 0 (expected 'GGUF'): not a GGUF file");
    }
    part.version = c.read<uint32_t>("version");
    if (part.version == 0x02000000 || part.version == 0x03000000)
        fail(name, "version at offset 4 is byte-swapped: big-endian GGUF files are not supported");
    if (part.version != 2 && part.version != 3)
        fail(name, "unsupported GGUF version " + std::to_string(part.version) + " at offset 4 (supported: 2, 3)");
    uint64_t n_tensors = c.read<uint64_t>("tensor count");
    uint64_t n_kv = c.read<uint64_t>("metadata count");
    // A tensor info takes at least 32 bytes, a key/value at least 14: refuse impossible counts up front.
    if (n_tensors > c.left() / 32)
        fail(name, "tensor count " + std::to_string(n_tensors) + " at offset 8 is more than the file can hold");
    if (n_kv > c.left() / 14)
        fail(name, "metadata count " + std::to_string(n_kv) + " at offset 16 is more than the file can hold");

    std::map<std::string, size_t, std::less<>> seen_keys;
    for (uint64_t i = 0; i < n_kv; i++) {
        size_t at = c.pos;
        std::string key = c.read_string("metadata key " + std::to_string(i));
        if (key.empty()) fail(name, "metadata key " + std::to_string(i) + " at offset " + std::to_string(at) + " is empty");
        if (!valid_utf8(key)) fail(name, "metadata key " + std::to_string(i) + " at offset " + std::to_string(at) + " is not valid UTF-8");
        if (seen_keys.count(key)) fail(name, "duplicate metadata key '" + key + "' at offset " + std::to_string(at));
        seen_keys[key] = i;
        std::string field = "metadata '" + key + "'";
        size_t type_at = c.pos;
        uint32_t t = c.read<uint32_t>(field, " type");
        if (!known_value_type(t))
            fail(name, field + " at offset " + std::to_string(type_at) + ": unknown value type " + std::to_string(t));
        Value v = read_value(c, static_cast<ValueType>(t), field, 0, caps_of(key));
        if (key == "general.alignment") {
            const auto* a = std::get_if<uint64_t>(&v.v);
            if (v.type != ValueType::UINT32 || *a == 0 || (*a & (*a - 1)) != 0)
                fail(name, "general.alignment at offset " + std::to_string(at) + " must be a u32 power of two");
            part.alignment = *a;
        }
        part.kv.emplace_back(std::move(key), std::move(v));
    }

    std::vector<size_t> info_at;  // where each tensor info starts, for messages
    std::map<std::string, size_t, std::less<>> seen_names;
    for (uint64_t i = 0; i < n_tensors; i++) {
        size_t at = c.pos;
        TensorInfo t;
        t.name = c.read_string("tensor " + std::to_string(i) + " name");
        if (t.name.empty()) fail(name, "tensor " + std::to_string(i) + " at offset " + std::to_string(at) + " has an empty name");
        if (!valid_utf8(t.name)) fail(name, "tensor " + std::to_string(i) + " name at offset " + std::to_string(at) + " is not valid UTF-8");
        std::string where = "tensor '" + t.name + "' (info at offset " + std::to_string(at) + ")";
        if (seen_names.count(t.name)) fail(name, where + ": duplicate tensor name");
        seen_names[t.name] = i;
        uint32_t n_dims = c.read<uint32_t>(where, " dimension count");
        if (n_dims == 0 || n_dims > MAX_DIMS)
            fail(name, where + ": " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
        uint64_t n_el = 1;
        for (uint32_t d = 0; d < n_dims; d++) {
            int64_t dim = c.read<int64_t>(where, " dimension");
            if (dim < 0) fail(name, where + ": dimension " + std::to_string(d) + " is " + std::to_string(dim));
            if (dim > 0 && n_el > static_cast<uint64_t>(INT64_MAX) / static_cast<uint64_t>(dim))
                fail(name, where + ": the element count (product of the dimensions) overflows 64 bits");
            n_el *= static_cast<uint64_t>(dim);
            t.dims.push_back(dim);
        }
        size_t type_at = c.pos;
        uint32_t type = c.read<uint32_t>(where, " type");
        const TypeTraits* tr = type_traits(type);
        if (!tr) fail(name, where + ": unknown tensor type " + std::to_string(type) + " at offset " + std::to_string(type_at));
        t.type = tr->type;
        if (t.dims[0] % tr->block_size != 0)
            fail(name, where + ": a row of " + std::to_string(t.dims[0]) + " elements is not a multiple of " + tr->name +
                           "'s block size " + std::to_string(tr->block_size));
        uint64_t blocks = n_el / static_cast<uint64_t>(tr->block_size);
        if (blocks > UINT64_MAX / tr->bytes_per_block) fail(name, where + ": the byte size overflows 64 bits");
        t.n_bytes = blocks * tr->bytes_per_block;
        t.offset = c.read<uint64_t>(where, " data offset");
        t.file_index = file_index;
        part.tensors.push_back(std::move(t));
        info_at.push_back(at);
    }

    // The data section starts at the next multiple of the alignment; tensor offsets are relative to it.
    uint64_t data_start = align_up(c.pos, part.alignment);
    if (n_tensors > 0 && data_start > size)
        fail(name, "truncated: the data section would start at offset " + std::to_string(data_start) +
                       ", past the end of the file (" + std::to_string(size) + " bytes)");
    uint64_t data_size = n_tensors > 0 ? size - data_start : 0;

    std::vector<size_t> order(part.tensors.size());
    for (size_t i = 0; i < order.size(); i++) {
        TensorInfo& t = part.tensors[i];
        std::string where = "tensor '" + t.name + "' (info at offset " + std::to_string(info_at[i]) + ")";
        if (t.offset % part.alignment != 0)
            fail(name, where + ": data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                           std::to_string(part.alignment));
        if (t.offset > data_size || t.n_bytes > data_size - t.offset)
            fail(name, where + ": its " + std::to_string(t.n_bytes) + " bytes at data offset " + std::to_string(t.offset) +
                           " (file offset " + std::to_string(data_start + std::min(t.offset, data_size)) +
                           ") end past the end of the file (" + std::to_string(size) + " bytes)");
        t.file_offset = data_start + t.offset;
        t.data = data + t.file_offset;
        order[i] = i;
    }
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return part.tensors[a].offset < part.tensors[b].offset; });
    for (size_t k = 1; k < order.size(); k++) {
        const TensorInfo& a = part.tensors[order[k - 1]];
        const TensorInfo& b = part.tensors[order[k]];
        if (a.offset + a.n_bytes > b.offset)
            fail(name, "tensors '" + a.name + "' [" + std::to_string(a.file_offset) + ", " + std::to_string(a.file_offset + a.n_bytes) +
                           ") and '" + b.name + "' [" + std::to_string(b.file_offset) + ", " +
                           std::to_string(b.file_offset + b.n_bytes) + ") overlap");
    }
    return part;
}

uint64_t File::file_size() const {
    uint64_t n = 0;
    for (uint64_t s : part_sizes_) n += s;
    return n;
}

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
