// The APIs beside OpenAI chat, over real HTTP against the scripted model: Anthropic's event sequence
// and errors, OpenAI Responses events, ollama's NDJSON, embeddings, and the llama-server extras
// (timings, return_progress, keep-alive comments during a slow prefill).
#include "live_server.h"

#include "llm/grammar.h"

namespace {

struct Event {
    std::string name;  // "" for a data-only event
    json data;
};

// SSE events with optional "event:" lines; comments (": …") are returned as name ":".
std::vector<Event> named_events(const std::string& body) {
    std::vector<Event> out;
    size_t pos = 0;
    while (pos < body.size()) {
        size_t end = body.find("\n\n", pos);
        REQUIRE(end != std::string::npos);
        std::string block = body.substr(pos, end - pos);
        pos = end + 2;
        if (block.starts_with(":")) {
            out.push_back({":", nullptr});
            continue;
        }
        Event e;
        if (block.starts_with("event: ")) {
            size_t nl = block.find('\n');
            e.name = block.substr(7, nl - 7);
            block = block.substr(nl + 1);
        }
        REQUIRE(block.starts_with("data: "));
        e.data = block.substr(6) == "[DONE]" ? json("[DONE]") : json::parse(block.substr(6));
        out.push_back(std::move(e));
    }
    return out;
}

// Does the grammar the request's job sampled under accept `text` as a whole reply?
bool accepts(const LiveServer& s, const llm::GrammarSpec& spec, const std::string& text) {
    REQUIRE(spec.grammar);
    llm::GrammarVocab vocab(s.session.tokenizer());
    llm::GrammarMatcher m(spec.grammar, vocab);
    return m.accept_text(text) && m.can_end();
}

std::string hermes_call(const std::string& name, const std::string& args) {
    return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>";
}

json anthropic(const std::string& text, bool stream = false) {
    return {{"model", "claude-x"}, {"max_tokens", 200}, {"stream", stream}, {"messages", {{{"role", "user"}, {"content", text}}}}};
}

}  // namespace

TEST_CASE("anthropic: a message with thinking, text and a tool_use block") {
    LiveServer s;
    s.session.reply_text = "<think>Hmm.</think>Let me look.<tool_call>\n{\"name\": \"lookup\", \"arguments\": {\"q\": \"x\"}}\n</tool_call>";
    json body = anthropic("hi");
    body["tools"] = {{{"name", "lookup"}, {"input_schema", {{"type", "object"}}}}};
    json r = s.post_json("/v1/messages", body);
    CHECK(r["type"] == "message");
    CHECK(r["model"] == "claude-x");
    REQUIRE(r["content"].size() == 3);
    CHECK(r["content"][0] == json{{"type", "thinking"}, {"thinking", "Hmm."}, {"signature", ""}});
    CHECK(r["content"][1] == json{{"type", "text"}, {"text", "Let me look."}});
    CHECK(r["content"][2]["type"] == "tool_use");
    CHECK(r["content"][2]["input"] == json{{"q", "x"}});
    CHECK(r["stop_reason"] == "tool_use");
    CHECK(r["usage"]["output_tokens"].get<int>() > 0);
    // The tools reached the template as OpenAI-style function tools.
    CHECK(s.session.calls()[0].prompt_text.find("\"parameters\":{\"type\":\"object\"}") != std::string::npos);
}

TEST_CASE("anthropic: the streaming event sequence") {
    LiveServer s;
    s.session.reply_text = "<think>Hmm.</think>Hello<tool_call>\n{\"name\": \"lookup\", \"arguments\": {}}\n</tool_call>";
    json body = anthropic("hi", true);
    body["tools"] = {{{"name", "lookup"}, {"input_schema", {{"type", "object"}}}}};
    auto res = s.post("/v1/messages", body);
    REQUIRE(res);
    REQUIRE(res->status == 200);
    std::vector<std::string> names;
    std::string thinking, text, input;
    for (const Event& e : named_events(res->body)) {
        names.push_back(e.name);
        CHECK(e.data["type"] == e.name);  // Anthropic repeats the event name in the data
        if (e.name != "content_block_delta") continue;
        const json& d = e.data["delta"];
        if (d["type"] == "thinking_delta") thinking += d["thinking"].get<std::string>();
        if (d["type"] == "text_delta") text += d["text"].get<std::string>();
        if (d["type"] == "input_json_delta") input += d["partial_json"].get<std::string>();
    }
    // Collapse the runs of deltas to read the sequence.
    names.erase(std::unique(names.begin(), names.end()), names.end());
    CHECK(names == std::vector<std::string>{"message_start", "ping",
                                            "content_block_start", "content_block_delta", "content_block_stop",    // thinking
                                            "content_block_start", "content_block_delta", "content_block_stop",    // text
                                            "content_block_start", "content_block_delta", "content_block_stop",    // tool_use
                                            "message_delta", "message_stop"});
    CHECK(thinking == "Hmm.");
    CHECK(text == "Hello");
    CHECK(json::parse(input) == json::object());
    auto events = named_events(res->body);
    CHECK(events[events.size() - 2].data["delta"]["stop_reason"] == "tool_use");
}

TEST_CASE("anthropic: errors have Anthropic's shape") {
    LiveServer s;
    auto res = s.post("/v1/messages", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
    REQUIRE(res);
    CHECK(res->status == 400);
    json e = json::parse(res->body);
    CHECK(e["type"] == "error");
    CHECK(e["error"]["type"] == "invalid_request_error");
    CHECK(e["error"]["message"].get<std::string>().find("max_tokens") != std::string::npos);
    res = s.post("/v1/messages", {{"max_tokens", 5}, {"messages", {{{"role", "user"}, {"content", {{{"type", "image"}}}}}}}});
    REQUIRE(res);
    CHECK(res->status == 400);
    CHECK(json::parse(res->body)["error"]["message"].get<std::string>().find("text only") != std::string::npos);
}

TEST_CASE("anthropic: tool_choice any / tool force a call matching input_schema; auto waits for the opener") {
    LiveServer s;
    s.session.reply_text = hermes_call("lookup", R"({"query":"x"})");
    json body = anthropic("find x");
    body["tools"] = json::parse(R"([{"name":"lookup","input_schema":{"type":"object","properties":{"query":{"type":"string","maxLength":4}},"required":["query"],"additionalProperties":false}},
                                    {"name":"clock","input_schema":{"type":"object","properties":{},"additionalProperties":false}}])");
    body["tool_choice"] = {{"type", "any"}};
    json r = s.post_json("/v1/messages", body);
    CHECK(r["stop_reason"] == "tool_use");
    CHECK(r["content"][0]["input"] == json{{"query", "x"}});
    const llm::GrammarSpec any = s.session.calls().at(0).grammar;  // a copy: calls() returns one
    CHECK_FALSE(any.lazy());
    CHECK(accepts(s, any, hermes_call("lookup", R"({"query":"x"})")));
    CHECK(accepts(s, any, hermes_call("clock", "{}") + "\n" + hermes_call("lookup", R"({"query":"y"})")));  // parallel by default
    CHECK_FALSE(accepts(s, any, hermes_call("lookup", R"({"query":"too long"})")));
    CHECK_FALSE(accepts(s, any, hermes_call("lookup", "{}")));
    CHECK_FALSE(accepts(s, any, "No tools today."));

    body["tool_choice"] = {{"type", "tool"}, {"name", "clock"}, {"disable_parallel_tool_use", true}};
    s.post_json("/v1/messages", body);
    const llm::GrammarSpec named = s.session.calls().at(1).grammar;  // a copy: calls() returns one
    CHECK(accepts(s, named, hermes_call("clock", "{}")));
    CHECK_FALSE(accepts(s, named, hermes_call("lookup", R"({"query":"x"})")));
    CHECK_FALSE(accepts(s, named, hermes_call("clock", "{}") + "\n" + hermes_call("clock", "{}")));

    body["tool_choice"] = {{"type", "auto"}};
    s.post_json("/v1/messages", body);
    CHECK(s.session.calls().at(2).grammar.trigger_words == std::vector<std::string>{"<tool_call>"});
    body["tool_choice"] = {{"type", "none"}};
    s.post_json("/v1/messages", body);
    CHECK(s.session.calls().at(3).grammar.grammar == nullptr);

    body["tool_choice"] = {{"type", "tool"}, {"name", "missing"}};
    CHECK(s.post_json("/v1/messages", body, 400)["error"]["message"].get<std::string>().find("tool_choice") != std::string::npos);
    body["tool_choice"] = {{"type", "any"}, {"disable_parallel_tool_use", "yes"}};
    s.post_json("/v1/messages", body, 400);
    CHECK(s.session.calls().size() == 4);
}

TEST_CASE("anthropic: the billing header line leaves the prompt unchanged") {
    LiveServer s;
    json plain = anthropic("hi"), billed = anthropic("hi");
    plain["system"] = "You help.";
    billed["system"] = {{{"type", "text"}, {"text", "x-anthropic-billing-header: cc_version=1.2.3; cch=abc;"}}, {{"type", "text"}, {"text", "You help."}}};
    s.post_json("/v1/messages", plain);
    s.post_json("/v1/messages", billed);
    const auto calls = s.session.calls();
    REQUIRE(calls.size() == 2);
    CHECK(calls[0].prompt_text == calls[1].prompt_text);
}

TEST_CASE("responses: stream events in order, then response.completed") {
    LiveServer s;
    s.session.reply_text = "Hi there";
    auto res = s.post("/v1/responses", {{"input", "hello"}, {"stream", true}});
    REQUIRE(res);
    REQUIRE(res->status == 200);
    std::vector<std::string> names;
    int sequence = 0;
    std::string text;
    json completed;
    for (const Event& e : named_events(res->body)) {
        CHECK(e.data["sequence_number"] == sequence++);
        if (names.empty() || names.back() != e.name) names.push_back(e.name);
        if (e.name == "response.output_text.delta") text += e.data["delta"].get<std::string>();
        if (e.name == "response.completed") completed = e.data["response"];
    }
    CHECK(names == std::vector<std::string>{"response.created", "response.in_progress", "response.output_item.added",
                                            "response.content_part.added", "response.output_text.delta", "response.output_text.done",
                                            "response.content_part.done", "response.output_item.done", "response.completed"});
    CHECK(text == "Hi there");
    CHECK(completed["output"][0]["content"][0]["text"] == "Hi there");
    CHECK(completed["usage"]["output_tokens"].get<int>() > 0);
}

TEST_CASE("responses: previous_response_id is a clear 400") {
    LiveServer s;
    json r = s.post_json("/v1/responses", {{"input", "hi"}, {"previous_response_id", "resp_1"}}, 400);
    CHECK(r["error"]["param"] == "previous_response_id");
}

TEST_CASE("responses: text.format json_schema / json_object constrain the reply; bad schemas name text.format") {
    LiveServer s;
    const json schema = json::parse(R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false})");
    s.session.reply_text = R"({"n":3})";
    json body = {{"input", "hi"}, {"text", {{"format", {{"type", "json_schema"}, {"name", "p"}, {"schema", schema}, {"strict", true}}}}}};
    json r = s.post_json("/v1/responses", body);
    CHECK(r["output"][0]["content"][0]["text"] == R"({"n":3})");
    CHECK(r["text"]["format"]["type"] == "json_schema");  // echoed as sent
    const llm::GrammarSpec g = s.session.calls().at(0).grammar;  // a copy: calls() returns one
    CHECK_FALSE(g.lazy());
    CHECK(accepts(s, g, R"({"n":3})"));
    CHECK_FALSE(accepts(s, g, R"({"n":"3"})"));
    CHECK_FALSE(accepts(s, g, "hello"));

    body["text"] = {{"format", {{"type", "json_object"}}}};
    s.post_json("/v1/responses", body);
    CHECK(accepts(s, s.session.calls().at(1).grammar, R"({"a":[1,true]})"));
    CHECK_FALSE(accepts(s, s.session.calls().at(1).grammar, "[1]"));

    body["text"] = {{"format", {{"type", "text"}}}};
    s.post_json("/v1/responses", body);
    CHECK(s.session.calls().at(2).grammar.grammar == nullptr);

    body["text"] = {{"format", {{"type", "json_schema"}, {"name", "p"}, {"schema", {{"type", "string"}, {"contentEncoding", "base64"}}}}}};
    r = s.post_json("/v1/responses", body, 400);
    CHECK(r["error"]["param"] == "text.format.schema");
    CHECK(r["error"]["message"].get<std::string>().find("'contentEncoding'") != std::string::npos);
    body["text"] = {{"format", {{"type", "xml"}}}};
    CHECK(s.post_json("/v1/responses", body, 400)["error"]["param"] == "text.format");
    body["text"] = {{"format", {{"type", "json_schema"}, {"name", "p"}}}};
    CHECK(s.post_json("/v1/responses", body, 400)["error"]["param"] == "text.format.schema");
    CHECK(s.session.calls().size() == 3);  // refused before any generation
}

TEST_CASE("responses: tool_choice required / named force a call matching the parameters") {
    LiveServer s;
    s.session.reply_text = hermes_call("add", R"({"a":1})");
    json body = {{"input", "add"}, {"tool_choice", "required"}, {"parallel_tool_calls", false},
                 {"tools", json::parse(R"([{"type":"function","name":"add","parameters":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}},
                                           {"type":"function","name":"noop","parameters":{"type":"object","properties":{},"additionalProperties":false}}])")}};
    json r = s.post_json("/v1/responses", body);
    CHECK(r["output"][0]["type"] == "function_call");
    CHECK(r["output"][0]["name"] == "add");
    CHECK(r["parallel_tool_calls"] == false);
    const llm::GrammarSpec g = s.session.calls().at(0).grammar;  // a copy: calls() returns one
    CHECK_FALSE(g.lazy());
    CHECK(accepts(s, g, hermes_call("add", R"({"a":1})")));
    CHECK(accepts(s, g, hermes_call("noop", "{}")));
    CHECK_FALSE(accepts(s, g, hermes_call("add", R"({"a":1})") + "\n" + hermes_call("noop", "{}")));  // one call only
    CHECK_FALSE(accepts(s, g, hermes_call("add", R"({"a":"x"})")));
    CHECK_FALSE(accepts(s, g, "I will not call a tool."));

    body["tool_choice"] = {{"type", "function"}, {"name", "noop"}};
    s.post_json("/v1/responses", body);
    CHECK(accepts(s, s.session.calls().at(1).grammar, hermes_call("noop", "{}")));
    CHECK_FALSE(accepts(s, s.session.calls().at(1).grammar, hermes_call("add", R"({"a":1})")));
}

TEST_CASE("ollama: /api/chat streams NDJSON by default and ends with counts and durations") {
    LiveServer s;
    s.session.reply_text = "Hi!";
    auto res = s.post("/api/chat", {{"model", "m"}, {"messages", {{{"role", "user"}, {"content", "hello"}}}}, {"options", {{"num_predict", 10}, {"top_k", 7}}}});
    REQUIRE(res);
    REQUIRE(res->status == 200);
    CHECK(res->get_header_value("Content-Type").starts_with("application/x-ndjson"));
    std::vector<json> lines;
    for (size_t pos = 0; pos < res->body.size();) {
        size_t nl = res->body.find('\n', pos);
        REQUIRE(nl != std::string::npos);
        lines.push_back(json::parse(res->body.substr(pos, nl - pos)));
        pos = nl + 1;
    }
    REQUIRE(lines.size() >= 2);
    std::string text;
    for (size_t i = 0; i + 1 < lines.size(); i++) {
        CHECK(lines[i]["done"] == false);
        text += lines[i]["message"]["content"].get<std::string>();
    }
    CHECK(text == "Hi!");
    const json& last = lines.back();
    CHECK(last["done"] == true);
    CHECK(last["done_reason"] == "stop");
    CHECK(last["eval_count"] == 4);  // "Hi!" and the end token
    CHECK(last["prompt_eval_count"].get<int>() > 0);
    CHECK(last["total_duration"].get<int64_t>() >= last["eval_duration"].get<int64_t>());
    CHECK(s.session.calls()[0].sampling.top_k == 7);
    CHECK(s.session.calls()[0].max_tokens == 10);
}

TEST_CASE("ollama: errors are {\"error\": message}; generate without a prompt only loads") {
    LiveServer s;
    json r = s.post_json("/api/chat", {{"messages", "nope"}}, 400);
    CHECK(r["error"].is_string());
    r = s.post_json("/api/generate", {{"model", "m"}}, 200);
    CHECK(r["done_reason"] == "load");
    CHECK(s.session.calls().empty());
}

TEST_CASE("ollama: format \"json\" or a schema constrains chat and generate; tools follow auto") {
    LiveServer s;
    s.session.reply_text = R"({"ok":true})";
    const json messages = {{{"role", "user"}, {"content", "x"}}};
    json r = s.post_json("/api/chat", {{"messages", messages}, {"format", "json"}, {"stream", false}});
    CHECK(r["message"]["content"] == R"({"ok":true})");
    CHECK(accepts(s, s.session.calls().at(0).grammar, R"({"ok":true})"));
    CHECK_FALSE(accepts(s, s.session.calls().at(0).grammar, "ok"));

    const json schema = json::parse(R"({"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false})");
    s.post_json("/api/generate", {{"prompt", "x"}, {"format", schema}, {"stream", false}});
    s.post_json("/api/generate", {{"prompt", "x"}, {"raw", true}, {"format", schema}, {"stream", false}});
    for (int i : {1, 2}) {
        CHECK(accepts(s, s.session.calls().at(i).grammar, R"({"ok":false})"));
        CHECK_FALSE(accepts(s, s.session.calls().at(i).grammar, R"({"ok":1})"));
    }

    s.post_json("/api/chat", {{"messages", messages}, {"stream", false},
                              {"tools", json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}])")}});
    CHECK(s.session.calls().at(3).grammar.trigger_words == std::vector<std::string>{"<tool_call>"});  // lazy: auto

    r = s.post_json("/api/chat", {{"messages", messages}, {"format", 42}, {"stream", false}}, 400);
    CHECK(r["error"].get<std::string>().find("'format'") != std::string::npos);
    r = s.post_json("/api/chat", {{"messages", messages}, {"format", {{"type", "object"}, {"patternProperties", json::object()}}}, {"stream", false}}, 400);
    CHECK(r["error"].get<std::string>().find("'patternProperties'") != std::string::npos);
    CHECK(s.session.calls().size() == 4);
}

TEST_CASE("embeddings: float and base64 agree, dimensions renormalize, usage counts tokens") {
    LiveServer s;
    json f = s.post_json("/v1/embeddings", {{"input", {"ab", "ba"}}, {"encoding_format", "float"}});
    REQUIRE(f["data"].size() == 2);
    const auto a = f["data"][0]["embedding"].get<std::vector<float>>();
    CHECK(a.size() == 16);
    CHECK(f["usage"]["prompt_tokens"] == 6);  // BOS + 2 bytes, twice
    json b = s.post_json("/v1/embeddings", {{"input", "ab"}, {"encoding_format", "base64"}});
    const std::string b64 = b["data"][0]["embedding"];
    CHECK(b64.size() == 88);  // 16 floats = 64 bytes → 22 groups of 4, the last padded
    CHECK(b64.ends_with("=="));
    json d = s.post_json("/v1/embeddings", {{"input", "ab"}, {"dimensions", 4}});
    double norm = 0;
    for (float x : d["data"][0]["embedding"].get<std::vector<float>>()) norm += x * x;
    CHECK(std::abs(norm - 1.0) < 1e-5);
    s.post_json("/v1/embeddings", {{"input", "ab"}, {"dimensions", 17}}, 400);
    s.post_json("/v1/embeddings", {{"input", json::array()}}, 400);
    json o = s.post_json("/api/embed", {{"input", "ab"}});
    CHECK(o["embeddings"][0].get<std::vector<float>>() == a);
}

TEST_CASE("timings in chat completions and in the last stream chunk") {
    LiveServer s;
    json r = s.post_json("/v1/chat/completions", chat("hi"));
    CHECK(r["timings"]["predicted_n"] == r["usage"]["completion_tokens"]);
    CHECK(r["timings"]["prompt_n"].get<int>() + r["timings"]["cache_n"].get<int>() == r["usage"]["prompt_tokens"].get<int>());
    json body = chat("hi");
    body["stream"] = true;
    auto res = s.post("/v1/chat/completions", body);
    REQUIRE(res);
    auto chunks = sse_chunks(res->body);
    CHECK(chunks.back()["timings"]["predicted_n"].get<int>() > 0);
    CHECK(!chunks.front().contains("timings"));
}

TEST_CASE("return_progress chunks while the prompt is prefilled") {
    LiveServer s;
    s.session.prefill_delay_ms = 20;
    json body = chat("hello there");
    body["stream"] = true;
    body["return_progress"] = true;
    auto res = s.post("/v1/chat/completions", body);
    REQUIRE(res);
    std::vector<json> progress;
    for (const Event& e : named_events(res->body))
        if (e.data.is_object() && e.data.contains("prompt_progress")) progress.push_back(e.data["prompt_progress"]);
    REQUIRE(progress.size() == 3);
    CHECK(progress[0]["processed"].get<int>() < progress[1]["processed"].get<int>());
    CHECK(progress.back()["processed"] == progress.back()["total"]);
    body.erase("return_progress");
    res = s.post("/v1/chat/completions", body);
    REQUIRE(res);
    CHECK(res->body.find("prompt_progress") == std::string::npos);
}

TEST_CASE("keep-alive comments while a slow prefill leaves the stream silent") {
    server::ServerOptions o;
    o.keep_alive_ms = 30;
    LiveServer s(o);
    s.session.prefill_delay_ms = 80;
    json body = chat("hello there");
    body["stream"] = true;
    auto count_comments = [&] {
        auto res = s.post("/v1/chat/completions", body);
        REQUIRE(res);
        int n = 0;
        for (const Event& e : named_events(res->body)) n += e.name == ":";
        return n;
    };
    CHECK(count_comments() == 2);  // progress at 0, 80 and 160 ms: silent for 30 ms at the last two
    s.session.prefill_delay_ms = 0;
    CHECK(count_comments() == 0);
}
