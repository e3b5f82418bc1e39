// The MLA and RoPE-scaling parts of ModelConfig: sizes from the split-form keys, DeepSeek's YaRN
// attention scale (mscale² / sqrt(head_dim), as DeepSeek-V2/V3's reference code computes it), MTP layers.
#include "common/test_data.h"
#include "gguf/gguf.h"
#include "llm/config.h"

#include <catch2/catch.hpp>

#include <cmath>

namespace {

// A metadata-only deepseek2 file (one tiny embedding tensor) with the given extra keys.
llm::ModelConfig deepseek2_config(const std::function<void(gguf::Writer&)>& extra) {
    gguf::Writer w;
    w.set_str("general.architecture", "deepseek2");
    w.set_u32("deepseek2.embedding_length", 32);
    w.set_u32("deepseek2.block_count", 3);
    w.set_u32("deepseek2.attention.head_count", 4);
    w.set_u32("deepseek2.attention.kv_lora_rank", 64);
    w.set_u32("deepseek2.attention.q_lora_rank", 48);
    w.set_u32("deepseek2.attention.key_length_mla", 192);
    w.set_u32("deepseek2.attention.value_length_mla", 128);
    w.set_u32("deepseek2.rope.dimension_count", 64);
    extra(w);
    std::vector<float> emb(32 * 8, 0.0f);
    w.add_tensor("token_embd.weight", gguf::Type::F32, {32, 8}, emb.data(), emb.size() * 4);
    static std::vector<std::vector<uint8_t>> images;  // File::from_memory needs the bytes to outlive it
    images.push_back(w.bytes());
    auto f = gguf::File::from_memory(images.back().data(), images.back().size(), "deepseek2.gguf");
    return llm::read_config(*f);
}

}  // namespace

TEST_CASE("mla: config of the split MLA form") {
    llm::ModelConfig c = deepseek2_config([](gguf::Writer&) {});
    CHECK(c.mla.q_lora_rank == 48);
    CHECK(c.mla.kv_lora_rank == 64);
    CHECK(c.mla.head_dim_k == 192);
    CHECK(c.mla.head_dim_v == 128);
    CHECK(c.mla.rope_dim == 64);
    CHECK(c.rope.type == llm::RopeType::NORM);
    CHECK_FALSE(c.rope.yarn);
    CHECK(c.mla.kq_scale == Approx(1.0 / std::sqrt(192.0)));
}

TEST_CASE("mla: DeepSeek-V3's YaRN gives softmax scale mscale^2 / sqrt(qk_head_dim)") {
    // DeepSeek-V3: factor 40, original 4096, mscale = mscale_all_dim = 1 (stored as 0.1 by the converter).
    llm::ModelConfig c = deepseek2_config([](gguf::Writer& w) {
        w.set_str("deepseek2.rope.scaling.type", "yarn");
        w.set_f32("deepseek2.rope.scaling.factor", 40.0f);
        w.set_u32("deepseek2.rope.scaling.original_context_length", 4096);
        w.set_f32("deepseek2.rope.scaling.yarn_log_multiplier", 0.1f);
    });
    double mscale = 0.1 * 1.0 * std::log(40.0) + 1.0;  // yarn_get_mscale(40, mscale_all_dim = 1)
    CHECK(c.rope.yarn);
    CHECK(c.rope.yarn_orig_ctx == 4096);
    CHECK(c.rope.freq_scale == Approx(1.0 / 40.0));
    CHECK(c.mla.kq_scale == Approx(mscale * mscale / std::sqrt(192.0)).epsilon(1e-5));
    // RoPE's own magnitude (attn_factor · (1 + 0.1 ln 40)) is yarn_get_mscale(40, mscale) / yarn_get_mscale(40, all) = 1.
    CHECK(c.rope.yarn_attn_factor * (1.0 + 0.1 * std::log(40.0)) == Approx(1.0).epsilon(1e-5));
}

TEST_CASE("mla: DeepSeek-V2's YaRN (mscale = mscale_all_dim = 0.707)") {
    llm::ModelConfig c = deepseek2_config([](gguf::Writer& w) {
        w.set_str("deepseek2.rope.scaling.type", "yarn");
        w.set_f32("deepseek2.rope.scaling.factor", 40.0f);
        w.set_u32("deepseek2.rope.scaling.original_context_length", 4096);
        w.set_f32("deepseek2.rope.scaling.yarn_log_multiplier", 0.0707f);
    });
    double mscale = 0.1 * 0.707 * std::log(40.0) + 1.0;
    CHECK(c.mla.kq_scale == Approx(mscale * mscale / std::sqrt(192.0)).epsilon(1e-4));
}

TEST_CASE("mla: next-token-prediction layers are not part of the trunk") {
    llm::ModelConfig c = deepseek2_config([](gguf::Writer& w) { w.set_u32("deepseek2.nextn_predict_layers", 1); });
    CHECK(c.n_layer == 2);
    CHECK(c.layer_kind.size() == 2);
}

TEST_CASE("mla: an old fused attn_kv_b file is a clear error") {
    gguf::Writer w;
    w.set_str("general.architecture", "deepseek2");
    w.set_u32("deepseek2.embedding_length", 32);
    w.set_u32("deepseek2.block_count", 1);
    w.set_u32("deepseek2.attention.head_count", 4);
    w.set_u32("deepseek2.attention.kv_lora_rank", 64);
    w.set_u32("deepseek2.rope.dimension_count", 64);
    std::vector<float> emb(32 * 8, 0.0f);
    w.add_tensor("token_embd.weight", gguf::Type::F32, {32, 8}, emb.data(), emb.size() * 4);
    std::vector<uint8_t> image = w.bytes();
    auto f = gguf::File::from_memory(image.data(), image.size(), "old.gguf");
    CHECK_THROWS_WITH(llm::read_config(*f), Catch::Contains("old.gguf") && Catch::Contains("key_length_mla"));
}

TEST_CASE("mla: config of the random deepseek2 and kimi-linear files") {
    REQUIRE_SHARED_DATA();
    auto ds = llm::read_config(*gguf::File::open(test_data::shared("models/random-deepseek2-f32.gguf")));
    CHECK(ds.mla.head_dim_k == 48);
    CHECK(ds.mla.head_dim_v == 32);
    CHECK(ds.mla.kq_scale == Approx(1.0 / std::sqrt(48.0)));
    auto kimi = llm::read_config(*gguf::File::open(test_data::shared("models/random-kimi-linear-f32.gguf")));
    CHECK(kimi.rope.type == llm::RopeType::NONE);
    CHECK(kimi.mla.q_lora_rank == 0);
    CHECK(kimi.layer_kind[3] == llm::LayerKind::MLA);
    CHECK(kimi.mla.kq_scale == Approx(1.0 / std::sqrt(48.0)));
}
