// Prompt token ids of every llama.cpp golden (../shared/golden/llamacpp/*.json) against our encode of
// the same model file: BOS as add_bos_token says with special tokens parsed, and a plain encode.
#include "tokenizer_test_util.h"

#include <filesystem>

using namespace tok_test;

TEST_CASE("prompt ids of every llama.cpp golden match our encode of its model") {
    REQUIRE_SHARED_DATA();
    int n_files = 0, n_cases = 0;
    for (const auto& entry : std::filesystem::directory_iterator(test_data::shared("golden/llamacpp"))) {
        if (entry.path().extension() != ".json" || entry.path().filename() == "tolerances.json") continue;
        std::ifstream in(entry.path());
        const auto golden = nlohmann::json::parse(in);
        const auto file = gguf::File::open(test_data::shared("models/" + golden.at("model_file").get<std::string>()));
        const auto tok = tok::Tokenizer::from_gguf(*file);
        const auto& golden_vocab = golden.at("vocab");
        CHECK(tok->n_vocab() == golden_vocab.at("n_vocab").get<int32_t>());
        CHECK(tok->add_bos() == golden_vocab.at("add_bos").get<bool>());
        n_files++;
        for (const auto& c : golden.at("cases")) {
            const std::string prompt = c.at("prompt").get<std::string>();
            INFO(entry.path().filename().string() << ": '" << prompt << "'");
            const auto ids = c.at("prompt_ids").get<std::vector<int32_t>>();
            const auto ids_plain = c.at("prompt_ids_no_special").get<std::vector<int32_t>>();
            CHECK(show(tok->encode(prompt, true, true), *tok) == show(ids, *tok));
            CHECK(show(tok->encode(prompt, false, false), *tok) == show(ids_plain, *tok));
            n_cases++;
        }
    }
    CHECK(n_files >= 50);
    CHECK(n_cases >= 150);
}
