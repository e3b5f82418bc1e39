// The hybrid models' layer layout and recurrent sizes from their GGUF metadata (../shared/models/README.md),
// and the state a sequence carries (what `tinyllm info` reports and each checkpoint costs).
#include "common/test_data.h"
#include "gguf/gguf.h"
#include "llm/config.h"
#include "llm/session.h"

namespace {

llm::ModelConfig config_of(const std::string& name) {
    return llm::read_config(*gguf::File::open(test_data::shared("models/" + name)));
}

}  // namespace

TEST_CASE("recurrent: qwen35 has GatedDeltaNet layers with a full-attention layer every 4th") {
    REQUIRE_SHARED_DATA();
    llm::ModelConfig c = config_of("random-qwen35-f32.gguf");
    using K = llm::LayerKind;
    CHECK(c.layer_kind == std::vector<K>{K::GATED_DELTA_NET, K::GATED_DELTA_NET, K::GATED_DELTA_NET, K::ATTENTION});
    CHECK(c.ssm.conv_kernel == 4);
    CHECK(c.ssm.d_state == 16);
    CHECK(c.ssm.n_group == 2);
    CHECK(c.ssm.n_v_head == 4);
    CHECK(c.ssm.d_inner == 64);
    CHECK_FALSE(c.ssm.qk_heads_interleaved);
    CHECK(c.attn_gate);
    CHECK(c.rope.sections == std::vector<int>{3, 3, 2, 0});
    CHECK(c.rope.n_dims == 16);
    // 3 layers × (3 conv rows of 2·2·16 + 64 channels + 4 heads × 16 × 16) floats
    CHECK(llm::recurrent_state_bytes(c) == 3 * (3 * 128 + 4 * 16 * 16) * 4);
}

TEST_CASE("recurrent: qwen3next reads its q/k heads interleaved") {
    REQUIRE_SHARED_DATA();
    llm::ModelConfig c = config_of("random-qwen3next-f32.gguf");
    CHECK(c.ssm.qk_heads_interleaved);
    CHECK(c.layer_kind[3] == llm::LayerKind::ATTENTION);
    CHECK(c.rope.sections.empty());
    CHECK(c.rope.n_dims == 8);
}

TEST_CASE("recurrent: kimi-linear has 3 KDA layers and one MLA layer") {
    REQUIRE_SHARED_DATA();
    llm::ModelConfig c = config_of("random-kimi-linear-f32.gguf");
    using K = llm::LayerKind;
    CHECK(c.layer_kind == std::vector<K>{K::KDA, K::KDA, K::KDA, K::MLA});
    CHECK(c.ssm.kda_head_dim == 32);
    CHECK(c.ssm.conv_kernel == 4);
    CHECK(c.moe.norm_topk);  // llama.cpp renormalizes kimi's top-k weights without a metadata key
    // 3 layers × (3 conv rows of q, k and v (3 × 4 heads × 32) + 4 heads × 32 × 32) floats
    CHECK(llm::recurrent_state_bytes(c) == 3 * (3 * 3 * 128 + 4 * 32 * 32) * 4);
}

TEST_CASE("recurrent: attention-only models carry no recurrent state") {
    REQUIRE_SHARED_DATA();
    CHECK(llm::recurrent_state_bytes(config_of("random-qwen3-f32.gguf")) == 0);
}

namespace {

// A copy of random-qwen35-f32 with one metadata value replaced or one tensor left out, written to a
// temporary file (the loader maps files).
std::string altered_qwen35(const std::string& name, const std::string& key, gguf::Value value, const std::string& drop_tensor) {
    auto f = gguf::File::open(test_data::shared("models/random-qwen35-f32.gguf"));
    gguf::Writer w;
    for (const auto& [k, v] : f->metadata()) w.set(k, k == key ? value : v);
    for (const gguf::TensorInfo& t : f->tensors())
        if (t.name != drop_tensor) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims.begin(), t.dims.end()), t.data, t.n_bytes);
    std::string path = std::string(TINYLLM_BINARY_DIR) + "/" + name + ".gguf";
    w.write(path);
    return path;
}

llm::SessionOptions options(const std::string& path) {
    llm::SessionOptions so;
    so.model_path = path;
    so.n_ctx = 64;
    return so;
}

}  // namespace

TEST_CASE("recurrent: inconsistent GatedDeltaNet sizes are a clear error at load") {
    REQUIRE_SHARED_DATA();
    std::string path = altered_qwen35("qwen35-bad-ssm-sizes", "qwen35.ssm.time_step_rank", gguf::Value::make_uint(gguf::ValueType::UINT32, 3), "");
    REQUIRE_THROWS_WITH(llm::open_session(options(path)), Catch::Contains("[model] " + path) && Catch::Contains("GatedDeltaNet sizes"));
}

TEST_CASE("recurrent: a missing recurrent tensor is a clear error naming it") {
    REQUIRE_SHARED_DATA();
    std::string path = altered_qwen35("qwen35-without-ssm_a", "", {}, "blk.1.ssm_a");
    REQUIRE_THROWS_WITH(llm::open_session(options(path)), Catch::Contains("missing tensor 'blk.1.ssm_a'"));
}
