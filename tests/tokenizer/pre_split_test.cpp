// The hand-written pre-tokenizer scanners against a real regex engine running each preset's published
// pattern (tests/tokenizer/data/pre_split_cases.json, made by scripts/gen_pre_split_cases.py).
#include "tokenizer_test_util.h"

#include "tokenizer/pretokenize.h"

using namespace tok_test;

namespace {

const nlohmann::json& cases() {
    static const nlohmann::json j = [] {
        std::ifstream in(test_data::source_dir() + "/tests/tokenizer/data/pre_split_cases.json");
        return nlohmann::json::parse(in);
    }();
    return j;
}

void check_preset(const std::string& name) {
    const tok::Preset* preset = tok::find_preset(name);
    REQUIRE(preset != nullptr);
    const auto& texts = cases().at("texts");
    const auto& expected = cases().at("splits").at(name);
    REQUIRE(texts.size() == expected.size());
    int failures = 0;
    for (size_t i = 0; i < texts.size(); i++) {
        const std::string text = texts[i].get<std::string>();
        std::vector<tok::Span> words;
        tok::pre_split(preset->split, text, words);
        std::vector<uint32_t> got;
        for (const tok::Span& w : words) got.push_back(w.end - w.begin);
        const auto want = expected[i].get<std::vector<uint32_t>>();
        if (got != want && ++failures <= 5) {
            std::string shown;
            for (const tok::Span& w : words) shown += "[" + escaped(text.substr(w.begin, w.end - w.begin)) + "]";
            UNSCOPED_INFO(name << ": '" << escaped(text) << "' split as " << shown);
        }
    }
    CHECK(failures == 0);
}

}  // namespace

TEST_CASE("pre-split default matches its regexes") { check_preset("default"); }
TEST_CASE("pre-split olmo (GPT-2) matches its regex") { check_preset("olmo"); }
TEST_CASE("pre-split llama3 matches its regex") { check_preset("llama3"); }
TEST_CASE("pre-split glm4 matches its regex") { check_preset("glm4"); }
TEST_CASE("pre-split qwen2 matches its regex") { check_preset("qwen2"); }
TEST_CASE("pre-split qwen35 matches its regex") { check_preset("qwen35"); }
TEST_CASE("pre-split tekken matches its regex") { check_preset("tekken"); }
TEST_CASE("pre-split gpt-4o matches its regex") { check_preset("gpt-4o"); }
TEST_CASE("pre-split kimi-k2 matches its regex") { check_preset("kimi-k2"); }
TEST_CASE("pre-split deepseek-v3 matches its regexes") { check_preset("deepseek-v3"); }
