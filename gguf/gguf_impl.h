// Internals shared by the GGUF reader (gguf.cpp), metadata access (metadata.cpp) and writer (writer.cpp).
#pragma once

#include "gguf/gguf.h"

#include <string>
#include <string_view>

namespace gguf::detail {

constexpr uint32_t GGUF_MAGIC = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t GGUF_VERSION = 3;         // what the writer writes; the reader takes 2 and 3
constexpr uint64_t DEFAULT_ALIGNMENT = 32;
constexpr uint32_t MAX_DIMS = 4;             // ggml's GGML_MAX_DIMS
constexpr uint32_t MAX_ARRAY_DEPTH = 8;      // nested metadata arrays deeper than this are refused

// Sane caps on what metadata may make us allocate, beyond what the file size allows: each stored
// element becomes a Value (~48 bytes), so a 100 MB file of u8 arrays could otherwise take 5 GB.
// Real models stay far below (the largest vocabularies have ~260k tokens, ~500k merges; templates
// are under 20 KB).
constexpr uint64_t MAX_VOCAB = 1 << 21;               // tokenizer.ggml.tokens / scores / token_type
constexpr uint64_t MAX_MERGES = 1 << 22;              // tokenizer.ggml.merges
constexpr uint64_t MAX_ARRAY = 1 << 22;               // any other metadata array
constexpr uint64_t MAX_METADATA_ELEMENTS = 1 << 23;   // all array elements of one file together
constexpr uint64_t MAX_STRING = 1 << 26;              // any metadata string
constexpr uint64_t MAX_TEMPLATE = 1 << 20;            // tokenizer.chat_template*: ChatTemplate's limit

// Split models as llama.cpp's gguf-split writes them: every part carries these keys (u16, u16,
// i32); split.no counts from 0; only the first part holds the model's metadata.
constexpr const char* KEY_SPLIT_NO = "split.no";
constexpr const char* KEY_SPLIT_COUNT = "split.count";
constexpr const char* KEY_SPLIT_TENSORS_COUNT = "split.tensors.count";

// Throws gguf::Error("[gguf] <where>: <what>").
[[noreturn]] void fail(const std::string& where, const std::string& what);

bool valid_utf8(std::string_view s);

// The variant holds the alternative `v.type` needs (array elements are checked by make_array).
bool well_formed(const Value& v);

// "<prefix>-00002-of-00005.gguf" for part 2 of 5 (1-based, as in the file names).
std::string split_part_path(const std::string& prefix, uint32_t part, uint32_t count);

inline uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) / alignment * alignment; }

}  // namespace gguf::detail
