// Architecture sizes from a hostile GGUF are range-checked before anything is sized by them:
// block_count = INT32_MAX used to allocate gigabytes of per-layer vectors before any tensor was read.
#include "common/child_process.h"
#include "common/test_data.h"
#include "gguf/gguf.h"
#include "llm/config.h"

#include <vector>

namespace {

// A minimal llama header (2 blocks, tiny token_embd) with the given integer keys overridden.
std::vector<uint8_t> llama_with(const std::vector<std::pair<std::string, int32_t>>& overrides) {
    gguf::Writer w;
    w.set_str("general.architecture", "llama");
    w.set_i32("llama.embedding_length", 8);
    w.set_i32("llama.block_count", 2);
    w.set_i32("llama.attention.head_count", 2);
    w.set_i32("llama.context_length", 64);
    for (const auto& [k, v] : overrides) w.set_i32(k, v);
    std::vector<float> emb(8 * 4, 0.0f);
    w.add_tensor("token_embd.weight", gguf::Type::F32, {8, 4}, emb.data(), emb.size() * sizeof(float));
    w.add_tensor("blk.0.attn_norm.weight", gguf::Type::F32, {8}, emb.data(), 8 * sizeof(float));
    w.add_tensor("blk.1.attn_norm.weight", gguf::Type::F32, {8}, emb.data(), 8 * sizeof(float));
    return w.bytes();
}

std::string config_error(const std::vector<std::pair<std::string, int32_t>>& overrides) {
    auto bytes = llama_with(overrides);
    auto f = gguf::File::from_memory(bytes.data(), bytes.size(), "hostile.gguf");
    try {
        llm::read_config(*f);
    } catch (const std::exception& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("the minimal header itself reads") {
    CHECK(config_error({}) == "");
}

TEST_CASE("block_count = INT32_MAX fails fast, naming the key, in small memory") {
    test_child::Result r = test_child::run([](int& code) {
        std::string e = config_error({{"llama.block_count", INT32_MAX}});
        code = e.empty() ? 1 : 10;
        return e;
    });
    INFO("exit " << r.code << ", CPU " << r.cpu_seconds << " s, peak RSS " << r.peak_rss_kb / 1024 << " MB: " << r.message);
    CHECK(r.code == 10);
    CHECK(r.message.find("[model] hostile.gguf: llama.block_count = 2147483647 is outside 1..4096") != std::string::npos);
    CHECK(r.cpu_seconds < 0.5 * test_child::SLOWDOWN);
    CHECK(r.peak_rss_kb < 128 * 1024 + test_child::RSS_SLACK_KB);
}

TEST_CASE("the largest block count allowed is 4096") {
    CHECK(config_error({{"llama.block_count", 4097}}).find("llama.block_count = 4097 is outside 1..4096") != std::string::npos);
    CHECK(config_error({{"llama.block_count", 4096}}) == "");
}

TEST_CASE("head counts, widths, context and expert counts out of range name their key") {
    CHECK(config_error({{"llama.attention.head_count", 0}}).find("llama.attention.head_count = 0 is outside") != std::string::npos);
    CHECK(config_error({{"llama.attention.head_count", 1 << 30}}).find("llama.attention.head_count") != std::string::npos);
    CHECK(config_error({{"llama.attention.head_count_kv", 3}}).find("head_count_kv 3 is outside 0..2") != std::string::npos);
    CHECK(config_error({{"llama.attention.head_count_kv", -1}}).find("head_count_kv -1") != std::string::npos);
    CHECK(config_error({{"llama.embedding_length", -8}}).find("llama.embedding_length = -8") != std::string::npos);
    CHECK(config_error({{"llama.feed_forward_length", INT32_MAX}}).find("llama.feed_forward_length") != std::string::npos);
    CHECK(config_error({{"llama.context_length", -1}}).find("llama.context_length = -1") != std::string::npos);
    CHECK(config_error({{"llama.context_length", INT32_MAX}}).find("llama.context_length") != std::string::npos);
    CHECK(config_error({{"llama.attention.key_length", 0}}).find("llama.attention.key_length = 0") != std::string::npos);
    CHECK(config_error({{"llama.expert_count", INT32_MAX}}).find("llama.expert_count") != std::string::npos);
    CHECK(config_error({{"llama.expert_count", 4}, {"llama.expert_used_count", 5}}).find("llama.expert_used_count = 5 is outside 1..4") !=
          std::string::npos);
    CHECK(config_error({{"llama.nextn_predict_layers", 2}}).find("llama.nextn_predict_layers = 2 is outside 0..1") != std::string::npos);
}
