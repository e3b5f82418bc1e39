// The seed's tokenizer cases (tinygrad test/null/test_llm_tokenizer.py): Llama 3 ids from Meta's own
// tokenizer.model, a tekken vocabulary built from GGUF keys alone, and the stream decoder holding an
// emoji split across two tokens.
#include "tokenizer_test_util.h"

using namespace tok_test;

namespace {

void check_coding(const tok::Tokenizer& t, const std::string& text, const std::vector<int32_t>& ids) {
    INFO("'" << escaped(text) << "'");
    CHECK(show(t.encode(text, false, true), t) == show(ids, t));
    CHECK(t.decode(ids) == text);
}

// GPT-2's printable stand-in for each byte (openai/gpt-2 encoder.py bytes_to_unicode).
std::string gpt2_bytes(const std::string& raw) {
    std::string out;
    for (unsigned char b : raw) {
        int cp = b;
        if (!((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae))) {
            int n = 0;
            for (int x = 0; x < b; x++)
                if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae))) n++;
            cp = 256 + n;
        }
        if (cp < 0x80) out.push_back(char(cp));
        else out.push_back(char(0xc0 | cp >> 6)), out.push_back(char(0x80 | (cp & 0x3f)));
    }
    return out;
}

}  // namespace

TEST_CASE("tinygrad's Llama 3 cases encode and decode exactly") {
    REQUIRE_SHARED_DATA();
    const tok::Tokenizer& t = *vocab("llama3").tok;
    // Found by looking the whole word up in the vocabulary (ignore_merges), not by applying merges.
    check_coding(t, " \xd0\xbd\xd0\xb0\xd0\xbf\xd1\x80\xd0\xb8\xd0\xbc\xd0\xb5\xd1\x80", {111797});
    check_coding(t, "hello world", {15339, 1917});
    check_coding(t, " \xc2\x85" "0", {220, 116360, 15});
    check_coding(t, " \xc3\xac\xc2\x8b\xc2\xa4\xc3\xad", {1717, 105, 116174, 82638, 2483});
    check_coding(t, "hello <|end_of_text|>", {15339, 220, 128001});
    check_coding(t, "<|start_header_id|>user<|end_header_id|>\n\n", {128006, 882, 128007, 271});
    check_coding(t, "00000000000000000", {931, 931, 931, 931, 931, 410});
    check_coding(t, "today\n  \n", {31213, 14211});
    check_coding(t, "hello <|eot_id|>world", {15339, 220, 128009, 14957});
    check_coding(t, "hello <|eot_id|>world again", {15339, 220, 128009, 14957, 1578});
    check_coding(t, "hello changed <|eot_id|>world again", {15339, 5614, 220, 128009, 14957, 1578});
}

TEST_CASE("a long cached prompt tokenizes like a fresh one") {
    REQUIRE_SHARED_DATA();
    const Loaded& v = vocab("llama3");
    std::string prefix;
    for (int i = 0; i < 700; i++) prefix += "system tools\n";
    prefix += "<|eot_id|>";
    const auto fresh = load_vocab("llama3").tok->encode(prefix + "run ls /", false, true);
    v.tok->encode(prefix + "run tower of hanoi", false, true);
    CHECK(v.tok->encode(prefix + "run ls /", false, true) == fresh);
}

TEST_CASE("a tekken vocabulary from GGUF keys alone encodes whole words and control tokens") {
    std::vector<uint8_t> storage;
    const Loaded v = load_memory(GgufImage()
                                     .str("tokenizer.ggml.model", "gpt2")
                                     .str("tokenizer.ggml.pre", "tekken")
                                     .strs("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "[INST]", "[/INST]", "hello"})
                                     .i32s("tokenizer.ggml.token_type", {3, 3, 3, 3, 3, 1})
                                     .u32("tokenizer.ggml.eos_token_id", 2),
                                 storage);
    CHECK(v.tok->encode("hello", false, true) == std::vector<int32_t>{5});
    CHECK(v.tok->encode("[INST]", false, true) == std::vector<int32_t>{3});
    CHECK(v.tok->encode("[/INST]", false, true) == std::vector<int32_t>{4});
    CHECK(v.tok->encode("hello", true, true) == std::vector<int32_t>{5});  // no BOS token to add
    CHECK(v.tok->is_end(2));
    CHECK_FALSE(v.tok->is_end(5));
}

TEST_CASE("the stream decoder holds an emoji split over two tokens until it is whole") {
    // ' ' + 3/4 of U+1F60A, then its last byte (tinygrad's qwen3.5 tokens 25677 and 138)
    std::vector<uint8_t> storage;
    const Loaded v = load_memory(GgufImage()
                                     .str("tokenizer.ggml.model", "gpt2")
                                     .str("tokenizer.ggml.pre", "qwen35")
                                     .strs("tokenizer.ggml.tokens", {gpt2_bytes(" \xf0\x9f\x98"), gpt2_bytes("\x8a")})
                                     .strs("tokenizer.ggml.merges", {}),
                                 storage);
    tok::StreamDecoder dec(*v.tok);
    CHECK(dec.push(0) == " ");
    CHECK(dec.push(1) == "\xf0\x9f\x98\x8a");
    CHECK(dec.flush().empty());
}
