// What a user of the tokenizer notices beyond the corpus: special-token switches, BOS/EOS, end of
// generation, SentencePiece spacing, and clear errors for vocabularies and ids it cannot use.
#include "tokenizer_test_util.h"

using namespace tok_test;

namespace {

GgufImage tiny_bpe(const std::string& pre) {
    return GgufImage()
        .str("tokenizer.ggml.model", "gpt2")
        .str("tokenizer.ggml.pre", pre)
        .strs("tokenizer.ggml.tokens", {"a", "b", "ab", "<|end|>"})
        .i32s("tokenizer.ggml.token_type", {1, 1, 1, 3})
        .strs("tokenizer.ggml.merges", {"a b"});
}

}  // namespace

TEST_CASE("the built-in model adds BOS when asked and drops SentencePiece's leading space on decode") {
    auto file = gguf::File::open(test_data::builtin_model());
    auto t = tok::Tokenizer::from_gguf(*file);
    CHECK(t->bos() == 1);
    CHECK(t->eos() == 2);
    CHECK(t->add_bos());
    const auto ids = t->encode("Once upon a time", true, true);
    REQUIRE(ids.size() > 1);
    CHECK(ids[0] == 1);
    CHECK(t->encode("", true, true) == std::vector<int32_t>{1});
    CHECK(t->encode("", false, true).empty());
    CHECK(t->decode(t->encode("Once upon a time", false, true)) == "Once upon a time");
    CHECK(t->decode(ids) == "<s> Once upon a time");  // the special token is shown; the space it precedes stays
    CHECK(t->is_end(2));
    CHECK_FALSE(t->is_end(1));
}

TEST_CASE("parse_special off keeps control tokens as text but still splits user-defined ones") {
    REQUIRE_SHARED_DATA();
    const Loaded& qwen = vocab("qwen3");
    const auto parsed = qwen.tok->encode("<|im_start|>user", false, true);
    CHECK(parsed.front() == 151644);
    const auto plain = qwen.tok->encode("<|im_start|>user", false, false);
    CHECK(plain.size() > 3);
    CHECK(qwen.tok->decode(plain) == "<|im_start|>user");
    // <think> is a user-defined token in Qwen3: split out whatever parse_special says
    CHECK(qwen.tok->encode("<think>", false, false) == std::vector<int32_t>{151667});
    CHECK(qwen.tok->is_special(151667));
    CHECK(qwen.tok->is_end(151645));  // <|im_end|>
    CHECK(qwen.tok->is_end(151643));  // <|endoftext|>
    CHECK_FALSE(qwen.tok->is_end(151667));
}

TEST_CASE("a longer special token wins over a shorter one inside it") {
    REQUIRE_SHARED_DATA();
    const Loaded& llama3 = vocab("llama3");
    // <|reserved_special_token_25|> must not be read as <|reserved_special_token_2|> + "5|>"
    const auto ids = llama3.tok->encode("<|reserved_special_token_25|>", false, true);
    REQUIRE(ids.size() == 1);
    CHECK(llama3.tok->piece(ids[0]) == "<|reserved_special_token_25|>");
}

TEST_CASE("merges apply by rank and special tokens split out of byte-level BPE text") {
    std::vector<uint8_t> storage;
    const Loaded v = load_memory(tiny_bpe("gpt-4o"), storage);
    CHECK(v.tok->encode("ab", false, true) == std::vector<int32_t>{2});
    CHECK(v.tok->encode("aab<|end|>b", false, true) == std::vector<int32_t>{0, 2, 3, 1});
    const auto plain = v.tok->encode("aab<|end|>b", false, false);  // '<', '|', ... have no tokens here
    CHECK(std::count(plain.begin(), plain.end(), 3) == 0);
    CHECK(v.tok->is_end(3));
    CHECK(v.tok->decode({0, 2, 3, 1}) == "aab<|end|>b");
    CHECK(v.tok->piece(3) == "<|end|>");
}

TEST_CASE("an unknown pre-tokenizer preset is an error naming it") {
    std::vector<uint8_t> storage;
    REQUIRE_THROWS_AS(load_memory(tiny_bpe("my-new-model"), storage), tok::Error);
    REQUIRE_THROWS_WITH(load_memory(tiny_bpe("my-new-model"), storage),
                        Catch::Contains("unknown pre-tokenizer preset 'my-new-model'") && Catch::Contains("test.gguf"));
}

TEST_CASE("every preset the issue names loads") {
    for (const char* pre : {"default", "llama3", "llama-v3", "llama-bpe", "qwen2", "qwen35", "olmo", "kimi-k2", "tekken",
                            "glm4", "gpt-4o", "deepseek-v3"}) {
        std::vector<uint8_t> storage;
        INFO(pre);
        const Loaded v = load_memory(tiny_bpe(pre), storage);
        CHECK(v.tok->encode("ab", false, true) == std::vector<int32_t>{2});
    }
}

TEST_CASE("unusable vocabularies are clear errors") {
    std::vector<uint8_t> storage;
    CHECK_THROWS_WITH(load_memory(GgufImage().str("tokenizer.ggml.model", "bert"), storage),
                      Catch::Contains("unsupported tokenizer model 'bert'"));
    CHECK_THROWS_WITH(load_memory(GgufImage().str("general.name", "x"), storage), Catch::Contains("has no tokenizer"));
    CHECK_THROWS_WITH(load_memory(GgufImage().str("tokenizer.ggml.model", "gpt2").strs("tokenizer.ggml.tokens", {"a", "a"}), storage),
                      Catch::Contains("duplicate token 'a'"));
    CHECK_THROWS_WITH(load_memory(GgufImage()
                                      .str("tokenizer.ggml.model", "gpt2")
                                      .strs("tokenizer.ggml.tokens", {"a", "b"})
                                      .strs("tokenizer.ggml.merges", {"ab"}),
                                  storage),
                      Catch::Contains("tokenizer.ggml.merges[0] = 'ab'"));
    CHECK_THROWS_WITH(load_memory(GgufImage()
                                      .str("tokenizer.ggml.model", "gpt2")
                                      .strs("tokenizer.ggml.tokens", {"a", "b"})
                                      .boolean("tokenizer.ggml.add_bos_token", true),
                                  storage),
                      Catch::Contains("no BOS token"));
    CHECK_THROWS_WITH(load_memory(GgufImage()
                                      .str("tokenizer.ggml.model", "llama")
                                      .strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0xZZ>"})
                                      .i32s("tokenizer.ggml.token_type", {2, 3, 3, 6}),
                                  storage),
                      Catch::Contains("byte token 3 is '<0xZZ>'"));
    CHECK_THROWS_WITH(load_memory(GgufImage()
                                      .str("tokenizer.ggml.model", "llama")
                                      .strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"})
                                      .f32s("tokenizer.ggml.scores", {0}),
                                  storage),
                      Catch::Contains("tokenizer.ggml.scores has fewer entries"));
}

TEST_CASE("ids outside the vocabulary are errors, not crashes") {
    auto file = gguf::File::open(test_data::builtin_model());
    auto t = tok::Tokenizer::from_gguf(*file);
    CHECK_THROWS_WITH(t->decode({5, 512}), Catch::Contains("token id 512 is out of range (n_vocab 512)"));
    CHECK_THROWS_AS(t->piece(-1), tok::Error);
    tok::StreamDecoder dec(*t);
    CHECK_THROWS_AS(dec.push(100000), tok::Error);
    CHECK_FALSE(t->is_end(-5));
}

TEST_CASE("arbitrary bytes round-trip through byte-level BPE") {
    REQUIRE_SHARED_DATA();
    const Loaded& v = vocab("llama3");
    std::string junk;
    for (int i = 0; i < 256; i++) junk.push_back(char(i));
    junk += "\xc3\x28\xe2\x82\xf0\x9f\x98";  // invalid and truncated sequences
    CHECK(v.tok->decode(v.tok->encode(junk, false, false)) == junk);
}

TEST_CASE("SentencePiece word by word gives the ids of whole fragments") {
    REQUIRE_SHARED_DATA();
    // Random texts rich in what could join across a word boundary: spaces, '>', '<', '/', newlines.
    const std::vector<std::string> alphabet = {" ", " ", "  ", ">", "<", "/", "a", "b", "th", "e", "\n", "\t", "1",
                                               "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "</", "> </", "\xe2\x96\x81"};
    uint32_t seed = 12345;
    const auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
    for (const char* name : {"llama2", "gemma3"}) {
        const auto file = gguf::File::open(test_data::shared(std::string("tokenizers/vocab/") + name + ".vocab.gguf"));
        const auto by_word = tok::make_spm(*file, true), whole = tok::make_spm(*file, false);
        int mismatches = 0;
        for (int i = 0; i < 400; i++) {
            std::string text;
            for (uint32_t n = 1 + next() % 24; n > 0; n--) text += alphabet[next() % alphabet.size()];
            if (by_word->encode(text, false, true) != whole->encode(text, false, true) && ++mismatches <= 3)
                UNSCOPED_INFO(name << ": '" << escaped(text) << "'");
        }
        CHECK(mismatches == 0);
    }
}
