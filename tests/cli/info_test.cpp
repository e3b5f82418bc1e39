// `tinyllm info` run as a user runs it (the built binary, path in TINYLLM_BIN) on every model and
// vocabulary in ../shared: its --json output against ../shared/models/README.md and against the
// file's metadata read by a small independent parser below (not gguf/, which info itself uses).
#include "cli/run_tinyllm.h"
#include "common/test_data.h"
#include "gguf/gguf.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json info_json(const std::string& path) {
    Run r = run_tinyllm("info --json '" + path + "'");
    INFO(r.out);
    REQUIRE(r.status == 0);
    return json::parse(r.out);
}

// ---- an independent reader of GGUF headers: just enough to know what info should say ----

struct Meta {
    std::map<std::string, json> kv;  // scalars, short arrays; arrays over 64 items as {"array_length": n}
    std::vector<std::pair<uint32_t, uint64_t>> tensors;  // (ggml type id, element count)
};

Meta read_header(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), {});
    size_t p = 0;
    auto take = [&](size_t n) {
        if (p + n > b.size()) FAIL(path << " is truncated at " << p);  // (not REQUIRE: millions of calls)
        const uint8_t* at = b.data() + p;
        p += n;
        return at;
    };
    auto u32 = [&] { uint32_t v; std::memcpy(&v, take(4), 4); return v; };
    auto u64 = [&] { uint64_t v; std::memcpy(&v, take(8), 8); return v; };
    auto str = [&] { uint64_t n = u64(); auto s = take(n); return std::string(reinterpret_cast<const char*>(s), n); };
    std::function<json(uint32_t)> value = [&](uint32_t t) -> json {
        switch (t) {
        case 0: return *take(1);
        case 1: return static_cast<int8_t>(*take(1));
        case 2: { uint16_t v; std::memcpy(&v, take(2), 2); return v; }
        case 3: { int16_t v; std::memcpy(&v, take(2), 2); return v; }
        case 4: return u32();
        case 5: return static_cast<int32_t>(u32());
        case 6: { float v; std::memcpy(&v, take(4), 4); return v; }
        case 7: return *take(1) != 0;
        case 8: return str();
        case 9: {
            uint32_t et = u32();
            uint64_t n = u64();
            json a = json::array();
            for (uint64_t i = 0; i < n; i++) a.push_back(value(et));
            return n <= 64 ? a : json{{"array_length", n}};  // vocabularies: only their size matters here
        }
        case 10: return u64();
        case 11: return static_cast<int64_t>(u64());
        case 12: { double v; std::memcpy(&v, take(8), 8); return v; }
        }
        FAIL("unknown value type " << t);
        return nullptr;
    };
    REQUIRE(u32() == 0x46554747);
    u32();
    uint64_t n_tensors = u64(), n_kv = u64();
    Meta m;
    for (uint64_t i = 0; i < n_kv; i++) {
        std::string key = str();
        m.kv[key] = value(u32());
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        str();
        uint32_t n_dims = u32();
        uint64_t n = 1;
        for (uint32_t d = 0; d < n_dims; d++) n *= u64();
        uint32_t type = u32();
        u64();
        m.tensors.emplace_back(type, n);
    }
    return m;
}

std::vector<std::string> shared_gguf_files(const std::string& dir) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(test_data::shared(dir)))
        if (e.path().extension() == ".gguf") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    return files;
}

std::string stem(const std::string& path) { return fs::path(path).filename().string(); }


// info --json on `path` against the independent read of its header.
void check_against_header(const std::string& path) {
    static const std::map<uint32_t, std::string> type_names = {
        {0, "f32"}, {1, "f16"}, {2, "q4_0"}, {3, "q4_1"}, {6, "q5_0"}, {7, "q5_1"}, {8, "q8_0"}, {10, "q2_K"},
        {11, "q3_K"}, {12, "q4_K"}, {13, "q5_K"}, {14, "q6_K"}, {20, "iq4_nl"}, {23, "iq4_xs"}, {30, "bf16"}, {39, "mxfp4"}};
    INFO(path);
    json d = info_json(path);
    Meta m = read_header(path);
    std::string arch = m.kv.count("general.architecture") ? m.kv["general.architecture"].get<std::string>() : "";
    auto arch_key = [&](const std::string& k) { return m.kv.count(arch + "." + k) ? m.kv[arch + "." + k] : json(nullptr); };

    CHECK(d["path"] == path);
    CHECK(d["file_size"] == fs::file_size(path));
    CHECK(d["architecture"] == m.kv["general.architecture"]);
    CHECK(d["name"] == m.kv["general.name"]);
    CHECK(d["block_count"] == arch_key("block_count"));
    CHECK(d["context_length"] == arch_key("context_length"));
    CHECK(d["embedding_length"] == arch_key("embedding_length"));
    CHECK(d["head_count"] == arch_key("attention.head_count"));
    CHECK(d["head_count_kv"] == arch_key("attention.head_count_kv"));
    CHECK(d["expert_count"] == arch_key("expert_count"));
    CHECK(d["expert_used_count"] == arch_key("expert_used_count"));
    CHECK(d["expert_shared_count"] == arch_key("expert_shared_count"));
    CHECK(d["tokenizer_model"] == m.kv["tokenizer.ggml.model"]);
    CHECK(d["tokenizer_pre"] == (m.kv.count("tokenizer.ggml.pre") ? m.kv["tokenizer.ggml.pre"] : json(nullptr)));
    CHECK(d["vocab_size"] == m.kv["tokenizer.ggml.tokens"]["array_length"]);
    CHECK(d["chat_template"] == (m.kv.count("tokenizer.chat_template") > 0));

    uint64_t params = 0;
    std::map<std::string, uint64_t> histogram;
    for (auto [type, n] : m.tensors) {
        params += n;
        REQUIRE(type_names.count(type));
        histogram[type_names.at(type)]++;
    }
    CHECK(d["tensor_count"] == m.tensors.size());
    CHECK(d["parameters"] == params);
    std::map<std::string, uint64_t> reported;
    for (const auto& [name, t] : d["tensor_types"].items()) reported[name] = t["tensors"];
    CHECK(reported == histogram);
}

}  // namespace

TEST_CASE("info --json agrees with an independent read of every model in ../shared/models") {
    REQUIRE_SHARED_DATA();
    auto files = shared_gguf_files("models");
    CHECK(files.size() >= 56);  // as shipped in ../shared
    for (const std::string& path : files) check_against_header(path);
}

TEST_CASE("info --json agrees with an independent read of every vocabulary in ../shared/tokenizers/vocab") {
    REQUIRE_SHARED_DATA();
    auto files = shared_gguf_files("tokenizers/vocab");
    CHECK(files.size() >= 6);
    for (const std::string& path : files) check_against_header(path);
}

TEST_CASE("info --json reports what ../shared/models/README.md says about each model") {
    REQUIRE_SHARED_DATA();
    struct Expect {
        const char* prefix;
        json fields;
    };
    const Expect expectations[] = {
        {"stories260K-", {{"architecture", "llama"}, {"embedding_length", 64}, {"block_count", 5}, {"head_count", 8},
                          {"head_count_kv", 4}, {"context_length", 512}, {"vocab_size", 512}, {"tokenizer_model", "llama"},
                          {"feed_forward_length", 172}}},
        {"quant-", {{"architecture", "llama"}, {"embedding_length", 256}, {"block_count", 2}, {"head_count", 4},
                    {"head_count_kv", 2}, {"feed_forward_length", 512}, {"context_length", 2048}, {"vocab_size", 512}}},
        {"random-llama-f", {{"architecture", "llama"}, {"head_count", 8}, {"head_count_kv", 2}, {"vocab_size", 512}}},
        {"random-llama-q", {{"architecture", "llama"}, {"head_count", 8}, {"head_count_kv", 2}, {"vocab_size", 512}}},
        {"random-llama-bpe-", {{"head_count", 4}, {"head_count_kv", 1}, {"vocab_size", 566}, {"tokenizer_pre", "llama-bpe"},
                               {"chat_template", true}}},
        {"random-qwen2-", {{"architecture", "qwen2"}, {"tokenizer_pre", "qwen2"}, {"vocab_size", 566}}},
        {"random-qwen3moe-", {{"architecture", "qwen3moe"}, {"expert_count", 8}, {"expert_used_count", 2}}},
        {"random-olmoe-", {{"architecture", "olmoe"}, {"expert_count", 8}, {"expert_used_count", 2}, {"tokenizer_pre", "olmo"}}},
        {"random-deepseek2-", {{"architecture", "deepseek2"}, {"expert_count", 8}, {"expert_used_count", 2},
                               {"expert_shared_count", 1}, {"tokenizer_pre", "deepseek-v3"}}},
        {"random-kimi-linear-", {{"architecture", "kimi-linear"}, {"embedding_length", 96}, {"head_count", 4},
                                 {"head_count_kv", {0, 0, 0, 1}}, {"expert_count", 8}, {"expert_used_count", 2},
                                 {"expert_shared_count", 1}, {"tokenizer_pre", "kimi-k2"}}},
        {"random-glm4moe-", {{"architecture", "glm4moe"}, {"embedding_length", 96}, {"expert_count", 8},
                             {"expert_used_count", 2}, {"expert_shared_count", 1}, {"tokenizer_pre", "glm4"}}},
        {"random-gpt-oss-", {{"architecture", "gpt-oss"}, {"embedding_length", 96}, {"block_count", 4}, {"expert_count", 8},
                             {"expert_used_count", 2}, {"tokenizer_pre", "gpt-4o"}, {"chat_template", true}}},
    };
    size_t checked = 0;
    for (const std::string& path : shared_gguf_files("models")) {
        for (const Expect& e : expectations) {
            if (stem(path).rfind(e.prefix, 0) != 0) continue;
            INFO(path);
            json d = info_json(path);
            for (const auto& [key, value] : e.fields.items()) {
                INFO(key);
                CHECK(d[key] == value);
            }
            checked++;
        }
    }
    CHECK(checked == 44);  // 13 quant-*, 3 stories260K, 3 per random-* variant above (gpt-oss: 4)
}

TEST_CASE("info reports the quant files' tensor types: every matrix in the named type, norms f32") {
    REQUIRE_SHARED_DATA();
    auto types_of = [](const std::string& file) {
        std::set<std::string> names;
        json d = info_json(test_data::shared("models/" + file));
        for (const auto& [name, t] : d["tensor_types"].items()) names.insert(name);
        return names;
    };
    CHECK(types_of("quant-q4_k_m.gguf") == std::set<std::string>{"f32", "q4_K", "q6_K"});
    CHECK(types_of("quant-iq4_xs.gguf") == std::set<std::string>{"f32", "iq4_xs"});
    CHECK(types_of("random-gpt-oss-mxfp4.gguf") == std::set<std::string>{"f32", "mxfp4"});
    CHECK(info_json(test_data::shared("models/quant-q4_k_m.gguf"))["file_type"] == "Q4_K_M");
}

TEST_CASE("info in text form shows per-layer KV heads and the experts") {
    REQUIRE_SHARED_DATA();
    Run r = run_tinyllm("info '" + test_data::shared("models/random-kimi-linear-q8_0.gguf") + "'");
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("architecture    kimi-linear\n"));
    CHECK_THAT(r.out, Catch::Contains("KV heads        0 0 0 1 (per layer)\n"));
    CHECK_THAT(r.out, Catch::Contains("experts         8 (2 used, 1 shared)\n"));
    CHECK_THAT(r.out, Catch::Contains("tokenizer       gpt2, pre-tokenizer kimi-k2, 566 tokens\n"));
    CHECK_THAT(r.out, Catch::Contains("chat template   yes\n"));
}

TEST_CASE("info without a model describes the built-in stories260K") {
    json d = json::parse(run_tinyllm("info --json").out);
    CHECK(d["architecture"] == "llama");
    CHECK(d["name"] == "stories260K");
    CHECK(d["parameters"] == 260032);
    CHECK(d["block_count"] == 5);
    CHECK(d["tensor_types"] == json{{"f32", {{"tensors", 47}, {"bytes", 260032 * 4}}}});
}

TEST_CASE("info reads all parts of a split model from its first part") {
    auto dir = fs::temp_directory_path() / ("tinyllm-cli-split-" + std::to_string(getpid()));
    fs::create_directories(dir);
    gguf::Writer w;
    w.set_str("general.architecture", "llama");
    w.set_u32("llama.block_count", 3);
    std::vector<float> x(64, 0.5f);
    for (int i = 0; i < 3; i++) w.add_tensor("blk." + std::to_string(i) + ".w", gguf::Type::F32, {8, 8}, x.data(), 256);
    auto paths = w.write_split((dir / "m").string(), 3);
    json d = info_json(paths[0]);
    CHECK(d["parts"] == 3);
    CHECK(d["tensor_count"] == 3);
    CHECK(d["parameters"] == 192);
    CHECK(d["file_size"] == fs::file_size(paths[0]) + fs::file_size(paths[1]) + fs::file_size(paths[2]));
    Run second = run_tinyllm("info '" + paths[1] + "'");
    CHECK(second.status == 1);
    CHECK_THAT(second.out, Catch::Contains("part 2 of 3") && Catch::Contains(paths[0]));
    fs::remove_all(dir);
}

TEST_CASE("info --help explains itself, bad arguments and bad files fail with a message") {
    Run help = run_tinyllm("info --help");
    CHECK(help.status == 0);
    CHECK_THAT(help.out, Catch::StartsWith("usage: tinyllm info [MODEL.gguf] [--json]"));
    Run unknown = run_tinyllm("info --frobnicate");
    CHECK(unknown.status == 1);
    CHECK_THAT(unknown.out, Catch::Contains("unknown option --frobnicate"));
    Run missing = run_tinyllm("info /nonexistent/model.gguf");
    CHECK(missing.status == 1);
    CHECK_THAT(missing.out, Catch::Contains("[gguf] /nonexistent/model.gguf: cannot open"));
    Run not_gguf = run_tinyllm("info '" + std::string(TINYLLM_SOURCE_DIR) + "/README.md'");
    CHECK(not_gguf.status == 1);
    CHECK_THAT(not_gguf.out, Catch::Contains("bad magic"));
}

TEST_CASE("info --devices says which kernel variant the CPU runs and what each weight type's matmul runs") {
    Run r = run_tinyllm("info --devices", false);
    REQUIRE(r.status == 0);
    // the variant is chosen by the CPU's measured features; the line names it and AMX
    CHECK(r.out.find("kernels: ") != std::string::npos);
    CHECK(r.out.find("AMX ") != std::string::npos);
    for (const char* type : {" f16", " q8_0", " q4_K", " q6_K", " iq4_xs", " iq2_xxs"}) {
        INFO(type);
        CHECK(r.out.find(type) != std::string::npos);
    }
    // forced to the scalar variant, every hand kernel says so, and nothing is packed
    setenv("TINYLLM_CPU_ISA", "scalar", 1);
    Run scalar = run_tinyllm("info --devices", false);
    unsetenv("TINYLLM_CPU_ISA");
    REQUIRE(scalar.status == 0);
    CHECK(scalar.out.find("kernels: scalar") != std::string::npos);
    CHECK(scalar.out.find("q4_K") != std::string::npos);
    CHECK(scalar.out.find("panels") == std::string::npos);
}
