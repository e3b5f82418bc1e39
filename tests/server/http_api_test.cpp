// The OpenAI-compatible API over real HTTP on an ephemeral port, against the scripted model: response
// shapes, SSE invariants, usage, finish reasons, stop strings, reasoning, tool calls, logprobs.
#include "live_server.h"

#include "llm/reply_stream.h"

TEST_CASE("http: /health is 200 when a model is attached and 503 while loading") {
    LiveServer ready;
    auto res = ready.client->Get("/health");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(json::parse(res->body)["status"] == "ok");

    LiveServer loading({}, 512, /*attach=*/false);
    res = loading.client->Get("/health");
    REQUIRE(res);
    CHECK(res->status == 503);
    res = loading.post("/v1/chat/completions", chat("hi"));
    REQUIRE(res);
    CHECK(res->status == 503);
    CHECK(json::parse(res->body)["error"]["code"] == "model_loading");
}

TEST_CASE("http: /v1/models lists the model") {
    LiveServer s;
    auto res = s.client->Get("/v1/models");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    json j = json::parse(res->body);
    CHECK(j["object"] == "list");
    CHECK(j["data"][0]["id"] == "fake-model");
    CHECK(j["data"][0]["object"] == "model");
}

TEST_CASE("http: chat completion returns the reply, usage and finish_reason stop") {
    LiveServer s;
    s.session.reply_text = "Hi! How can I help?";
    json r = s.post_json("/v1/chat/completions", {{"model", "my-alias"}, {"messages", {{{"role", "user"}, {"content", "hello"}}}}});
    CHECK(r["object"] == "chat.completion");
    CHECK(r["id"].get<std::string>().starts_with("chatcmpl-"));
    CHECK(r["model"] == "my-alias");
    CHECK(r["choices"][0]["message"]["role"] == "assistant");
    CHECK(r["choices"][0]["message"]["content"] == "Hi! How can I help?");
    CHECK(r["choices"][0]["finish_reason"] == "stop");
    const auto calls = s.session.calls();
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].prompt_text == "<s><|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
    CHECK(r["usage"]["prompt_tokens"] == calls[0].prompt.size());
    CHECK(r["usage"]["completion_tokens"] == std::string("Hi! How can I help?").size() + 1);  // + end token
    CHECK(r["usage"]["total_tokens"] == r["usage"]["prompt_tokens"].get<int>() + r["usage"]["completion_tokens"].get<int>());
}

TEST_CASE("http: content given as a list of text parts is joined") {
    LiveServer s;
    json body = {{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}};
    s.post_json("/v1/chat/completions", body);
    CHECK(s.session.calls()[0].prompt_text.find("user\nab<|im_end|>") != std::string::npos);
}

TEST_CASE("http: streamed chat follows OpenAI's SSE shape") {
    LiveServer s;
    s.session.reply_text = "Grüße, 世界 🌍!";
    json body = chat("hi");
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    auto res = s.post("/v1/chat/completions", body);
    REQUIRE(res);
    REQUIRE(res->status == 200);
    CHECK(res->get_header_value("Content-Type").starts_with("text/event-stream"));
    auto chunks = sse_chunks(res->body);
    REQUIRE(chunks.size() >= 4);
    CHECK(chunks.front()["choices"][0]["delta"]["role"] == "assistant");
    std::string content;
    for (size_t i = 0; i < chunks.size(); i++) {
        const json& c = chunks[i];
        CHECK(c["id"] == chunks[0]["id"]);
        CHECK(c["created"] == chunks[0]["created"]);
        CHECK(c["object"] == "chat.completion.chunk");
        if (c["choices"].empty()) continue;
        const json& delta = c["choices"][0]["delta"];
        if (delta.contains("content")) {
            std::string piece = delta["content"];
            CHECK(llm::incomplete_utf8_suffix(piece) == 0);
            content += piece;
        }
    }
    CHECK(content == "Grüße, 世界 🌍!");
    const json& last = chunks[chunks.size() - 2];  // then the usage chunk
    CHECK(last["choices"][0]["delta"] == json::object());
    CHECK(last["choices"][0]["finish_reason"] == "stop");
    const json& usage = chunks.back();
    CHECK(usage["choices"] == json::array());
    CHECK(usage["usage"]["completion_tokens"] == std::string("Grüße, 世界 🌍!").size() + 1);
    for (size_t i = 0; i + 2 < chunks.size(); i++) CHECK(chunks[i]["choices"][0]["finish_reason"].is_null());
}

TEST_CASE("http: max_tokens ends the reply with finish_reason length") {
    LiveServer s;
    s.session.reply_text = "one two three four five";
    json body = chat("count");
    body["max_tokens"] = 7;
    json r = s.post_json("/v1/chat/completions", body);
    CHECK(r["choices"][0]["message"]["content"] == "one two");
    CHECK(r["choices"][0]["finish_reason"] == "length");
    CHECK(r["usage"]["completion_tokens"] == 7);
    CHECK(s.session.calls()[0].max_tokens == 7);
}

TEST_CASE("http: stop strings split across tokens end the reply and never leak") {
    LiveServer s;
    s.session.reply_text = "alpha beta<END>gamma";
    json body = chat("go");
    body["stop"] = json::array({"<END>", "zzz"});
    json r = s.post_json("/v1/chat/completions", body);
    CHECK(r["choices"][0]["message"]["content"] == "alpha beta");
    CHECK(r["choices"][0]["finish_reason"] == "stop");

    body["stream"] = true;
    auto res = s.post("/v1/chat/completions", body);
    REQUIRE(res);
    std::string content;
    for (const json& c : sse_chunks(res->body))
        if (!c["choices"].empty() && c["choices"][0]["delta"].contains("content")) content += c["choices"][0]["delta"]["content"];
    CHECK(content == "alpha beta");
    CHECK(res->body.find("<EN") == std::string::npos);
}

TEST_CASE("http: sampling fields reach the generator") {
    LiveServer s;
    json body = chat("x");
    body.update({{"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 7}, {"min_p", 0.1}, {"seed", 1234},
                 {"presence_penalty", 0.25}, {"frequency_penalty", -0.5}, {"logit_bias", {{"65", -100}}},
                 {"max_completion_tokens", 9}});
    s.post_json("/v1/chat/completions", body);
    const auto call = s.session.calls().at(0);
    CHECK(call.sampling.temperature == Approx(0.5));
    CHECK(call.sampling.top_p == Approx(0.9));
    CHECK(call.sampling.top_k == 7);
    CHECK(call.sampling.min_p == Approx(0.1));
    CHECK(call.sampling.seed == 1234);
    CHECK(call.sampling.presence_penalty == Approx(0.25));
    CHECK(call.sampling.frequency_penalty == Approx(-0.5));
    CHECK(call.sampling.logit_bias.at(65) == Approx(-100));
    CHECK(call.max_tokens == 9);
}

TEST_CASE("http: reasoning after a prompt that opens <think> comes as reasoning_content") {
    LiveServer s;
    s.session.reply_text = "The user greets.</think>\n\nHello!";
    json body = chat("hi");
    body["chat_template_kwargs"] = {{"enable_thinking", true}};
    json r = s.post_json("/v1/chat/completions", body);
    CHECK(r["choices"][0]["message"]["reasoning_content"] == "The user greets.");
    CHECK(r["choices"][0]["message"]["content"] == "Hello!");

    body["stream"] = true;
    auto res = s.post("/v1/chat/completions", body);
    REQUIRE(res);
    std::string reasoning, content;
    for (const json& c : sse_chunks(res->body)) {
        if (c["choices"].empty()) continue;
        const json& d = c["choices"][0]["delta"];
        if (d.contains("reasoning_content")) reasoning += d["reasoning_content"];
        if (d.contains("content")) content += d["content"];
    }
    CHECK(reasoning == "The user greets.");
    CHECK(content == "Hello!");
    CHECK(res->body.find("think>") == std::string::npos);
}

TEST_CASE("http: tool calls come back as OpenAI tool_calls, streamed as deltas") {
    LiveServer s;
    s.session.reply_text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
    json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
        "properties":{"city":{"type":"string"}}}}}])");
    json body = chat("weather in Paris?");
    body["tools"] = tools;
    json r = s.post_json("/v1/chat/completions", body);
    const json& message = r["choices"][0]["message"];
    CHECK(r["choices"][0]["finish_reason"] == "tool_calls");
    CHECK(message["content"].is_null());
    REQUIRE(message["tool_calls"].size() == 1);
    CHECK(message["tool_calls"][0]["id"].get<std::string>().starts_with("call_"));
    CHECK(message["tool_calls"][0]["type"] == "function");
    CHECK(message["tool_calls"][0]["function"]["name"] == "get_weather");
    CHECK(json::parse(message["tool_calls"][0]["function"]["arguments"].get<std::string>()) == json{{"city", "Paris"}});
    CHECK(s.session.calls()[0].prompt_text.find("get_weather") != std::string::npos);  // the template saw the tools

    body["stream"] = true;
    auto res = s.post("/v1/chat/completions", body);
    REQUIRE(res);
    std::vector<json> deltas;
    std::string finish;
    for (const json& c : sse_chunks(res->body)) {
        if (c["choices"].empty()) continue;
        if (c["choices"][0]["delta"].contains("tool_calls")) deltas.push_back(c["choices"][0]["delta"]["tool_calls"][0]);
        if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
    }
    REQUIRE(deltas.size() >= 2);
    CHECK(deltas[0]["index"] == 0);
    CHECK(deltas[0]["id"].get<std::string>().starts_with("call_"));
    CHECK(deltas[0]["type"] == "function");
    CHECK(deltas[0]["function"]["name"] == "get_weather");
    std::string arguments;
    for (const json& d : deltas) {
        CHECK(d["index"] == 0);
        arguments += d["function"]["arguments"].get<std::string>();
    }
    CHECK(json::parse(arguments) == json{{"city", "Paris"}});
    CHECK(finish == "tool_calls");
}

TEST_CASE("http: an unparsable tool call is returned as content") {
    LiveServer s;
    s.session.reply_text = "<tool_call>\nget_weather(Paris)\n</tool_call>";
    json body = chat("weather?");
    body["tools"] = json::parse(R"([{"type":"function","function":{"name":"get_weather"}}])");
    json r = s.post_json("/v1/chat/completions", body);
    CHECK(r["choices"][0]["message"]["content"] == "<tool_call>\nget_weather(Paris)\n</tool_call>");
    CHECK(r["choices"][0]["finish_reason"] == "stop");
}

TEST_CASE("http: tool calls and tool results in the history reach the template") {
    LiveServer s;
    json body = {{"messages", json::parse(R"([
        {"role":"user","content":"weather?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
            "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
        {"role":"tool","tool_call_id":"call_1","content":"18 C and sunny"}])")}};
    s.post_json("/v1/chat/completions", body);
    const std::string prompt = s.session.calls().at(0).prompt_text;
    INFO(prompt);
    CHECK(prompt.find(R"("arguments":{"city":"Paris"})") != std::string::npos);  // arguments as an object
    CHECK(prompt.find(R"("name":"get_weather")") != std::string::npos);
    CHECK(prompt.find("<|im_start|>tool\n18 C and sunny<|im_end|>") != std::string::npos);
}

TEST_CASE("http: tool_choice required constrains the reply to a call; auto waits for the opener") {
    LiveServer s;
    s.session.reply_text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    json body = chat("do it");
    body["tools"] = json::parse(R"([{"type":"function","function":{"name":"f"}}])");
    body["tool_choice"] = "required";
    json r = s.post_json("/v1/chat/completions", body);
    CHECK(s.session.calls()[0].grammar.grammar != nullptr);
    CHECK_FALSE(s.session.calls()[0].grammar.lazy());
    CHECK(r["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "f");

    body["tool_choice"] = "auto";
    s.post_json("/v1/chat/completions", body);
    CHECK(s.session.calls()[1].grammar.trigger_words == std::vector<std::string>{"<tool_call>"});

    body["tool_choice"] = "none";
    s.session.reply_text = "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
    r = s.post_json("/v1/chat/completions", body);
    CHECK(r["choices"][0]["message"]["content"] == "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
    CHECK(s.session.calls()[2].prompt_text.find("# Tools") == std::string::npos);
    CHECK(s.session.calls()[2].grammar.grammar == nullptr);
}

TEST_CASE("http: bad grammars and schemas are a 400 naming the rule or keyword") {
    LiveServer s;
    json body = chat("x");
    body["grammar"] = "root ::= item\n";
    json r = s.post_json("/v1/chat/completions", body, 400);
    CHECK(r["error"]["message"].get<std::string>().find("undefined rule 'item'") != std::string::npos);
    CHECK(r["error"]["param"] == "grammar");
    body.erase("grammar");
    body["response_format"] = json::parse(R"({"type": "json_schema", "json_schema": {"name": "x",
        "schema": {"type": "string", "contentEncoding": "base64"}}})");
    r = s.post_json("/v1/chat/completions", body, 400);
    CHECK(r["error"]["message"].get<std::string>().find("'contentEncoding'") != std::string::npos);
    body["response_format"] = {{"type", "json_object"}};
    body["json_schema"] = json::parse(R"({"type": "string"})");
    r = s.post_json("/v1/chat/completions", body, 400);
    CHECK(r["error"]["message"].get<std::string>().find("only one of") != std::string::npos);
    CHECK(s.session.calls().empty());  // refused before any generation
}

TEST_CASE("http: logprobs and top_logprobs for every generated token") {
    LiveServer s;
    s.session.reply_text = "abc";
    json body = chat("x");
    body["logprobs"] = true;
    body["top_logprobs"] = 2;
    json r = s.post_json("/v1/chat/completions", body);
    const json& content = r["choices"][0]["logprobs"]["content"];
    REQUIRE(content.size() == 3);
    CHECK(content[0]["token"] == "a");
    CHECK(content[0]["logprob"] == Approx(-0.25));
    CHECK(content[0]["bytes"] == json::array({97}));
    CHECK(content[2]["top_logprobs"].size() == 2);
    CHECK(s.session.calls()[0].n_top_logprobs == 2);
}

TEST_CASE("http: a follow-up that extends the conversation reports cached prompt tokens") {
    LiveServer s;
    s.session.reply_text = "Fine.<|im_end|>";  // ends like a ChatML model: the end token is in the history too
    json first = chat("How are you?");
    json r1 = s.post_json("/v1/chat/completions", first);
    CHECK(r1["usage"]["prompt_tokens_details"]["cached_tokens"] == 0);
    json second = first;
    second["messages"].push_back({{"role", "assistant"}, {"content", "Fine."}});
    second["messages"].push_back({{"role", "user"}, {"content", "Good."}});
    json r2 = s.post_json("/v1/chat/completions", second);
    // Everything up to the first reply's end is shared: the first prompt plus "Fine." plus <|im_end|>.
    CHECK(r2["usage"]["prompt_tokens_details"]["cached_tokens"] == r1["usage"]["prompt_tokens"].get<int>() + 6);
}

TEST_CASE("http: /v1/completions with a string or token ids, whole or streamed") {
    LiveServer s;
    s.session.reply_text = " there was a cat.";
    json r = s.post_json("/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 50}});
    CHECK(r["object"] == "text_completion");
    CHECK(r["id"].get<std::string>().starts_with("cmpl-"));
    CHECK(r["choices"][0]["text"] == " there was a cat.");
    CHECK(r["choices"][0]["finish_reason"] == "stop");
    CHECK(s.session.calls()[0].prompt_text == "<s>Once upon a time");

    s.post_json("/v1/completions", {{"prompt", {1, 3 + 'O', 3 + 'k'}}});
    CHECK(s.session.calls()[1].prompt_text == "<s>Ok");

    auto res = s.post("/v1/completions", {{"prompt", "Once"}, {"stream", true}, {"logprobs", 1}});
    REQUIRE(res);
    std::string text;
    auto chunks = sse_chunks(res->body);
    for (const json& c : chunks) {
        CHECK(c["object"] == "text_completion");
        text += c["choices"][0]["text"].get<std::string>();
    }
    CHECK(text == " there was a cat.");
    CHECK(chunks.back()["choices"][0]["finish_reason"] == "stop");
    CHECK(chunks.front()["choices"][0]["logprobs"]["tokens"][0] == " ");
}

TEST_CASE("http: /tokenize and /detokenize round-trip") {
    LiveServer s;
    json t = s.post_json("/tokenize", {{"content", "hé<|im_end|>"}});
    CHECK(t["tokens"] == json::array({3 + 'h', 3 + 0xC3, 3 + 0xA9, 260}));
    json pieces = s.post_json("/tokenize", {{"content", "a"}, {"add_special", true}, {"with_pieces", true}});
    CHECK(pieces["tokens"][1] == json{{"id", 3 + 'a'}, {"piece", "a"}});
    json d = s.post_json("/detokenize", {{"tokens", {3 + 'o', 3 + 'k'}}});
    CHECK(d["content"] == "ok");
    s.post_json("/detokenize", {{"tokens", {99999}}}, 400);
}

TEST_CASE("http: /metrics counts requests and tokens in Prometheus text") {
    LiveServer s;
    s.session.reply_text = "abcd";
    s.post_json("/v1/chat/completions", chat("x"));
    auto res = s.client->Get("/metrics");
    REQUIRE(res);
    REQUIRE(res->status == 200);
    CHECK(res->body.find("# TYPE tinyllm_requests_total counter\ntinyllm_requests_total 1\n") != std::string::npos);
    CHECK(res->body.find("tinyllm_generated_tokens_total 5\n") != std::string::npos);
    CHECK(res->body.find("tinyllm_queue_depth 0\n") != std::string::npos);
    CHECK(res->body.find("tinyllm_prompt_tokens_total ") != std::string::npos);
    CHECK(res->body.find("tinyllm_generated_tokens_per_second ") != std::string::npos);
}

TEST_CASE("http: / serves the web UI page") {
    LiveServer s;
    auto res = s.client->Get("/");
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(res->get_header_value("Content-Type").starts_with("text/html"));
    CHECK(res->body.find("<title>tinyllm") != std::string::npos);
}
