// The GGUF writer: what it writes reads back identically (metadata incl. nested arrays, tensor bytes,
// alignment), it reproduces real files byte for byte, and it writes split sets the reader merges.
#include "common/test_data.h"
#include "gguf/gguf.h"
#include "gguf/quants.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <unistd.h>

namespace {

using gguf::Value;
using gguf::ValueType;

// A fresh directory under /tmp, removed at the end of the test.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        static std::atomic<int> counter{0};
        path = std::filesystem::temp_directory_path() /
               ("tinyllm-gguf-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; i++) v[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 7));
    return v;
}

Value ints(ValueType t, std::initializer_list<int64_t> xs) {
    std::vector<Value> items;
    for (int64_t x : xs) items.push_back(Value::make_int(t, x));
    return Value::make_array(t, std::move(items));
}

// Every value type, nested arrays, and tensors of several types and ranks.
gguf::Writer sample_writer(uint64_t alignment = 32) {
    gguf::Writer w(alignment);
    w.set_str("general.architecture", "llama");
    w.set_str("general.name", "round trip ✓ 模型");
    w.set("t.u8", Value::make_uint(ValueType::UINT8, 255));
    w.set("t.i8", Value::make_int(ValueType::INT8, -128));
    w.set("t.u16", Value::make_uint(ValueType::UINT16, 65535));
    w.set("t.i16", Value::make_int(ValueType::INT16, -32768));
    w.set_u32("t.u32", 4000000000u);
    w.set_i32("t.i32", -2000000000);
    w.set("t.u64", Value::make_uint(ValueType::UINT64, UINT64_MAX));
    w.set("t.i64", Value::make_int(ValueType::INT64, INT64_MIN));
    w.set_f32("t.f32", 1e-5f);
    w.set("t.f64", Value::make_float(ValueType::FLOAT64, 0.1));
    w.set_bool("t.bool", true);
    w.set_str("t.empty_string", "");
    w.set_str_array("t.strings", {"a", "", "<|im_start|>", "\xe2\x96\x81the"});
    w.set("t.empty_array", Value::make_array(ValueType::FLOAT32, {}));
    w.set("llama.attention.head_count_kv", ints(ValueType::INT32, {0, 0, 0, 1}));
    w.set("t.nested", Value::make_array(ValueType::ARRAY, {ints(ValueType::INT16, {1, -2}), ints(ValueType::INT64, {}),
                                                           Value::make_array(ValueType::ARRAY, {ints(ValueType::INT8, {7})})}));
    w.set("t.bools", Value::make_array(ValueType::BOOL, {Value::make_bool(false), Value::make_bool(true)}));

    auto f32 = pattern(4 * 3 * 5, 1);
    w.add_tensor("a.f32", gguf::Type::F32, {3, 5}, f32.data(), f32.size());
    auto f16 = pattern(2 * 7, 2);  // 14 bytes: the next tensor starts after padding
    w.add_tensor("b.f16", gguf::Type::F16, {7}, f16.data(), f16.size());
    std::vector<float> x(64);
    for (size_t i = 0; i < x.size(); i++) x[i] = std::sin(0.37f * i);
    gguf::block_q4_0 q4[2];
    gguf::quantize_row_q4_0(x.data(), q4, 64);
    w.add_tensor("c.q4_0", gguf::Type::Q4_0, {64}, q4, sizeof q4);
    auto q6 = pattern(210 * 2 * 3, 3);
    w.add_tensor("blk.0.ffn_down_exps.weight", gguf::Type::Q6_K, {256, 1, 2, 3}, q6.data(), q6.size());
    return w;
}

// Rebuilds a writer from what the reader saw.
gguf::Writer rewrite(const gguf::File& f) {
    gguf::Writer w(f.alignment());
    for (const auto& [key, value] : f.metadata()) w.set(key, value);
    for (const gguf::TensorInfo& t : f.tensors()) w.add_tensor(t.name, t.type, t.dims, t.data, t.n_bytes);
    return w;
}

}  // namespace

TEST_CASE("writer round trip: identical metadata (nested arrays too) and tensor bytes") {
    gguf::Writer w = sample_writer();
    std::vector<uint8_t> bytes = w.bytes();
    auto f = gguf::File::from_memory(bytes.data(), bytes.size(), "roundtrip.gguf");
    CHECK(f->version() == 3);
    CHECK(f->alignment() == 32);
    REQUIRE(f->metadata().size() == 19);
    CHECK(f->get<std::string>("general.name") == "round trip ✓ 模型");
    CHECK(f->get<uint64_t>("t.u64") == UINT64_MAX);
    CHECK(f->get<int64_t>("t.i64") == INT64_MIN);
    CHECK(f->get<float>("t.f32") == 1e-5f);
    CHECK(f->get<double>("t.f64") == 0.1);
    CHECK(f->get<std::vector<std::string>>("t.strings") == std::vector<std::string>{"a", "", "<|im_start|>", "\xe2\x96\x81the"});
    CHECK(f->get<std::vector<int32_t>>(".attention.head_count_kv") == std::vector<int32_t>{0, 0, 0, 1});
    const Value& nested = *f->find("t.nested");
    REQUIRE(nested.array().size() == 3);
    CHECK(nested.array()[2].array()[0] == ints(ValueType::INT8, {7}));
    CHECK(nested.array()[0].elem_type == ValueType::INT16);

    // Metadata equal in order, types and values; tensors equal in everything.
    gguf::Writer w2 = rewrite(*f);
    CHECK(w2.bytes() == bytes);
    REQUIRE(f->tensors().size() == 4);
    std::vector<uint8_t> expected_f16 = pattern(14, 2);
    const gguf::TensorInfo& b = f->tensor("b.f16");
    CHECK(b.dims == std::vector<int64_t>{7});
    CHECK(b.n_bytes == 14);
    CHECK(std::memcmp(b.data, expected_f16.data(), 14) == 0);
    for (const gguf::TensorInfo& t : f->tensors()) {
        CHECK(t.file_offset % 32 == 0);
        CHECK(t.data == bytes.data() + t.file_offset);
    }
    const gguf::TensorInfo& q6 = f->tensor("blk.0.ffn_down_exps.weight");
    CHECK(q6.dims == std::vector<int64_t>{256, 1, 2, 3});
    CHECK(q6.type == gguf::Type::Q6_K);
    CHECK(q6.n_elements() == 256 * 6);
}

TEST_CASE("writer round trip through a file with a 64-byte alignment") {
    TempDir dir;
    gguf::Writer w = sample_writer(64);
    w.write(dir / "aligned.gguf");
    auto f = gguf::File::open(dir / "aligned.gguf");
    CHECK(f->alignment() == 64);
    CHECK(f->get<uint32_t>("general.alignment") == 64);
    CHECK(f->metadata().front().first == "general.alignment");
    for (const gguf::TensorInfo& t : f->tensors()) CHECK(t.file_offset % 64 == 0);
    CHECK(f->file_size() == std::filesystem::file_size(dir / "aligned.gguf"));
    CHECK(rewrite(*f).bytes() == read_bytes(dir / "aligned.gguf"));
}

TEST_CASE("the writer reproduces real GGUF files byte for byte") {
    REQUIRE_SHARED_DATA();
    for (const char* name : {"models/stories260K-q8_0.gguf", "models/random-kimi-linear-f16.gguf",
                             "models/random-gpt-oss-mxfp4.gguf", "tokenizers/vocab/llama2.vocab.gguf"}) {
        INFO(name);
        std::string path = test_data::shared(name);
        auto f = gguf::File::open(path);
        CHECK(rewrite(*f).bytes() == read_bytes(path));
    }
}

TEST_CASE("a 3-part split set opens from its first part with every tensor") {
    TempDir dir;
    gguf::Writer w = sample_writer();
    auto paths = w.write_split(dir / "x", 3);
    REQUIRE(paths == std::vector<std::string>{dir / "x-00001-of-00003.gguf", dir / "x-00002-of-00003.gguf",
                                              dir / "x-00003-of-00003.gguf"});
    std::vector<uint8_t> whole = w.bytes();
    auto single = gguf::File::from_memory(whole.data(), whole.size(), "whole.gguf");

    auto f = gguf::File::open(paths[0]);
    CHECK(f->n_parts() == 3);
    CHECK(f->part_paths() == paths);
    CHECK(f->get<uint16_t>("split.count") == 3);
    CHECK(f->get<uint16_t>("split.no") == 0);
    CHECK(f->get<int32_t>("split.tensors.count") == 4);
    CHECK(f->get<std::string>("general.name") == "round trip ✓ 模型");
    uint64_t total = 0;
    for (const auto& p : paths) total += std::filesystem::file_size(p);
    CHECK(f->file_size() == total);
    REQUIRE(f->tensors().size() == single->tensors().size());
    std::set<uint32_t> parts_used;
    for (const gguf::TensorInfo& t : single->tensors()) {
        const gguf::TensorInfo& s = f->tensor(t.name);
        CHECK(s.dims == t.dims);
        CHECK(s.type == t.type);
        REQUIRE(s.n_bytes == t.n_bytes);
        CHECK(std::memcmp(s.data, t.data, t.n_bytes) == 0);
        parts_used.insert(s.file_index);
    }
    CHECK(parts_used == std::set<uint32_t>{0, 1, 2});

    // The other parts carry only the split keys, as gguf-split writes them.
    auto part2 = read_bytes(paths[1]);
    auto p2 = gguf::File::from_memory(part2.data(), part2.size(), "part2");
    CHECK(p2->metadata().size() == 3);
    CHECK(p2->get<uint16_t>("split.no") == 1);
}

TEST_CASE("opening a later part of a split set is an error naming the first part") {
    TempDir dir;
    auto paths = sample_writer().write_split(dir / "x", 3);
    REQUIRE_THROWS_MATCHES(gguf::File::open(paths[1]), gguf::Error,
                           Catch::Message("[gguf] " + paths[1] + ": this is part 2 of 3 of a split model (split.no = 1): "
                                          "open the first part, " + paths[0]));
}

TEST_CASE("a split set with a missing or foreign part is an error") {
    TempDir dir;
    auto paths = sample_writer().write_split(dir / "x", 3);
    SECTION("missing part") {
        std::filesystem::remove(paths[2]);
        REQUIRE_THROWS_WITH(gguf::File::open(paths[0]), Catch::Contains(paths[2]) && Catch::Contains("cannot open"));
    }
    SECTION("a part of another set in its place") {
        auto other = sample_writer().write_split(dir / "y", 3);
        std::filesystem::copy_file(other[0], paths[2], std::filesystem::copy_options::overwrite_existing);
        REQUIRE_THROWS_WITH(gguf::File::open(paths[0]), Catch::Contains("expected split.no = 2"));
    }
    SECTION("renamed first part") {
        std::filesystem::rename(paths[0], dir / "renamed.gguf");
        REQUIRE_THROWS_WITH(gguf::File::open(dir / "renamed.gguf"), Catch::Contains("split.count is 3") &&
                                                                        Catch::Contains("-00001-of-00003.gguf"));
    }
}

TEST_CASE("the writer refuses what the reader would refuse") {
    gguf::Writer w;
    auto four = pattern(4, 0);
    w.add_tensor("t", gguf::Type::F32, {1}, four.data(), 4);
    CHECK_THROWS_AS(w.add_tensor("t", gguf::Type::F32, {1}, four.data(), 4), gguf::Error);  // duplicate
    CHECK_THROWS_WITH(w.add_tensor("u", gguf::Type::F32, {2}, four.data(), 4), Catch::Contains("need 8"));
    CHECK_THROWS_AS(w.add_tensor("v", gguf::Type::Q4_0, {16}, four.data(), 4), gguf::Error);  // not whole blocks
    CHECK_THROWS_AS(w.add_tensor("w", gguf::Type::F32, {1, 1, 1, 1, 1}, four.data(), 4), gguf::Error);
    CHECK_THROWS_AS(w.add_tensor(std::string(64, 'n'), gguf::Type::F32, {1}, four.data(), 4), gguf::Error);
    CHECK_THROWS_AS(w.set_str("", "x"), gguf::Error);
    CHECK_THROWS_AS(w.set_str("bad\xff", "x"), gguf::Error);
    CHECK_THROWS_AS(w.set("k", Value{ValueType::UINT32, ValueType::UINT8, std::string("not a number")}), gguf::Error);
    CHECK_THROWS_AS(w.set("k", Value{ValueType::UINT8, ValueType::UINT8, uint64_t(256)}), gguf::Error);
    CHECK_THROWS_AS(Value::make_array(ValueType::INT32, {Value::make_uint(ValueType::UINT32, 1)}), gguf::Error);
    CHECK_THROWS_AS(gguf::Writer(48), gguf::Error);
    CHECK_THROWS_AS(w.write_split("/tmp/never", 2), gguf::Error);  // 1 tensor cannot fill 2 parts
    Value deep = ints(ValueType::INT32, {1});
    for (int i = 0; i < 8; i++) deep = Value::make_array(ValueType::ARRAY, {deep});
    CHECK_THROWS_WITH(w.set("deep", deep), Catch::Contains("nested deeper"));
}

TEST_CASE("setting a key again replaces its value in place") {
    gguf::Writer w;
    w.set_u32("a", 1);
    w.set_u32("b", 2);
    w.set_str("a", "one");
    auto bytes = w.bytes();
    auto f = gguf::File::from_memory(bytes.data(), bytes.size(), "m");
    REQUIRE(f->metadata().size() == 2);
    CHECK(f->metadata()[0].first == "a");
    CHECK(f->get<std::string>("a") == "one");
}
