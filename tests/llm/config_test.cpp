// ModelConfig from the metadata of real GGUF files.
#include "common/test_data.h"
#include "gguf/gguf.h"
#include "llm/config.h"

#include <algorithm>
#include <set>

TEST_CASE("config of the built-in stories260K") {
    auto f = gguf::File::open(test_data::builtin_model());
    llm::ModelConfig c = llm::read_config(*f);
    CHECK(c.arch == "llama");
    CHECK(c.n_embd == 64);
    CHECK(c.n_layer == 5);
    CHECK(c.n_head == 8);
    CHECK(c.n_head_kv == 4);
    CHECK(c.head_dim_k == 8);
    CHECK(c.n_ff == 172);
    CHECK(c.n_vocab == 512);
    CHECK(c.tied_output);
    CHECK(c.rope.type == llm::RopeType::NORM);
    CHECK(c.rope.n_dims == 8);
    CHECK(c.moe.n_expert == 0);
}

TEST_CASE("config of every random architecture") {
    REQUIRE_SHARED_DATA();
    auto open = [](const char* name) { return gguf::File::open(test_data::shared(std::string("models/") + name)); };
    {
        auto c = llm::read_config(*open("random-qwen3-f32.gguf"));
        CHECK(c.head_dim_k == 48);
        CHECK(c.qk_norm);
        CHECK(c.rope.type == llm::RopeType::NEOX);
    }
    {
        auto c = llm::read_config(*open("random-deepseek2-f32.gguf"));
        CHECK(c.layer_kind[0] == llm::LayerKind::MLA);
        CHECK(c.mla.q_lora_rank == 64);
        CHECK(c.mla.kv_lora_rank == 64);
        CHECK(c.mla.rope_dim == 16);
        CHECK(c.moe.n_leading_dense == 1);
        CHECK(c.moe.gating == llm::Gating::SIGMOID);
        CHECK(c.moe.norm_topk);
        CHECK(c.moe.weights_scale == 2.5f);
        CHECK(c.is_moe_layer(1));
        CHECK_FALSE(c.is_moe_layer(0));
    }
    {
        auto c = llm::read_config(*open("random-kimi-linear-f32.gguf"));
        CHECK(c.layer_kind == std::vector<llm::LayerKind>{llm::LayerKind::KDA, llm::LayerKind::KDA,
                                                           llm::LayerKind::KDA, llm::LayerKind::MLA});
        CHECK(c.ssm.kda_head_dim == 32);
        CHECK(c.has_recurrent_layers());
    }
    {
        auto c = llm::read_config(*open("random-qwen35-f32.gguf"));
        CHECK(c.layer_kind[3] == llm::LayerKind::ATTENTION);
        CHECK(c.layer_kind[0] == llm::LayerKind::GATED_DELTA_NET);
        CHECK(c.rope.sections == std::vector<int>{3, 3, 2, 0});
    }
    {
        auto c = llm::read_config(*open("random-gpt-oss-f32.gguf"));
        CHECK(c.rope.yarn);
        CHECK(c.rope.freq_scale == 1.0f / 32.0f);
        CHECK(c.swa_layer == std::vector<bool>{true, false, true, false});
        CHECK(c.attn_sinks);
        CHECK(c.moe.gating == llm::Gating::SOFTMAX_WEIGHT);
    }
}

TEST_CASE("an unsupported architecture is a clear error naming it") {
    gguf::Writer w;
    w.set_str("general.architecture", "mamba9");
    w.set_u32("mamba9.embedding_length", 8);
    auto bytes = w.bytes();
    auto f = gguf::File::from_memory(bytes.data(), bytes.size(), "x.gguf");
    REQUIRE_THROWS_WITH(llm::read_config(*f), Catch::Contains("unsupported architecture 'mamba9'") &&
                                                  Catch::Contains("(supported: llama, qwen2, qwen3,") &&
                                                  Catch::Contains("kimi-linear, gpt-oss)"));
}

TEST_CASE("every architecture row configures its random model with the row's facts") {
    REQUIRE_SHARED_DATA();
    std::set<std::string> names;
    for (const llm::Architecture& a : llm::architectures()) {
        INFO(a.name);
        CHECK(names.insert(a.name).second);  // one row per architecture
        CHECK(llm::find_architecture(a.name) == &a);
        auto f = gguf::File::open(test_data::shared(std::string("models/random-") + a.name + "-f32.gguf"));
        llm::ModelConfig c = llm::read_config(*f);
        CHECK(c.arch == a.name);
        CHECK(c.rope.type == a.rope);
        CHECK(c.qkv_bias == a.qkv_bias);
        CHECK(c.attn_out_bias == a.attn_out_bias);
        CHECK(c.attn_gate == a.attn_gate);
        CHECK(c.attn_sinks == a.attn_sinks);
        CHECK(c.ffn_norm == a.ffn_norm);
        CHECK(c.qk_norm_full == (a.qk_norm == llm::QkNorm::FULL_WIDTH));
        if (a.qk_norm == llm::QkNorm::NONE) CHECK_FALSE(c.qk_norm);
        if (a.qk_norm == llm::QkNorm::PER_HEAD) CHECK(c.qk_norm);
        if (c.moe.n_expert > 0 && !a.moe_keys) CHECK(c.moe.gating == a.gating);
        if (c.moe.n_expert > 0) CHECK(c.moe.shared_gate == a.gated_shared_expert);
        const auto has = [&](llm::LayerKind k) { return std::count(c.layer_kind.begin(), c.layer_kind.end(), k) > 0; };
        switch (a.layers) {
            case llm::LayerPattern::ATTENTION: CHECK(std::count(c.layer_kind.begin(), c.layer_kind.end(), llm::LayerKind::ATTENTION) == c.n_layer); break;
            case llm::LayerPattern::MLA: CHECK(std::count(c.layer_kind.begin(), c.layer_kind.end(), llm::LayerKind::MLA) == c.n_layer); break;
            case llm::LayerPattern::GATED_DELTA_NET: CHECK((has(llm::LayerKind::GATED_DELTA_NET) && has(llm::LayerKind::ATTENTION))); break;
            case llm::LayerPattern::KDA: CHECK((has(llm::LayerKind::KDA) && has(llm::LayerKind::MLA))); break;
        }
        CHECK(c.has_recurrent_layers() == (a.layers == llm::LayerPattern::GATED_DELTA_NET || a.layers == llm::LayerPattern::KDA));
    }
    CHECK(names.size() == 12);
    CHECK(llm::find_architecture("mamba9") == nullptr);
}
