// Test helpers: the real server on an ephemeral port over the scripted model, an HTTP client for it,
// SSE parsing, and a raw socket client that can hang up mid-stream.
#pragma once

#include "fake/fake_model.h"
#include "server/server.h"

#include <catch2/catch.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using nlohmann::json;

// How much slower a sanitizer build (TINYLLM_SANITIZED, set by CMake) runs the server, TSAN most: time
// bounds in tests scale by it.
#ifdef TINYLLM_SANITIZED
constexpr int SANITIZER_SLOWDOWN = 10;
#else
constexpr int SANITIZER_SLOWDOWN = 1;
#endif

struct LiveServer {
    fake::ScriptedSession session;
    server::Server server;
    std::unique_ptr<httplib::Client> client;

    explicit LiveServer(server::ServerOptions options = {}, int n_ctx = 512, bool attach = true)
        : session(n_ctx), server(with_test_defaults(options)) {
        if (attach) server.attach(session, fake::render_chatml);
        server.start();
        client = std::make_unique<httplib::Client>("127.0.0.1", server.port());
        client->set_read_timeout(10, 0);
    }
    static server::ServerOptions with_test_defaults(server::ServerOptions o) {
        o.port = 0;
        o.log_requests = false;
        return o;
    }

    httplib::Result post(const std::string& path, const json& body, const httplib::Headers& headers = {}) {
        return client->Post(path.c_str(), headers, body.dump(), "application/json");
    }
    json post_json(const std::string& path, const json& body, int expected_status = 200) {
        auto res = post(path, body);
        REQUIRE(res);
        INFO(res->body);
        REQUIRE(res->status == expected_status);
        return json::parse(res->body);
    }
};

inline json chat(const std::string& user_text) { return {{"messages", json::array({{{"role", "user"}, {"content", user_text}}})}}; }

// The SSE events of a stream body; every event must be exactly "data: …\n\n".
inline std::vector<std::string> sse_events(const std::string& body) {
    std::vector<std::string> events;
    size_t pos = 0;
    while (pos < body.size()) {
        size_t end = body.find("\n\n", pos);
        REQUIRE(end != std::string::npos);
        std::string event = body.substr(pos, end - pos);
        REQUIRE(event.rfind("data: ", 0) == 0);
        events.push_back(event.substr(6));
        pos = end + 2;
    }
    return events;
}

// The JSON chunks before "[DONE]", checking that [DONE] ends the stream.
inline std::vector<json> sse_chunks(const std::string& body) {
    auto events = sse_events(body);
    REQUIRE(!events.empty());
    REQUIRE(events.back() == "[DONE]");
    std::vector<json> chunks;
    for (size_t i = 0; i + 1 < events.size(); i++) chunks.push_back(json::parse(events[i]));
    return chunks;
}

// A bare socket client: sends one request, reads until `until` appears `count` times, and hangs up.
struct RawClient {
    int fd = -1;
    explicit RawClient(int port) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(uint16_t(port));
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    }
    ~RawClient() { hang_up(); }
    void send_post(const std::string& path, const std::string& body) {
        std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
        REQUIRE(::send(fd, req.data(), req.size(), 0) == ssize_t(req.size()));
    }
    std::string read_until(const std::string& until, int count) {
        std::string got;
        char buf[4096];
        auto occurrences = [&] {
            int n = 0;
            for (size_t p = got.find(until); p != std::string::npos; p = got.find(until, p + 1)) n++;
            return n;
        };
        while (occurrences() < count) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            got.append(buf, size_t(n));
        }
        return got;
    }
    void hang_up() {
        if (fd >= 0) close(fd);
        fd = -1;
    }
};

// Waits (at most 5 s) until /metrics says `n` requests wait in the model's queue: the queue's own
// state, not a guess at how long a request takes to get there.
inline bool wait_queue_depth(int port, int n) {
    httplib::Client c("127.0.0.1", port);
    const std::string line = "\ntinyllm_queue_depth " + std::to_string(n) + "\n";
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5); std::chrono::steady_clock::now() < deadline;) {
        auto res = c.Get("/metrics");
        if (res && res->body.find(line) != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
}
