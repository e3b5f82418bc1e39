// Metadata that would make the reader allocate far more than the file holds: counts within the file
// size but beyond a sane cap are refused before anything is allocated (peak RSS measured in a child).
#include "common/child_process.h"
#include "common/test_data.h"
#include "gguf/gguf.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <unistd.h>

namespace {

// A file from the writer with `key` as a one-element string array, whose count is then patched to
// `count` and the file extended (sparse, zeros: empty strings) until it can hold that many.
std::string file_with_array_count(const std::string& key, uint64_t count) {
    gguf::Writer w;
    w.set_str("general.architecture", "llama");
    w.set_str_array(key, {"a"});
    std::vector<uint8_t> bytes = w.bytes();
    // key bytes, then u32 type (array), u32 element type (string), u64 count
    auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
    REQUIRE(at != bytes.end());
    size_t count_at = static_cast<size_t>(at - bytes.begin()) + key.size() + 8;
    uint64_t old = 0;
    std::memcpy(&old, bytes.data() + count_at, 8);
    REQUIRE(old == 1);
    std::memcpy(bytes.data() + count_at, &count, 8);
    std::string path = (std::filesystem::temp_directory_path() / ("tinyllm-limits-" + std::to_string(getpid()) + ".gguf")).string();
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    REQUIRE(ftruncate(fd, static_cast<off_t>(bytes.size() + count * 8 + 4096)) == 0);
    close(fd);
    return path;
}

// Opens `path` in a child; it must fail with a gguf::Error containing `expected`, fast and small.
void expect_refused(const std::string& path, const std::string& expected) {
    test_child::Result r = test_child::run([&](int& code) {
        try {
            gguf::File::open(path);
            code = 1;
            return std::string("opened");
        } catch (const gguf::Error& e) {
            code = 10;
            return std::string(e.what());
        }
    });
    std::filesystem::remove(path);
    INFO("exit " << r.code << ", CPU " << r.cpu_seconds << " s, peak RSS " << r.peak_rss_kb / 1024 << " MB: " << r.message);
    CHECK(r.code == 10);
    CHECK(r.message.find(expected) != std::string::npos);
    CHECK(r.cpu_seconds < 0.5 * test_child::SLOWDOWN);
    CHECK(r.peak_rss_kb < 128 * 1024 + test_child::RSS_SLACK_KB);
}

}  // namespace

TEST_CASE("a 10M-token vocabulary is refused before it is read") {
    expect_refused(file_with_array_count("tokenizer.ggml.tokens", 10'000'000),
                   "metadata 'tokenizer.ggml.tokens' at offset");
    expect_refused(file_with_array_count("tokenizer.ggml.tokens", 10'000'000), "exceeds the limit of 2097152");
}

TEST_CASE("a 10M-entry merge list and a 10M-element other array are refused") {
    expect_refused(file_with_array_count("tokenizer.ggml.merges", 10'000'000), "exceeds the limit of 4194304");
    expect_refused(file_with_array_count("general.tags", 10'000'000), "exceeds the limit of 4194304");
}

TEST_CASE("many arrays together may not exceed the per-file element budget") {
    // Three u8 arrays of 3M elements (raw bytes: the writer would hold 9M Values): each under the
    // per-array cap of 2^22, together over the per-file budget of 2^23.
    std::vector<uint8_t> b;
    auto put = [&](const void* p, size_t n) { b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); };
    auto u32 = [&](uint32_t v) { put(&v, 4); };
    auto u64 = [&](uint64_t v) { put(&v, 8); };
    u32(0x46554747), u32(3), u64(0), u64(3);
    const uint64_t n = 3u << 20;
    for (int i = 0; i < 3; i++) {
        std::string key = "test.array" + std::to_string(i);
        u64(key.size()), put(key.data(), key.size());
        u32(9), u32(0), u64(n);  // array of u8
        b.resize(b.size() + n, 0);
    }
    try {
        gguf::File::from_memory(b.data(), b.size(), "many.gguf");
        FAIL("parsed");
    } catch (const gguf::Error& e) {
        std::string msg = e.what();
        INFO(msg);
        CHECK(msg.find("test.array2") != std::string::npos);
        CHECK(msg.find("metadata array elements left") != std::string::npos);
    }
}

TEST_CASE("a chat template over 1 MiB is refused, one under it loads") {
    gguf::Writer w;
    w.set_str("tokenizer.chat_template", std::string((1 << 20) + 1, 'x'));
    auto bytes = w.bytes();
    CHECK_THROWS_WITH(gguf::File::from_memory(bytes.data(), bytes.size(), "t.gguf"),
                      Catch::Contains("tokenizer.chat_template") && Catch::Contains("exceeds the limit of 1048576"));
    gguf::Writer ok;
    ok.set_str("tokenizer.chat_template", std::string(1 << 20, 'x'));
    auto ok_bytes = ok.bytes();
    CHECK(gguf::File::from_memory(ok_bytes.data(), ok_bytes.size(), "t.gguf")->get<std::string>("tokenizer.chat_template").size() ==
          (1u << 20));
}
