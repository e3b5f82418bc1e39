// Corrupt and hostile GGUF files: every truncation point of a small file, one case per malformation,
// and random byte flips. Each must end in a gguf::Error naming the file, the field and the offset —
// never a crash (this suite also runs under ASAN+UBSAN, see scripts/test.sh).
#include "common/test_data.h"
#include "gguf/gguf.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unistd.h>

namespace {

constexpr uint32_t MAGIC = 0x46554747;
constexpr uint32_t T_U32 = 4, T_BOOL = 7, T_STRING = 8, T_ARRAY = 9, T_U64 = 10;

// Writes GGUF bytes field by field, valid or not (gguf::Writer refuses to write broken files).
struct Raw {
    std::vector<uint8_t> b;

    template <class T> Raw& put(T v) {
        size_t at = b.size();
        b.resize(at + sizeof(T));
        std::memcpy(b.data() + at, &v, sizeof(T));
        return *this;
    }
    Raw& str(std::string_view s) {
        put<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Raw& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3, uint32_t magic = MAGIC) {
        return put(magic).put(version).put(n_tensors).put(n_kv);
    }
    Raw& kv_u32(std::string_view key, uint32_t v) { return str(key).put(T_U32).put(v); }
    Raw& kv_str(std::string_view key, std::string_view v) { return str(key).put(T_STRING).str(v); }
    Raw& tensor(std::string_view name, std::vector<int64_t> dims, uint32_t type, uint64_t offset) {
        str(name).put(static_cast<uint32_t>(dims.size()));
        for (int64_t d : dims) put(d);
        return put(type).put(offset);
    }
    Raw& pad(size_t alignment = 32) {
        b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
        return *this;
    }
    Raw& zeros(size_t n) {
        b.resize(b.size() + n, 0);
        return *this;
    }
};

// Parses an exact-size heap copy, so that any read past the end is an ASAN error.
std::unique_ptr<gguf::File> parse(const std::vector<uint8_t>& bytes, size_t len, const std::string& name) {
    auto copy = std::make_unique<uint8_t[]>(len + 1);
    std::memcpy(copy.get(), bytes.data(), len);
    auto f = gguf::File::from_memory(copy.get(), len, name);
    // Touch everything the file claims, as a loader would.
    uint64_t sum = 0;
    for (const gguf::TensorInfo& t : f->tensors())
        for (uint64_t i = 0; i < t.n_bytes; i++) sum += t.data[i];
    (void)sum;
    return f;
}

// The file must be refused with a gguf::Error naming it and containing every `parts`.
void expect_error(const Raw& raw, std::initializer_list<std::string> parts) {
    try {
        parse(raw.b, raw.b.size(), "corrupt.gguf");
        FAIL("parsed without error; expected: " << *parts.begin());
    } catch (const gguf::Error& e) {
        std::string msg = e.what();
        INFO(msg);
        CHECK(msg.rfind("[gguf] corrupt.gguf: ", 0) == 0);
        for (const std::string& p : parts) CHECK(msg.find(p) != std::string::npos);
    }
}

// A 2-tensor file whose last tensor ends exactly at the end of the file: every truncation is damage.
std::vector<uint8_t> small_file() {
    gguf::Writer w;
    w.set_str("general.architecture", "llama");
    w.set_u32("llama.block_count", 2);
    w.set("tokenizer.ggml.scores", gguf::Value::make_array(gguf::ValueType::FLOAT32, {gguf::Value::make_float(gguf::ValueType::FLOAT32, 0.5)}));
    w.set("nested", gguf::Value::make_array(gguf::ValueType::ARRAY, {gguf::Value::make_array(gguf::ValueType::STRING, {gguf::Value::make_string("x")})}));
    w.set_bool("flag", true);
    std::vector<uint8_t> a(4 * 3, 1), q(34 * 4, 3), c(4 * 40, 4);
    w.add_tensor("a", gguf::Type::F32, {3}, a.data(), a.size());        // 12 bytes, padded to 32
    w.add_tensor("b", gguf::Type::Q8_0, {64, 2}, q.data(), q.size());   // 136 bytes, padded to 160
    w.add_tensor("c", gguf::Type::F32, {40}, c.data(), c.size());       // 160 bytes: no padding after
    return w.bytes();
}

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace

TEST_CASE("corrupt: the hand-made baseline file is valid") {
    Raw r;
    r.header(1, 1).kv_str("general.architecture", "llama").tensor("w", {8}, 0, 0).pad().zeros(32);
    auto f = parse(r.b, r.b.size(), "ok.gguf");
    CHECK(f->tensor("w").n_bytes == 32);
    auto bytes = small_file();
    CHECK(parse(bytes, bytes.size(), "small.gguf")->tensors().size() == 3);
}

TEST_CASE("corrupt: every truncation point of a small file is an error") {
    auto bytes = small_file();
    size_t errors = 0;
    for (size_t len = 0; len < bytes.size(); len++) {
        INFO("truncated to " << len << " of " << bytes.size() << " bytes");
        try {
            parse(bytes, len, "trunc.gguf");
            FAIL("parsed without error");
        } catch (const gguf::Error& e) {
            CHECK(std::string(e.what()).rfind("[gguf] trunc.gguf: ", 0) == 0);
            errors++;
        }
    }
    CHECK(errors == bytes.size());
}

TEST_CASE("corrupt: bad magic and unsupported versions") {
    expect_error(Raw().header(0, 0, 3, 0x46554758), {"bad magic 'XGUF'", "offset 0", "not a GGUF file"});
    expect_error(Raw().header(0, 0, 1), {"unsupported GGUF version 1", "offset 4"});
    expect_error(Raw().header(0, 0, 4), {"unsupported GGUF version 4"});
    expect_error(Raw().header(0, 0, 0x03000000), {"big-endian"});
}

TEST_CASE("corrupt: counts and lengths larger than the file") {
    expect_error(Raw().header(uint64_t(1) << 40, 0), {"tensor count 1099511627776", "offset 8"});
    expect_error(Raw().header(0, UINT64_MAX), {"metadata count", "offset 16"});
    expect_error(Raw().header(0, 1).put<uint64_t>(1u << 30).zeros(16), {"string length 1073741824", "offset 24"});
    Raw array_count;
    array_count.header(0, 1).str("k").put(T_ARRAY).put(T_U64).put<uint64_t>(1000).zeros(64);
    expect_error(array_count, {"metadata 'k'", "array count 1000", "offset 37"});
    Raw value_string;
    value_string.header(0, 1).str("k").put(T_STRING).put<uint64_t>(UINT64_MAX);
    expect_error(value_string, {"metadata 'k'", "string length 18446744073709551615"});
    Raw tensor_name;
    tensor_name.header(1, 0).put<uint64_t>(1000).zeros(40);
    expect_error(tensor_name, {"tensor 0 name", "string length 1000"});
}

TEST_CASE("corrupt: unknown value types and bad values") {
    expect_error(Raw().header(0, 1).str("k").put<uint32_t>(13).zeros(8), {"metadata 'k'", "unknown value type 13", "offset 33"});
    expect_error(Raw().header(0, 1).str("k").put(T_ARRAY).put<uint32_t>(99).put<uint64_t>(0), {"unknown array element type 99"});
    expect_error(Raw().header(0, 1).str("k").put(T_BOOL).put<uint8_t>(2), {"bool value 2", "offset 37"});
    Raw deep;
    deep.header(0, 1).str("k").put(T_ARRAY);
    for (int i = 0; i < 9; i++) deep.put(T_ARRAY).put<uint64_t>(1);
    deep.put(T_U32).put<uint64_t>(0);
    expect_error(deep, {"metadata 'k'", "nested deeper than 8"});
    expect_error(Raw().header(0, 1).kv_str("general.alignment", "32"), {"general.alignment", "u32 power of two"});
    expect_error(Raw().header(0, 1).kv_u32("general.alignment", 48), {"general.alignment", "offset 24"});
    expect_error(Raw().header(0, 1).kv_u32("general.alignment", 0), {"general.alignment"});
}

TEST_CASE("corrupt: keys that are empty, not UTF-8, or duplicated") {
    expect_error(Raw().header(0, 1).kv_u32("", 1), {"metadata key 0 at offset 24 is empty"});
    expect_error(Raw().header(0, 1).kv_u32("bad\xc3\x28", 1), {"metadata key 0 at offset 24", "not valid UTF-8"});
    expect_error(Raw().header(0, 1).kv_u32("overlong\xc0\x80", 1), {"not valid UTF-8"});
    expect_error(Raw().header(0, 1).kv_u32("surrogate\xed\xa0\x80", 1), {"not valid UTF-8"});
    expect_error(Raw().header(0, 1).kv_u32("cut\xe2\x82", 1), {"not valid UTF-8"});
    expect_error(Raw().header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2), {"duplicate metadata key 'a.b'", "offset 43"});
}

TEST_CASE("corrupt: tensor infos with bad dimensions or types") {
    auto one = [](std::vector<int64_t> dims, uint32_t type) {
        Raw r;
        r.header(1, 0).tensor("w", std::move(dims), type, 0).pad().zeros(64);
        return r;
    };
    expect_error(one({}, 0), {"tensor 'w' (info at offset 24)", "0 dimensions"});
    expect_error(one({1, 1, 1, 1, 1}, 0), {"5 dimensions"});
    expect_error(one({4, -3}, 0), {"tensor 'w'", "dimension 1 is -3"});
    expect_error(one({int64_t(1) << 32, int64_t(1) << 32}, 0), {"tensor 'w'", "overflows 64 bits"});
    expect_error(one({int64_t(1) << 31, int64_t(1) << 31}, 28), {"tensor 'w'", "byte size overflows"});  // f64
    expect_error(one({8}, 4), {"unknown tensor type 4 at offset 45"});  // a removed ggml id
    expect_error(one({8}, 1000), {"unknown tensor type 1000"});
    expect_error(one({16}, 2), {"row of 16 elements is not a multiple of q4_0's block size 32"});
    Raw bad_name;
    bad_name.header(1, 0).tensor("w\xff", {8}, 0, 0).pad().zeros(32);
    expect_error(bad_name, {"tensor 0 name at offset 24", "not valid UTF-8"});
    expect_error(Raw().header(1, 0).tensor("", {8}, 0, 0).pad().zeros(32), {"tensor 0 at offset 24 has an empty name"});
}

TEST_CASE("corrupt: tensor data misplaced") {
    expect_error(Raw().header(1, 0).tensor("w", {8}, 0, 4).pad().zeros(64),
                 {"tensor 'w'", "data offset 4 is not a multiple of the alignment 32"});
    expect_error(Raw().header(1, 0).tensor("w", {8}, 0, 1024).pad().zeros(64), {"tensor 'w'", "end past the end of the file"});
    expect_error(Raw().header(1, 0).tensor("w", {1000}, 0, 0).pad().zeros(64), {"its 4000 bytes", "file offset 64"});
    expect_error(Raw().header(1, 0).tensor("w", {8}, 0, 0), {"truncated: the data section would start at offset 64"});
    expect_error(Raw().header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad().zeros(128),
                 {"tensors 'a' [96, 160) and 'b' [128, 192) overlap"});
    expect_error(Raw().header(2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).pad().zeros(64),
                 {"tensor 'a' (info at offset 57): duplicate tensor name"});
}

TEST_CASE("corrupt: random byte flips never crash (fixed seed)") {
    auto bytes = small_file();
    uint64_t state = 20261130;
    static const uint64_t interesting[] = {0, 1, 31, 32, 0x7f, 0xff, 0xffff, 0xffffffffull, 1ull << 31, 1ull << 32,
                                           1ull << 62, 1ull << 63, UINT64_MAX, UINT64_MAX - 31};
    size_t parsed = 0, refused = 0;
    for (int iter = 0; iter < 4000; iter++) {
        std::vector<uint8_t> m = bytes;
        int n_mutations = 1 + static_cast<int>(splitmix64(state) % 4);
        for (int k = 0; k < n_mutations; k++) {
            size_t at = splitmix64(state) % m.size();
            switch (splitmix64(state) % 3) {
            case 0: m[at] ^= static_cast<uint8_t>(1 << (splitmix64(state) % 8)); break;
            case 1: m[at] = static_cast<uint8_t>(splitmix64(state)); break;
            case 2: {  // a field-sized "interesting" value, as hand-crafted exploits use
                uint64_t v = interesting[splitmix64(state) % std::size(interesting)];
                size_t width = splitmix64(state) % 2 ? 8 : 4;
                at = std::min(at, m.size() - width);
                std::memcpy(m.data() + at, &v, width);
                break;
            }
            }
        }
        size_t len = splitmix64(state) % 8 == 0 ? splitmix64(state) % m.size() : m.size();
        try {
            auto f = parse(m, len, "fuzz.gguf");
            for (const auto& [key, value] : f->metadata()) (void)value_type_name(value.type);
            parsed++;
        } catch (const gguf::Error&) {
            refused++;
        }
    }
    INFO(parsed << " mutants parsed, " << refused << " refused");
    CHECK(parsed + refused == 4000);
    CHECK(refused > 1000);  // the mutations do reach the validation
}

TEST_CASE("corrupt: files that cannot be opened are errors naming the path") {
    CHECK_THROWS_WITH(gguf::File::open("/nonexistent/model.gguf"),
                      Catch::StartsWith("[gguf] /nonexistent/model.gguf: cannot open"));
    CHECK_THROWS_WITH(gguf::File::open("/tmp"), Catch::Contains("not a regular file"));
    auto empty = std::filesystem::temp_directory_path() / ("tinyllm-empty-" + std::to_string(::getpid()) + ".gguf");
    std::ofstream(empty).close();
    CHECK_THROWS_WITH(gguf::File::open(empty.string()), Catch::Contains("truncated while reading magic at offset 0"));
    std::filesystem::remove(empty);
}
