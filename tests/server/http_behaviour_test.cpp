// How the server behaves under bad input and bad luck: OpenAI-shaped errors with the right statuses,
// context overflow, clients that hang up, a full queue, API keys and CORS.
#include "live_server.h"

#include <chrono>
#include <future>
#include <random>
#include <thread>

namespace {

void check_error(const httplib::Result& res, int status, const std::string& type, const json& code = nullptr) {
    REQUIRE(res);
    INFO(res->body);
    CHECK(res->status == status);
    json j = json::parse(res->body);
    REQUIRE(j.contains("error"));
    CHECK(j["error"]["type"] == type);
    CHECK(j["error"]["message"].get<std::string>().starts_with("[server] "));
    CHECK(j["error"].contains("param"));
    CHECK(j["error"]["code"] == code);
}

void wait_until_idle(const fake::ScriptedSession& session) {
    for (int i = 0; i < 200 && session.generating(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE_FALSE(session.generating());
}

}  // namespace

TEST_CASE("http: malformed bodies get 400 and the server keeps answering") {
    LiveServer s;
    const std::vector<std::string> bad_bodies = {
        "", "{", "not json", "[1,2]", "{\"messages\": []}", "{\"messages\": \"hi\"}", "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"temperature\": \"hot\"}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"temperature\": 1e308}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 0}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"max_tokens\": 1.5}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"seed\": 18446744073709551615}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_k\": 1e300}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stop\": 3}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logit_bias\": {\"abc\": 1}}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logit_bias\": {\"99999\": 1}}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 3}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [{\"type\": \"function\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"sometimes\"}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"stream\": \"yes\"}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"chat_template_kwargs\": []}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"\\ud800\"}]}",
    };
    for (const auto& body : bad_bodies) {
        INFO(body);
        check_error(s.client->Post("/v1/chat/completions", body, "application/json"), 400, "invalid_request_error");
    }
    check_error(s.client->Post("/v1/completions", "{\"prompt\": {}}", "application/json"), 400, "invalid_request_error");
    check_error(s.client->Post("/v1/completions", "{\"prompt\": [1, -4]}", "application/json"), 400, "invalid_request_error");
    check_error(s.client->Post("/v1/completions", "{}", "application/json"), 400, "invalid_request_error");
    check_error(s.client->Post("/tokenize", "{\"content\": 1}", "application/json"), 400, "invalid_request_error");
    CHECK(s.session.calls().empty());

    auto health = s.client->Get("/health");
    REQUIRE(health);
    CHECK(health->status == 200);
    s.post_json("/v1/chat/completions", chat("still there?"));
}

TEST_CASE("http: n choices on a one-at-a-time model run one after the other, each with its own seed; n > 16 is a 400") {
    LiveServer s;
    s.session.reply_text = "Hello.";
    json body = chat("x");
    body["n"] = 3, body["seed"] = 9, body["temperature"] = 0.5;
    json r = s.post_json("/v1/chat/completions", body);
    REQUIRE(r["choices"].size() == 3);
    for (int i = 0; i < 3; i++) {
        CHECK(r["choices"][i]["index"] == i);
        CHECK(r["choices"][i]["message"]["content"] == "Hello.");
    }
    REQUIRE(s.session.calls().size() == 3);
    for (int i = 0; i < 3; i++) CHECK(s.session.calls()[size_t(i)].sampling.seed == uint64_t(9 + i));
    body["n"] = 17;
    auto res = s.post("/v1/chat/completions", body);
    check_error(res, 400, "invalid_request_error");
    CHECK(json::parse(res->body)["error"]["param"] == "n");
}

TEST_CASE("http: a prompt longer than the context is 400 context_length_exceeded") {
    LiveServer s({}, /*n_ctx=*/64);
    auto res = s.post("/v1/chat/completions", chat(std::string(100, 'x')));
    check_error(res, 400, "invalid_request_error", "context_length_exceeded");
    CHECK(json::parse(res->body)["error"]["param"] == "messages");
    json body = chat(std::string(100, 'x'));
    body["stream"] = true;
    check_error(s.post("/v1/chat/completions", body), 400, "invalid_request_error", "context_length_exceeded");
    check_error(s.post("/v1/completions", {{"prompt", std::string(64, 'y')}}), 400, "invalid_request_error", "context_length_exceeded");
    CHECK(s.session.calls().empty());
    s.post_json("/v1/chat/completions", chat("short"));
}

TEST_CASE("http: a reply stops when the context fills up, with finish_reason length") {
    LiveServer s({}, /*n_ctx=*/40);
    s.session.reply_text = std::string(100, 'z');
    json r = s.post_json("/v1/chat/completions", chat("hi"));
    CHECK(r["choices"][0]["finish_reason"] == "length");
    CHECK(r["usage"]["total_tokens"] == 40);
}

TEST_CASE("http: an error after streaming began is sent as an error event") {
    LiveServer s;
    s.session.reply_text = "abcdefgh";
    s.session.fail_after_tokens = 3;
    json body = chat("x");
    body["stream"] = true;
    auto res = s.post("/v1/chat/completions", body);
    REQUIRE(res);
    CHECK(res->status == 200);
    auto events = sse_events(res->body);
    REQUIRE(events.size() >= 2);
    json last = json::parse(events.back());
    CHECK(last["error"]["type"] == "server_error");
    CHECK(last["error"]["message"].get<std::string>().find("the device fell over") != std::string::npos);
    s.session.fail_after_tokens = -1;
    s.post_json("/v1/chat/completions", chat("again"));
}

TEST_CASE("http: unknown routes are 404 in OpenAI's shape") {
    LiveServer s;
    check_error(s.client->Get("/v1/nothing"), 404, "not_found_error");
    check_error(s.client->Post("/v1/audio/speech", "{}", "application/json"), 404, "not_found_error");
}

TEST_CASE("http: a client that hangs up mid-stream stops its generation within a token and frees the slot") {
    LiveServer s;
    s.session.reply_text = std::string(400, 'w');
    s.session.token_delay_ms = 10;
    json body = chat("long story");
    body["stream"] = true;
    RawClient raw(s.server.port());
    raw.send_post("/v1/chat/completions", body.dump());
    std::string got = raw.read_until("data: ", 5);
    REQUIRE(got.find("HTTP/1.1 200") == 0);
    raw.hang_up();
    auto hung_up = std::chrono::steady_clock::now();
    wait_until_idle(s.session);
    CHECK(s.session.tokens_after(hung_up) <= 1);

    s.session.reply_text = "next";
    s.session.token_delay_ms = 0;
    json r = s.post_json("/v1/chat/completions", chat("are you free?"));
    CHECK(r["choices"][0]["message"]["content"] == "next");
}

TEST_CASE("http: a non-streaming client that hangs up stops its generation too") {
    LiveServer s;
    s.session.reply_text = std::string(400, 'w');
    s.session.token_delay_ms = 10;
    RawClient raw(s.server.port());
    raw.send_post("/v1/chat/completions", chat("long story").dump());
    for (int i = 0; i < 100 && !s.session.generating(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    raw.hang_up();
    auto hung_up = std::chrono::steady_clock::now();
    wait_until_idle(s.session);
    CHECK(s.session.tokens_after(hung_up) <= 1);
}

TEST_CASE("http: requests wait in order for the one model; a full queue is 503") {
    server::ServerOptions o;
    o.queue_size = 1;
    LiveServer s(o);
    s.session.reply_text = std::string(30, 'q');
    s.session.token_delay_ms = 5;
    auto run = [&](const std::string& text) {
        httplib::Client c("127.0.0.1", s.server.port());
        c.set_read_timeout(10, 0);
        auto res = c.Post("/v1/chat/completions", chat(text).dump(), "application/json");
        return res ? res->status : -1;
    };
    auto first = std::async(std::launch::async, run, "first");
    for (int i = 0; i < 200 && !s.session.generating(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    auto second = std::async(std::launch::async, run, "second");
    REQUIRE(wait_queue_depth(s.server.port(), 1));  // the second is queued now
    auto third = s.post("/v1/chat/completions", chat("third"));
    check_error(third, 503, "server_error", "queue_full");
    CHECK(first.get() == 200);
    CHECK(second.get() == 200);
    CHECK(s.session.max_concurrent() == 1);
    const auto calls = s.session.calls();
    REQUIRE(calls.size() == 2);
    CHECK(calls[0].prompt_text.find("first") != std::string::npos);
    CHECK(calls[1].prompt_text.find("second") != std::string::npos);
}

TEST_CASE("http: with an API key, requests need 'Authorization: Bearer KEY'") {
    server::ServerOptions o;
    o.api_key = "sekrit";
    LiveServer s(o);
    auto missing = s.post("/v1/chat/completions", chat("x"));
    check_error(missing, 401, "authentication_error", "invalid_api_key");
    check_error(s.post("/v1/chat/completions", chat("x"), {{"Authorization", "Bearer wrong"}}), 401, "authentication_error", "invalid_api_key");
    check_error(s.client->Get("/v1/models"), 401, "authentication_error", "invalid_api_key");
    auto ok = s.post("/v1/chat/completions", chat("x"), {{"Authorization", "Bearer sekrit"}});
    REQUIRE(ok);
    CHECK(ok->status == 200);
    auto health = s.client->Get("/health");  // probes and the page need no key
    REQUIRE(health);
    CHECK(health->status == 200);
    CHECK(s.client->Get("/")->status == 200);
}

TEST_CASE("http: CORS headers only when --cors is set, preflight answered") {
    LiveServer closed;
    auto res = closed.client->Get("/v1/models", {{"Origin", "http://example.test"}});
    REQUIRE(res);
    CHECK(res->status == 403);  // without --cors a foreign page's request does not run at all
    CHECK_FALSE(res->has_header("Access-Control-Allow-Origin"));

    server::ServerOptions o;
    o.cors_origin = "http://example.test";
    o.api_key = "k";
    LiveServer open(o);
    auto pre = open.client->Options("/v1/chat/completions",
                                    {{"Origin", "http://example.test"}, {"Access-Control-Request-Method", "POST"},
                                     {"Access-Control-Request-Headers", "authorization, content-type"}});
    REQUIRE(pre);
    CHECK(pre->status == 204);
    CHECK(pre->get_header_value("Access-Control-Allow-Origin") == "http://example.test");
    CHECK(pre->get_header_value("Access-Control-Allow-Headers").find("Authorization") != std::string::npos);
    CHECK(pre->get_header_value("Access-Control-Allow-Methods").find("POST") != std::string::npos);
    auto post = open.post("/v1/chat/completions", chat("x"), {{"Origin", "http://example.test"}, {"Authorization", "Bearer k"}});
    REQUIRE(post);
    CHECK(post->status == 200);
    CHECK(post->get_header_value("Access-Control-Allow-Origin") == "http://example.test");
    auto denied = open.post("/v1/chat/completions", chat("x"), {{"Origin", "http://example.test"}});
    REQUIRE(denied);
    CHECK(denied->status == 401);  // errors carry the header too, so the page can show them
    CHECK(denied->get_header_value("Access-Control-Allow-Origin") == "http://example.test");
}

TEST_CASE("http: mangled request bodies never crash the server nor make it fail (deterministic fuzz)") {
    LiveServer s;
    s.session.reply_text = "ok";
    const std::string valid = R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},)"
                              R"({"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},)"
                              R"({"role":"tool","tool_call_id":"c","content":"r"}],"tools":[{"type":"function","function":{"name":"f"}}],)"
                              R"("tool_choice":"auto","stream":false,"max_tokens":8,"temperature":0.5,"top_p":0.9,"top_k":3,"min_p":0.1,"seed":1,)"
                              R"("stop":["x"],"logit_bias":{"5":1},"logprobs":true,"top_logprobs":2,"chat_template_kwargs":{"enable_thinking":true}})";
    const std::string valid_completion = R"({"prompt":"Once","max_tokens":4,"temperature":0,"logprobs":2,"stop":"z","echo":false,"stream":true})";
    const std::string alphabet = "{}[]\",:0-1e.truefalsnul\\ abc";
    std::mt19937 rng(1234);
    for (int i = 0; i < 300; i++) {
        const bool chat_request = i % 2 == 0;
        std::string body = chat_request ? valid : valid_completion;
        for (int edits = 1 + int(rng() % 3); edits > 0; edits--) {
            size_t at = rng() % body.size();
            switch (rng() % 3) {
            case 0: body[at] = alphabet[rng() % alphabet.size()]; break;
            case 1: body.erase(at, 1 + rng() % 8); break;
            default: body.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
            }
        }
        auto res = s.client->Post(chat_request ? "/v1/chat/completions" : "/v1/completions", body, "application/json");
        REQUIRE(res);
        INFO(body << "\n-> " << res->body);
        CHECK((res->status == 200 || res->status == 400));
    }
    s.post_json("/v1/chat/completions", chat("still alive"));
}
