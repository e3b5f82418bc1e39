// The reply pipeline (llm/reply_stream.h, llm/stream_router.h): UTF-8 safety, stop strings split across
// tokens, <think> routing with held-back partial tags, tool calls in Hermes JSON and Qwen XML.
#include "fake/fake_model.h"
#include "llm/reply_stream.h"

#include <catch2/catch.hpp>

namespace {

// Feeds `text` one byte-token at a time; returns everything routed, plus every content piece seen.
struct Routed {
    llm::RoutedText all;
    std::vector<std::string> pieces;
    bool stopped = false;
};

Routed run(const std::string& text, std::vector<std::string> stops = {}, llm::RouterOptions options = {}) {
    fake::ByteTokenizer tokenizer;
    llm::ReplyStream reply(tokenizer, std::move(stops), options);
    Routed r;
    for (int32_t id : tokenizer.encode(text, false, true)) {
        llm::RoutedText t = reply.push(id);
        if (!t.content.empty()) r.pieces.push_back(t.content);
        if (!t.reasoning.empty()) r.pieces.push_back(t.reasoning);
        r.all.append(std::move(t));
        if (reply.stopped()) break;
    }
    r.stopped = reply.stopped();
    r.all.append(reply.finish());
    return r;
}

bool valid_utf8(const std::string& s) { return llm::incomplete_utf8_suffix(s) == 0; }

}  // namespace

TEST_CASE("reply stream: multi-byte characters split across tokens arrive whole") {
    Routed r = run("héllo 😀 ok");
    CHECK(r.all.content == "héllo 😀 ok");
    for (const auto& piece : r.pieces) CHECK(valid_utf8(piece));
    CHECK(std::find(r.pieces.begin(), r.pieces.end(), "😀") != r.pieces.end());
}

TEST_CASE("reply stream: a stop string split across tokens ends the reply and is not leaked") {
    Routed r = run("Hello STOP world", {"STOP"});
    CHECK(r.stopped);
    CHECK(r.all.content == "Hello ");
    for (const auto& piece : r.pieces) CHECK(piece.find('S') == std::string::npos);
}

TEST_CASE("reply stream: a held stop-string prefix that does not match is released") {
    Routed r = run("a ST b", {"STOP"});
    CHECK_FALSE(r.stopped);
    CHECK(r.all.content == "a ST b");
    Routed tail = run("ends with ST", {"STOP"});
    CHECK(tail.all.content == "ends with ST");
}

TEST_CASE("reply stream: end-of-generation tokens add no text") {
    Routed r = run("done<|im_end|>");
    CHECK(r.all.content == "done");
}

TEST_CASE("router: a leading think block becomes reasoning, tags never leak") {
    Routed r = run("\n<think>\nLet me see.\n</think>\n\nThe answer is 4.");
    CHECK(r.all.reasoning == "\nLet me see.\n");
    CHECK(r.all.content == "The answer is 4.");
    for (const auto& piece : r.pieces) {
        CHECK(piece.find('<') == std::string::npos);
        CHECK(piece.find('>') == std::string::npos);
    }
}

TEST_CASE("router: a prompt that opened <think> starts in reasoning") {
    llm::RouterOptions o;
    o.start_in_reasoning = true;
    Routed r = run("hmm</think>Yes.", {}, o);
    CHECK(r.all.reasoning == "hmm");
    CHECK(r.all.content == "Yes.");
}

TEST_CASE("router: <think> later in the answer, or a lone '<', is content") {
    CHECK(run("I <think> so").all.content == "I <think> so");
    CHECK(run("<b>bold</b>").all.content == "<b>bold</b>");
    CHECK(run("a < b").all.content == "a < b");
}

TEST_CASE("router: a Hermes JSON tool call becomes a tool call") {
    llm::RouterOptions o;
    o.parse_tool_calls = true;
    Routed r = run("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", {}, o);
    REQUIRE(r.all.tool_calls.size() == 1);
    CHECK(r.all.tool_calls[0].name == "get_weather");
    CHECK(nlohmann::json::parse(r.all.tool_calls[0].arguments) == nlohmann::json{{"city", "Paris"}});
    CHECK(r.all.tool_calls[0].id.starts_with("call_"));
    CHECK(r.all.content.empty());
}

TEST_CASE("router: a Qwen XML tool call becomes a tool call with typed arguments") {
    llm::RouterOptions o;
    o.parse_tool_calls = true;
    o.tools = nlohmann::json::parse(R"([{"type":"function","function":{"name":"add","parameters":{"type":"object",
        "properties":{"a":{"type":"number"},"note":{"type":"string"}}}}}])");
    Routed r = run("Sure.\n<tool_call>\n<function=add>\n<parameter=a>\n12\n</parameter>\n<parameter=note>\n42\n</parameter>\n"
                   "</function>\n</tool_call>",
                   {}, o);
    CHECK(r.all.content == "Sure.\n");
    REQUIRE(r.all.tool_calls.size() == 1);
    CHECK(r.all.tool_calls[0].name == "add");
    CHECK(r.all.tool_calls[0].arguments == R"({"a":12,"note":"42"})");

    // A list of types names the parameter's type too (["string", "null"]: an optional string); a
    // declaration of another shape is not a type, and the value is read as JSON if it is JSON.
    o.tools = nlohmann::json::parse(R"([{"type":"function","function":{"name":"add","parameters":{"type":"object",
        "properties":{"a":{"type":{"not":"a type"}},"note":{"type":["null","string"]}}}}}])");
    Routed listed = run("<tool_call>\n<function=add>\n<parameter=a>\n12\n</parameter>\n<parameter=note>\n42\n</parameter>\n"
                        "</function>\n</tool_call>", {}, o);
    REQUIRE(listed.all.tool_calls.size() == 1);
    CHECK(listed.all.tool_calls[0].arguments == R"({"a":12,"note":"42"})");
}

TEST_CASE("router: an unparsable tool call is returned as content, not dropped") {
    llm::RouterOptions o;
    o.parse_tool_calls = true;
    Routed r = run("<tool_call>{not json</tool_call>", {}, o);
    CHECK(r.all.tool_calls.empty());
    CHECK(r.all.content == "<tool_call>{not json</tool_call>");
    Routed unterminated = run("<tool_call>{\"oops\"", {}, o);
    CHECK(unterminated.all.content == "<tool_call>{\"oops\"");
}

TEST_CASE("router: without tools, <tool_call> text is plain content") {
    Routed r = run("<tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call>");
    CHECK(r.all.tool_calls.empty());
    CHECK(r.all.content == "<tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call>");
}

namespace {

// Decodes like SentencePiece: the space that starts a text is dropped.
struct LeadingSpaceTokenizer : fake::ByteTokenizer {
    std::string token_text(int32_t id, bool first) const override {
        std::string text = ByteTokenizer::token_text(id, first);
        return first && text.starts_with(' ') ? text.substr(1) : text;
    }
};

}  // namespace

TEST_CASE("reply stream: with the prompt as context, a reply keeps its leading space") {
    LeadingSpaceTokenizer tokenizer;
    auto reply_text = [&](const std::vector<int32_t>& prompt) {
        llm::ReplyStream reply(tokenizer, {}, {}, prompt);
        std::string out;
        for (int32_t id : tokenizer.encode(" there was", false, false)) out += reply.push(id).content;
        return out + reply.finish().content;
    };
    CHECK(reply_text(tokenizer.encode("Once upon a time", true, false)) == " there was");
    CHECK(reply_text({}) == "there was");  // no context: the detokenizer's rule applies to the reply itself
}
