// Tool-call syntaxes beyond Hermes/Qwen: Llama 3.x JSON, Mistral [TOOL_CALLS] (JSON list and N[ARGS]{…}),
// gpt-oss harmony channels. The router parses each while streaming (byte by byte, and with the markers
// as control tokens); the syntax is found from the real templates; on random-weight models the grammar
// alone makes required / named / single calls parse and match their schema, and "none" yields no call.
#include "common/test_data.h"
#include "fake/fake_model.h"
#include "llm/chat_template.h"
#include "llm/grammar.h"
#include "llm/reply_stream.h"
#include "server/request.h"

#include <algorithm>
#include <catch2/catch.hpp>


using server::json;
using llm::ToolSyntax;

namespace {

// Bytes are ids 0..255; then the markers, as control tokens (ends: end-of-generation).
class MarkerTokenizer : public tok::Tokenizer {
public:
    MarkerTokenizer(std::vector<std::string> markers, std::vector<std::string> ends) : markers_(std::move(markers)), ends_(std::move(ends)) {
        markers_.insert(markers_.end(), ends_.begin(), ends_.end());
    }
    std::vector<int32_t> encode(std::string_view text, bool, bool parse_special) const override {
        std::vector<int32_t> ids;
        for (size_t at = 0; at < text.size();) {
            bool marker = false;
            for (size_t m = 0; m < markers_.size() && parse_special && !marker; m++)
                if (text.substr(at).starts_with(markers_[m])) ids.push_back(int32_t(256 + m)), at += markers_[m].size(), marker = true;
            if (!marker) ids.push_back(int32_t(uint8_t(text[at++])));
        }
        return ids;
    }
    std::string piece(int32_t id) const override { return id < 256 ? std::string(1, char(id)) : markers_[size_t(id - 256)]; }
    std::string token_text(int32_t id, bool) const override { return piece(id); }
    int32_t n_vocab() const override { return int32_t(256 + markers_.size()); }
    int32_t bos() const override { return -1; }
    int32_t eos() const override { return n_vocab() - 1; }
    bool add_bos() const override { return false; }
    bool is_end(int32_t id) const override { return id >= n_vocab() - int32_t(ends_.size()); }
    bool is_special(int32_t id) const override { return id >= 256; }
    bool is_control(int32_t id) const override { return id >= 256; }

private:
    std::vector<std::string> markers_, ends_;
};

struct Routed {
    llm::RoutedText all;
    std::vector<std::string> pieces;  // every content and reasoning piece as it streamed
};

// Streams `text` token by token (with the byte tokenizer: byte by byte) through the reply pipeline.
Routed route(const tok::Tokenizer& tokenizer, const std::string& text, llm::RouterOptions options) {
    llm::ReplyStream reply(tokenizer, {}, std::move(options));
    Routed r;
    for (int32_t id : tokenizer.encode(text, false, true)) {
        llm::RoutedText t = reply.push(id);
        for (const std::string* s : {&t.content, &t.reasoning})
            if (!s->empty()) r.pieces.push_back(*s);
        r.all.append(std::move(t));
    }
    r.all.append(reply.finish());
    return r;
}

const json TOOLS = json::parse(R"([
  {"type":"function","function":{"name":"get_weather","description":"Weather in a city","parameters":{"type":"object",
    "properties":{"city":{"type":"string","maxLength":8},"unit":{"enum":["C","F"]}},"required":["city","unit"],"additionalProperties":false}}},
  {"type":"function","function":{"name":"add","description":"Adds two numbers","parameters":{"type":"object",
    "properties":{"a":{"type":"integer","minimum":0,"maximum":999},"b":{"type":"integer"}},"required":["a","b"],"additionalProperties":false}}}])");

llm::RouterOptions tool_options(ToolSyntax syntax) {
    llm::RouterOptions o;
    o.parse_tool_calls = true;
    o.tool_syntax = syntax;
    o.tools = nlohmann::json::parse(TOOLS.dump());
    return o;
}

bool no_markup(const std::vector<std::string>& pieces) {
    for (const std::string& p : pieces)
        for (const char* m : {"<|", "|>", "[TOOL", "[ARGS]", "python_tag"})
            if (p.find(m) != std::string::npos) return false;
    return true;
}

std::string golden_template(const std::string& name) { return test_data::read_text(test_data::shared("golden/templates/templates/" + name)); }

}  // namespace

TEST_CASE("router llama3: a reply that is one JSON call becomes a tool call, byte by byte") {
    fake::ByteTokenizer bytes;
    Routed r = route(bytes, " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"C\"}}", tool_options(ToolSyntax::LLAMA3_JSON));
    REQUIRE(r.all.tool_calls.size() == 1);
    CHECK(r.all.tool_calls[0].name == "get_weather");
    CHECK(json::parse(r.all.tool_calls[0].arguments) == json{{"city", "Paris"}, {"unit", "C"}});
    CHECK(r.all.content.empty());
    CHECK(r.pieces.empty());  // nothing of the call leaked as content while it streamed
}

TEST_CASE("router llama3: JSON naming no offered tool, and text, stay content") {
    fake::ByteTokenizer bytes;
    const std::string answer = "{\"name\": \"Bob\", \"parameters\": {}}";
    CHECK(route(bytes, answer, tool_options(ToolSyntax::LLAMA3_JSON)).all.content == answer);
    CHECK(route(bytes, "Hello {x}", tool_options(ToolSyntax::LLAMA3_JSON)).all.content == "Hello {x}");
    Routed r = route(bytes, "{\"name\": \"get_weather\", \"parameters\": {}}", {});  // no tools offered
    CHECK(r.all.tool_calls.empty());
    CHECK(r.all.content == "{\"name\": \"get_weather\", \"parameters\": {}}");
}

TEST_CASE("router llama3: <|python_tag|> as a control token opens a call and never shows") {
    MarkerTokenizer tk({"<|python_tag|>"}, {"<|eom_id|>"});
    Routed r = route(tk, "Let me look.<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}<|eom_id|>", tool_options(ToolSyntax::LLAMA3_JSON));
    CHECK(r.all.content == "Let me look.");
    REQUIRE(r.all.tool_calls.size() == 1);
    CHECK(r.all.tool_calls[0].name == "add");
    CHECK(no_markup(r.pieces));
    // without tools the control token is shown as nothing, as before
    CHECK(route(tk, "a<|python_tag|>b", {}).all.content == "ab");
}

TEST_CASE("router mistral: [TOOL_CALLS] with a JSON list gives every call, with 9-character ids") {
    fake::ByteTokenizer bytes;
    MarkerTokenizer tk({"[TOOL_CALLS]"}, {"</s>"});
    const std::string text = "Sure.[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}, \"id\": \"abcDEF123\"}, "
                             "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"F\"}}]";
    for (const tok::Tokenizer* t : {static_cast<const tok::Tokenizer*>(&bytes), static_cast<const tok::Tokenizer*>(&tk)}) {
        Routed r = route(*t, text, tool_options(ToolSyntax::MISTRAL_JSON));
        CHECK(r.all.content == "Sure.");
        REQUIRE(r.all.tool_calls.size() == 2);
        CHECK(r.all.tool_calls[0].name == "add");
        CHECK(json::parse(r.all.tool_calls[1].arguments) == json{{"city", "Oslo"}, {"unit", "F"}});
        for (const auto& call : r.all.tool_calls) CHECK(call.id.size() == 9);  // Mistral templates refuse other ids
        CHECK(no_markup(r.pieces));
    }
}

TEST_CASE("router mistral: [TOOL_CALLS]N[ARGS]{…}, with and without [CALL_ID], parallel") {
    MarkerTokenizer tk({"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"}, {"</s>"});
    fake::ByteTokenizer bytes;
    const std::string text = "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\", \"unit\": \"C\"}[TOOL_CALLS]add[CALL_ID]a1b2c3d4e[ARGS]{\"a\": 5, \"b\": 6}";
    for (const tok::Tokenizer* t : {static_cast<const tok::Tokenizer*>(&bytes), static_cast<const tok::Tokenizer*>(&tk)}) {
        Routed r = route(*t, text, tool_options(ToolSyntax::MISTRAL_ARGS));
        CHECK(r.all.content.empty());
        REQUIRE(r.all.tool_calls.size() == 2);
        CHECK(r.all.tool_calls[0].name == "get_weather");
        CHECK(r.all.tool_calls[1].name == "add");
        CHECK(json::parse(r.all.tool_calls[1].arguments) == json{{"a", 5}, {"b", 6}});
    }
}

TEST_CASE("router mistral: an unparsable call is content without the control marker") {
    MarkerTokenizer tk({"[TOOL_CALLS]", "[ARGS]"}, {"</s>"});
    Routed r = route(tk, "[TOOL_CALLS]oops", tool_options(ToolSyntax::MISTRAL_ARGS));
    CHECK(r.all.tool_calls.empty());
    CHECK(r.all.content == "oops");
}

TEST_CASE("router harmony: analysis is reasoning, final is the answer, markup never shows") {
    fake::ByteTokenizer bytes;
    MarkerTokenizer tk({"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>"}, {"<|return|>", "<|call|>"});
    const std::string text = "<|channel|>analysis<|message|>User wants 4.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.<|return|>";
    for (const tok::Tokenizer* t : {static_cast<const tok::Tokenizer*>(&bytes), static_cast<const tok::Tokenizer*>(&tk)}) {
        Routed r = route(*t, text, {.tool_syntax = ToolSyntax::HARMONY});
        CHECK(r.all.reasoning == "User wants 4.");
        CHECK(r.all.content == "It is 4.");
        CHECK(no_markup(r.pieces));
    }
}

TEST_CASE("router harmony: a commentary message to=functions.N is a call, in either header order") {
    fake::ByteTokenizer bytes;
    MarkerTokenizer tk({"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>"}, {"<|return|>", "<|call|>"});
    const std::string as_template = " to=functions.add<|channel|>commentary json<|message|>{\"a\": 1, \"b\": 2}<|call|>";
    const std::string as_model = "<|channel|>analysis<|message|>Need add.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
                                 "<|constrain|>json<|message|>{\"city\": \"Oslo\", \"unit\": \"C\"}<|call|>";
    for (const tok::Tokenizer* t : {static_cast<const tok::Tokenizer*>(&bytes), static_cast<const tok::Tokenizer*>(&tk)}) {
        Routed a = route(*t, as_template, tool_options(ToolSyntax::HARMONY));
        REQUIRE(a.all.tool_calls.size() == 1);
        CHECK(a.all.tool_calls[0].name == "add");
        CHECK(a.all.content.empty());
        Routed b = route(*t, as_model, tool_options(ToolSyntax::HARMONY));
        REQUIRE(b.all.tool_calls.size() == 1);
        CHECK(b.all.tool_calls[0].name == "get_weather");
        CHECK(b.all.reasoning == "Need add.");
        CHECK(no_markup(b.pieces));
        // tools not offered (or tool_choice "none"): no call, the message is shown as written
        Routed none = route(*t, as_template, {.tool_syntax = ToolSyntax::HARMONY});
        CHECK(none.all.tool_calls.empty());
        CHECK(none.all.content == "{\"a\": 1, \"b\": 2}");
    }
}

TEST_CASE("router harmony: text outside any message is content") {
    fake::ByteTokenizer bytes;
    Routed r = route(bytes, "plain words <b>", {.tool_syntax = ToolSyntax::HARMONY});
    CHECK(r.all.content == "plain words <b>");
}

TEST_CASE("tool syntax: found by rendering a probe call through the real templates") {
    REQUIRE_SHARED_DATA();
    const std::vector<std::pair<std::string, ToolSyntax>> cases = {
        {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolSyntax::LLAMA3_JSON},
        {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolSyntax::LLAMA3_JSON},
        {"meta-llama-Llama-3.3-70B-Instruct.jinja", ToolSyntax::LLAMA3_JSON},
        {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolSyntax::MISTRAL_JSON},
        {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolSyntax::MISTRAL_ARGS},
        {"mistralai-Ministral-3-14B-Reasoning-2512.jinja", ToolSyntax::MISTRAL_ARGS},
        {"openai-gpt-oss-120b.jinja", ToolSyntax::HARMONY},
        {"Qwen3-Coder.jinja", ToolSyntax::QWEN_XML},
        {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolSyntax::HERMES},
        {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolSyntax::HERMES},
    };
    for (const auto& [name, syntax] : cases) {
        auto chat_template = std::make_shared<llm::ChatTemplate>(golden_template(name));
        server::ChatRenderer render = [chat_template](const json& context) { return chat_template->render(context); };
        INFO(name);
        CHECK(server::detect_tool_syntax(render, TOOLS) == syntax);
        CHECK(server::detect_tool_syntax(render, json::array()) == syntax);  // also without tools (gpt-oss's channels)
    }
}

TEST_CASE("tool grammar: Mistral's markers are matched as their special tokens") {
    MarkerTokenizer tk({"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"}, {"</s>"});
    llm::GrammarVocab vocab(tk);
    llm::GrammarSpec spec = server::tool_call_grammar(TOOLS, true, false, tk, ToolSyntax::MISTRAL_ARGS);
    llm::GrammarMatcher m(spec.grammar, vocab);
    for (int32_t id : tk.encode("[TOOL_CALLS]add[ARGS]{\"a\":1,\"b\":2}", false, true)) REQUIRE(m.accept_token(id));
    CHECK(m.can_end());
    llm::GrammarMatcher text(spec.grammar, vocab);  // the marker spelled as bytes is not the token
    CHECK_FALSE(text.accept_text("[TOOL_CALLS]"));
    CHECK(server::tool_opener_tokens(ToolSyntax::MISTRAL_ARGS, tk) == std::vector<int32_t>{256});
}

TEST_CASE("tool grammar: llama3 auto waits for a call at the reply's start only") {
    fake::ByteTokenizer bytes;
    llm::GrammarSpec spec = server::tool_call_grammar(TOOLS, false, true, bytes, ToolSyntax::LLAMA3_JSON);
    CHECK(spec.trigger_at_start);
    llm::GrammarVocab vocab(bytes);
    auto feed = [&](const std::string& text) {
        llm::GrammarConstraint g(spec, vocab);
        for (int32_t id : bytes.encode(text, false, false)) {
            if (!g.accept(id)) return std::string("rejected");
        }
        return std::string(g.active() ? "active" : "free");
    };
    CHECK(feed("  {\"name\": \"add\"") == "active");
    CHECK(feed("Text, then {\"name\": \"add\"") == "free");     // a JSON example inside an answer stays free
    CHECK(feed("{\"name\": \"nope\"") == "rejected");           // no such function
}

namespace {

// The random-weight model the grammar-only tests run on: its logits are noise.
std::unique_ptr<llm::Session> open_random_qwen2() {
    llm::SessionOptions so;
    so.model_path = test_data::shared("models/random-qwen2-q8_0.gguf");
    so.n_ctx = 4096;
    return llm::open_session(so);
}

// JSON Schema's maxLength counts characters (code points), not bytes
size_t code_points(const std::string& s) {
    return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

bool valid_call(const llm::ToolCall& call) {
    const json args = json::parse(call.arguments, nullptr, false);
    if (!args.is_object()) return false;
    if (call.name == "get_weather")
        return args.size() == 2 && args.contains("city") && args["city"].is_string() && code_points(args["city"].get<std::string>()) <= 8 &&
               args.contains("unit") && (args["unit"] == "C" || args["unit"] == "F");
    if (call.name == "add")
        return args.size() == 2 && args.contains("a") && args["a"].is_number_integer() && args["a"].get<int64_t>() >= 0 &&
               args["a"].get<int64_t>() <= 999 && args.contains("b") && args["b"].is_number_integer();
    return false;
}

struct Reply {
    llm::RoutedText text;
    std::string finish;
};

Reply chat(llm::Session& session, const server::ChatRenderer& render, json body) {
    server::Job job = server::parse_chat_request(body, session, render, "random");
    Reply r;
    server::Outcome o = server::generate_reply(
        session, job, [&](server::Delta&& d) { return r.text.append(std::move(d.text)), true; }, [] { return false; });
    r.finish = o.finish_reason;
    return r;
}

}  // namespace

TEST_CASE("random model: required, named and single calls parse and match their schema in every syntax") {
    REQUIRE_SHARED_DATA();
    auto session = open_random_qwen2();
    for (const char* name : {"meta-llama-Llama-3.2-3B-Instruct.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja",
                             "Mistral-Small-3.2-24B-Instruct-2506.jinja", "openai-gpt-oss-120b.jinja"}) {
        const server::ChatRenderer render = server::model_chat_renderer(*session, golden_template(name));
        for (uint64_t seed : {1, 2}) {
            for (int mode = 0; mode < 3; mode++) {  // required; named "add"; required with parallel_tool_calls false
                json body = {{"messages", json::array({{{"role", "user"}, {"content", "Weather in Paris?"}}})},
                             {"tools", TOOLS}, {"seed", seed}, {"temperature", 1.0}, {"max_tokens", 500}};
                // room for many calls: where parallel calls are allowed, a random model closes the list
                // after each call about as often as it goes on (200 tokens ran out with 4 calls)
                body["tool_choice"] = mode == 1 ? json{{"type", "function"}, {"function", {{"name", "add"}}}} : json("required");
                if (mode == 2) body["parallel_tool_calls"] = false;
                Reply r = chat(*session, render, body);
                INFO(name << " seed " << seed << " mode " << mode << ": content '" << r.text.content << "'");
                CHECK(r.finish == "tool_calls");
                REQUIRE(!r.text.tool_calls.empty());
                if (mode == 2) CHECK(r.text.tool_calls.size() == 1);
                for (const auto& call : r.text.tool_calls) {
                    INFO(call.name << " " << call.arguments);
                    CHECK(valid_call(call));
                    if (mode == 1) CHECK(call.name == "add");
                }
                CHECK(no_markup({r.text.content, r.text.reasoning}));
            }
        }
    }
}

TEST_CASE("random model: tool_choice none yields no call, and auto only well-formed ones") {
    REQUIRE_SHARED_DATA();
    auto session = open_random_qwen2();
    for (const char* name : {"meta-llama-Llama-3.2-3B-Instruct.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja", "openai-gpt-oss-120b.jinja"}) {
        const server::ChatRenderer render = server::model_chat_renderer(*session, golden_template(name));
        for (const char* choice : {"none", "auto"}) {
            json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})}, {"tools", TOOLS},
                         {"tool_choice", choice}, {"seed", 3}, {"temperature", 1.0}, {"max_tokens", 60}};
            Reply r = chat(*session, render, body);
            INFO(name << " " << choice);
            if (std::string(choice) == "none") CHECK(r.text.tool_calls.empty());
            for (const auto& call : r.text.tool_calls) CHECK(valid_call(call));
        }
    }
}

TEST_CASE("tool_choice none: the opener token gets no chance; harmony gets a grammar without recipients") {
    MarkerTokenizer tk({"<|python_tag|>"}, {"<|eot_id|>"});
    CHECK(server::tool_opener_tokens(ToolSyntax::LLAMA3_JSON, tk) == std::vector<int32_t>{256});
    CHECK(server::tool_opener_tokens(ToolSyntax::HARMONY, tk).empty());
    MarkerTokenizer harmony({"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>"}, {"<|return|>", "<|call|>"});
    llm::GrammarSpec spec = server::harmony_no_call_grammar(harmony);
    REQUIRE(spec.grammar);
    llm::GrammarVocab vocab(harmony);
    auto accepts = [&](const std::string& text) {
        llm::GrammarMatcher m(spec.grammar, vocab);
        for (int32_t id : harmony.encode(text, false, true))
            if (!m.accept_token(id)) return false;
        return true;
    };
    CHECK(accepts("<|channel|>analysis<|message|>hmm<|end|><|start|>assistant<|channel|>final<|message|>Hi!"));
    CHECK_FALSE(accepts("<|channel|>commentary to=functions.add"));
    CHECK_FALSE(server::harmony_no_call_grammar(fake::ByteTokenizer{}).grammar);  // markers as text: the router alone
}
