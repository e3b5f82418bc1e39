// Fuzz target: the grammar engine. The first byte picks the input: GBNF text, or a JSON Schema whose
// GBNF must then parse (a converter writing GBNF its own parser refuses is a bug). A grammar that
// parses drives a matcher over the byte vocabulary with the text after a NUL byte, if any.
#include "fake/fake_model.h"
#include "llm/grammar.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const fake::ByteTokenizer tokenizer;
    static const llm::GrammarVocab vocab(tokenizer);
    if (size == 0) return 0;
    const bool is_schema = data[0] & 1;
    std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1), text;
    if (size_t nul = input.find('\0'); nul != std::string_view::npos) text = input.substr(nul + 1), input = input.substr(0, nul);

    std::shared_ptr<const llm::Grammar> grammar;
    if (is_schema) {
        // The server's limit (server/request.h JSON_MAX_DEPTH): deeper bodies never reach the converter.
        const nlohmann::ordered_json::parser_callback_t depth_limit = [](int depth, auto, auto&) {
            if (depth > 256) throw std::length_error("too deep");
            return true;
        };
        nlohmann::ordered_json schema;
        try {
            schema = nlohmann::ordered_json::parse(input, depth_limit, false);
        } catch (const std::length_error&) {
            return 0;
        }
        if (schema.is_discarded()) return 0;
        std::string gbnf;
        try {
            gbnf = llm::json_schema_to_gbnf(schema);
        } catch (const llm::GrammarError&) {
            return 0;
        }
        grammar = llm::parse_gbnf(gbnf);  // no catch: must succeed
    } else {
        try {
            grammar = llm::parse_gbnf(input);
        } catch (const llm::GrammarError&) {
            return 0;
        }
    }
    try {
        // A mask per byte for the first bytes (the server computes one per token), then the rest of
        // the text at once: each execution stays well inside libFuzzer's per-input timeout even at the
        // matcher's stack budget.
        constexpr size_t MASKED_BYTES = 32;
        llm::GrammarMatcher matcher(grammar, vocab);
        matcher.allowed();
        size_t i = 0;
        for (; i < text.size() && i < MASKED_BYTES && matcher.accept_text(text.substr(i, 1)); i++) matcher.allowed();
        if (i == MASKED_BYTES && i < text.size() && matcher.accept_text(text.substr(i))) matcher.allowed();
        matcher.can_end();
    } catch (const llm::GrammarError&) {  // a token reference the vocabulary does not have, the budget
    }
    return 0;
}
