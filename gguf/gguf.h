// GGUF v2/v3 reader and writer: header, metadata, tensor infos, mmap'd tensor data, split files.
// Every offset, size and count is validated before use; bad input throws gguf::Error, never crashes.
// Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once

#include "gguf/types.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace gguf {

// Thrown for any bad input. The message starts with "[gguf] <file>: " and names the field and offset.
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value. Integers are widened to (u)int64, floats to double; `type` keeps the stored type.
struct Value {
    ValueType type = ValueType::UINT8;
    ValueType elem_type = ValueType::UINT8;  // element type when type == ARRAY
    std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<Value>> v;

    bool is_array() const { return type == ValueType::ARRAY; }
    const std::vector<Value>& array() const { return std::get<std::vector<Value>>(v); }
    bool operator==(const Value&) const = default;

    // Well-formed values for the writer; a number that does not fit the type throws gguf::Error.
    static Value make_uint(ValueType t, uint64_t x);  // UINT8, UINT16, UINT32, UINT64
    static Value make_int(ValueType t, int64_t x);    // INT8, INT16, INT32, INT64
    static Value make_float(ValueType t, double x);   // FLOAT32, FLOAT64
    static Value make_bool(bool b);
    static Value make_string(std::string s);
    static Value make_array(ValueType elem_type, std::vector<Value> items);  // items must be elem_type
};

struct TensorInfo {
    std::string name;
    std::vector<int64_t> dims;  // ggml order: dims[0] is the innermost (contiguous) dimension
    Type type = Type::F32;
    uint64_t offset = 0;        // relative to the data section of its file
    uint64_t n_bytes = 0;
    uint32_t file_index = 0;    // which split part holds it
    uint64_t file_offset = 0;   // absolute offset of the data in that part
    const uint8_t* data = nullptr;  // points into the mmap'd file, never copied

    int64_t n_elements() const;
};

class File;

// A read-only memory mapping of one file.
class Mapping {
public:
    explicit Mapping(const std::string& path);
    ~Mapping();
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }

private:
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
};

class File {
public:
    // Opens `path`. A split model (split.count > 1, named `<name>-00001-of-0000N.gguf`) is opened
    // from its first part and merges all N parts; opening another part is an error naming the first.
    static std::unique_ptr<File> open(const std::string& path);
    // Parses an in-memory image (tests, fuzzing). `name` is used in error messages. The buffer must
    // outlive the File.
    static std::unique_ptr<File> from_memory(const uint8_t* data, size_t size, const std::string& name);

    const std::string& path() const { return path_; }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t file_size() const;  // sum over all split parts
    size_t n_parts() const { return n_parts_; }
    const std::vector<std::string>& part_paths() const { return part_paths_; }
    std::string architecture() const;  // general.architecture, or "" when absent

    // Metadata in file order.
    const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
    // A key starting with '.' is resolved against the architecture: ".block_count" -> "llama.block_count".
    bool has(std::string_view key) const;
    const Value* find(std::string_view key) const;
    // Typed access: T in {bool, (u)int8..64, float, double, std::string, std::vector<...> of those}.
    // Integers convert when the stored value fits; errors name the key and the file.
    template <class T> T get(std::string_view key) const;
    template <class T> T get_or(std::string_view key, T fallback) const {
        return has(key) ? get<T>(key) : fallback;
    }

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;
    const TensorInfo& tensor(std::string_view name) const;  // throws naming the tensor when missing

private:
    struct Part;
    File() = default;
    Part parse(const uint8_t* data, size_t size, const std::string& name, uint32_t file_index);
    void add_part(Part part, bool first);
    std::string resolve(std::string_view key) const;

    std::string path_;
    std::vector<std::string> part_paths_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    size_t n_parts_ = 1;
    std::vector<std::unique_ptr<Mapping>> maps_;
    std::vector<uint64_t> part_sizes_;
    std::vector<std::pair<std::string, Value>> kv_;
    std::map<std::string, size_t, std::less<>> kv_index_;
    std::vector<TensorInfo> tensors_;
    std::map<std::string, size_t, std::less<>> tensor_index_;
};

// Builds a GGUF v3 file in memory: metadata in insertion order, tensors aligned (and padded to the
// alignment, as ggml does). An alignment other than 32 is recorded as general.alignment.
// Invalid keys, values and tensors throw gguf::Error naming them.
class Writer {
public:
    explicit Writer(uint64_t alignment = 32);
    void set(const std::string& key, Value value);  // replaces an existing key in place
    void set_u32(const std::string& key, uint32_t v);
    void set_i32(const std::string& key, int32_t v);
    void set_f32(const std::string& key, float v);
    void set_bool(const std::string& key, bool v);
    void set_str(const std::string& key, const std::string& v);
    void set_str_array(const std::string& key, const std::vector<std::string>& v);
    // `dims` in ggml order; `data` holds the raw bytes of `type` (size checked).
    void add_tensor(const std::string& name, Type type, const std::vector<int64_t>& dims,
                    const void* data, size_t n_bytes);
    std::vector<uint8_t> bytes() const;
    void write(const std::string& path) const;
    // Writes `<prefix>-0000i-of-0000N.gguf` for i = 1..n_parts as gguf-split does: tensors in order,
    // in contiguous runs of about equal count; all metadata in part 1; split.* keys in every part.
    // Returns the paths. 1 <= n_parts <= number of tensors.
    std::vector<std::string> write_split(const std::string& prefix, uint32_t n_parts) const;

private:
    struct PendingTensor {
        std::string name;
        Type type;
        std::vector<int64_t> dims;
        std::vector<uint8_t> data;
    };
    // One file image from a metadata list and a run of tensors.
    std::vector<uint8_t> image(const std::vector<std::pair<std::string, Value>>& kv, size_t first_tensor,
                               size_t n_tensors) const;

    uint64_t alignment_;
    std::vector<std::pair<std::string, Value>> kv_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace gguf
