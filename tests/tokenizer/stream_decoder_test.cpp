// The stream decoder: over the whole corpus its pieces concatenate to decode(ids) and none holds a
// partial UTF-8 sequence; invalid bytes become U+FFFD.
#include "tokenizer_test_util.h"

#include "tokenizer/unicode.h"

#include <cstdio>

using namespace tok_test;

namespace {

bool is_whole_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        size_t len;
        if (tok::unicode::decode_utf8(s.data() + i, s.size() - i, len) >= tok::unicode::INVALID_BASE) return false;
        i += len;
    }
    return true;
}

void check_streaming(const std::string& name) {
    REQUIRE_SHARED_DATA();
    const Loaded& v = vocab(name);
    int mismatches = 0, partial = 0, n_pieces = 0;
    for (const Case& c : read_expected(name)) {
        tok::StreamDecoder dec(*v.tok);
        std::string streamed;
        for (int32_t id : c.ids) {
            const std::string piece = dec.push(id);
            partial += !is_whole_utf8(piece);
            n_pieces += !piece.empty();
            streamed += piece;
        }
        const std::string tail = dec.flush();
        partial += !is_whole_utf8(tail);
        streamed += tail;
        if (streamed != v.tok->decode(c.ids) && ++mismatches <= 3)
            UNSCOPED_INFO(name << " line " << c.line << ": streamed '" << escaped(streamed) << "'");
    }
    CHECK(mismatches == 0);
    CHECK(partial == 0);
    CHECK(n_pieces > 1000);
}

}  // namespace

TEST_CASE("stream decoding the llama3 corpus gives decode() in whole code points") { check_streaming("llama3"); }
TEST_CASE("stream decoding the qwen3 corpus gives decode() in whole code points") { check_streaming("qwen3"); }
TEST_CASE("stream decoding the gpt4o corpus gives decode() in whole code points") { check_streaming("gpt4o"); }
TEST_CASE("stream decoding the gemma3 corpus gives decode() in whole code points") { check_streaming("gemma3"); }
TEST_CASE("stream decoding the llama2 corpus gives decode() in whole code points") { check_streaming("llama2"); }
TEST_CASE("stream decoding the mistral_v1 corpus gives decode() in whole code points") { check_streaming("mistral_v1"); }

TEST_CASE("the stream decoder replaces bytes that can never be valid UTF-8") {
    // A SentencePiece vocabulary whose byte tokens (ids 3 + byte) carry arbitrary bytes.
    std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
    std::vector<int32_t> types = {2, 3, 3};
    for (int b = 0; b < 256; b++) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        tokens.push_back(hex);
        types.push_back(6);
    }
    tokens.push_back("\xe2\x96\x81hi");
    types.push_back(1);
    std::vector<uint8_t> storage;
    const Loaded v = load_memory(GgufImage()
                                     .str("tokenizer.ggml.model", "llama")
                                     .strs("tokenizer.ggml.tokens", tokens)
                                     .f32s("tokenizer.ggml.scores", std::vector<float>(tokens.size(), 0.0f))
                                     .i32s("tokenizer.ggml.token_type", types),
                                 storage);
    const int32_t hi = 259, F0 = 3 + 0xf0, x9F = 3 + 0x9f, FF = 3 + 0xff;
    tok::StreamDecoder dec(*v.tok);
    CHECK(dec.push(hi) == "hi");                    // the space SentencePiece put in front is dropped
    CHECK(dec.push(F0).empty());                    // F0: could start an emoji
    CHECK(dec.push(x9F).empty());                   // F0 9F: still could
    CHECK(dec.push(FF) == "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // FF ends all hope: three U+FFFD
    CHECK(dec.push(F0).empty());
    CHECK(dec.flush() == "\xef\xbf\xbd");           // a sequence that never completed
    CHECK(v.tok->decode({hi, F0, x9F}) == "hi\xf0\x9f");  // decode() itself stays byte-exact
}

TEST_CASE("the stream decoder keeps the first word's space when the ids continue a text") {
    REQUIRE_SHARED_DATA();
    const Loaded& v = vocab("llama2");  // SentencePiece: decode() drops the space that starts a text
    const std::vector<int32_t> ids = v.tok->encode("there was", false, false);  // ▁there ▁was
    REQUIRE(v.tok->decode(ids) == "there was");
    tok::StreamDecoder starts(*v.tok), continues(*v.tok, true);
    std::string started, continued;
    for (int32_t id : ids) started += starts.push(id), continued += continues.push(id);
    CHECK(started + starts.flush() == "there was");
    CHECK(continued + continues.flush() == " there was");  // a reply after its prompt, as every front end prints it
}
