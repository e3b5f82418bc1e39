// Control tokens never reach a reply's text: stories260K emits BOS ("<s>") mid-answer now and then, and
// the web chat showed it literally. Decoding renders it; the reply stream must not.
#include "common/test_data.h"
#include "gguf/gguf.h"
#include "llm/reply_stream.h"

TEST_CASE("a BOS in the middle of a reply adds no text", "[reply]") {
    auto file = gguf::File::open(test_data::builtin_model());
    auto tokenizer = tok::Tokenizer::from_gguf(*file);
    const int32_t bos = tokenizer->bos();
    REQUIRE(tokenizer->decode({bos}) == "<s>");  // what leaked before
    REQUIRE(tokenizer->is_control(bos));
    const std::vector<int32_t> first = tokenizer->encode("Once upon a time", false, false);
    const std::vector<int32_t> second = tokenizer->encode(" there was a cat", false, false);
    auto reply_text = [&](bool with_bos) {
        llm::ReplyStream reply(*tokenizer, {}, llm::RouterOptions{});
        std::string text;
        for (int32_t id : first) text += reply.push(id).content;
        if (with_bos) text += reply.push(bos).content;
        for (int32_t id : second) text += reply.push(id).content;
        return text + reply.finish().content;
    };
    const std::string text = reply_text(true);
    CHECK(text.find("<s>") == std::string::npos);
    CHECK(text == reply_text(false));
}
