// The acceptor's connection cap and a graceful shutdown, in process: idle connections make room for
// new ones, busy ones get a fast 503 beyond the cap, and shutdown() ends queued and running requests.
#include "live_server.h"

#include "llm/chat_template.h"

#include <chrono>
#include <future>
#include <thread>

namespace {

std::string raw_request(int port, const std::string& request) {
    RawClient c(port);
    REQUIRE(::send(c.fd, request.data(), request.size(), 0) == ssize_t(request.size()));
    return c.read_until("\r\n\r\n{", 1) + c.read_until("}", 1);
}

json streaming_chat() {
    json body = chat("go");
    body["stream"] = true;
    return body;
}

}  // namespace

TEST_CASE("limits: at the connection cap the longest-idle connection makes room for a new request") {
    server::ServerOptions o;
    o.max_connections = 3;
    LiveServer s(o);
    std::vector<std::unique_ptr<RawClient>> idle;
    for (int i = 0; i < 3; i++) idle.push_back(std::make_unique<RawClient>(s.server.port()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto res = s.client->Get("/health");
    REQUIRE(res);
    CHECK(res->status == 200);
}

// b is sent only once a generates: sent together, b could win the queue, and a's wait for its first
// token then outlasted b's whole reply, after which b's connection was idle (and made room).
TEST_CASE("limits: beyond the cap with every connection busy, a new one gets a fast 503") {
    server::ServerOptions o;
    o.max_connections = 2;
    LiveServer s(o);
    s.session.token_delay_ms = 20;
    s.session.end_with_eos = false;
    RawClient a(s.server.port()), b(s.server.port());
    a.send_post("/v1/chat/completions", streaming_chat().dump());
    a.read_until("data: ", 1);  // a generates
    b.send_post("/v1/chat/completions", streaming_chat().dump());
    b.read_until("text/event-stream", 1);  // b waits in the queue: both hold their connection
    const auto t0 = std::chrono::steady_clock::now();
    const std::string answer = raw_request(s.server.port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
    CHECK(answer.starts_with("HTTP/1.1 503"));
    CHECK(answer.find("\"code\":\"server_busy\"") != std::string::npos);
}

TEST_CASE("limits: shutdown ends a queued request with 503 and the running stream with length and [DONE]") {
    server::ServerOptions o;
    o.shutdown_timeout_s = 1.5;
    LiveServer s(o);
    s.session.token_delay_ms = 10;
    s.session.end_with_eos = false;
    RawClient running(s.server.port());
    running.send_post("/v1/chat/completions", streaming_chat().dump());
    running.read_until("data: ", 2);
    auto queued = std::async(std::launch::async, [&] { return s.post("/v1/chat/completions", chat("later")); });
    REQUIRE(wait_queue_depth(s.server.port(), 1));

    const auto t0 = std::chrono::steady_clock::now();
    CHECK(s.server.shutdown());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1500));
    const std::string stream = running.read_until("0\r\n\r\n", 1);
    CHECK(stream.find("\"finish_reason\":\"length\"") != std::string::npos);
    CHECK(stream.find("data: [DONE]\n\n") != std::string::npos);
    auto res = queued.get();
    REQUIRE(res);
    CHECK(res->status == 503);
    CHECK(json::parse(res->body)["error"]["code"] == "shutting_down");
    CHECK_FALSE(httplib::Client("127.0.0.1", s.server.port()).Get("/health"));  // no longer accepting
}

// Both prompt slots render a template that loops for minutes (its budget raised); their clients leave.
TEST_CASE("limits: clients that leave during a long render free their prompt slots at once") {
    LiveServer s({}, 512, false);
    auto slow = std::make_shared<llm::ChatTemplate>(
        "{% if messages[0].content == 'slow' %}{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}{% endif %}"
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n");
    llm::TemplateLimits unbounded;
    unbounded.max_steps = unbounded.max_alloc_bytes = uint64_t(1) << 60;
    slow->set_limits(unbounded);
    s.server.attach(s.session, [slow](const nlohmann::ordered_json& c) { return slow->render(c); });
    {
        RawClient a(s.server.port()), b(s.server.port());
        a.send_post("/v1/chat/completions", chat("slow").dump());
        b.send_post("/v1/chat/completions", chat("slow").dump());
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both render
    }  // and hang up
    const auto t0 = std::chrono::steady_clock::now();
    s.client->set_read_timeout(10 * SANITIZER_SLOWDOWN, 0);
    auto res = s.post("/v1/chat/completions", chat("hi"));
    REQUIRE(res);
    CHECK(res->status == 200);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3 * SANITIZER_SLOWDOWN));
    CHECK(s.session.calls().size() == 1);  // the abandoned prompts never reached the model
}
