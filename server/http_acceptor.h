// Our own accept loop in front of cpp-httplib. One epoll thread holds every connection while it is
// idle or still sending its request, under deadlines and a connection cap, and applies the admission
// policy and body limits before reading a body; a worker thread only ever gets a complete, admitted
// request, which cpp-httplib's routing then serves. Slow or idle clients therefore cannot pin workers.
#pragma once

#include "server/http_guard.h"

#include <httplib.h>

#include <functional>
#include <memory>
#include <string>

namespace server {

// cpp-httplib's request processing (parsing, routing, responses), without its accept loop.
struct HttpCore : httplib::Server {
    bool process(httplib::Stream& stream, bool close_connection, bool& connection_closed) {
        return process_request(stream, close_connection, connection_closed, nullptr);
    }
    // cpp-httplib ends chunked answers early once its own listening socket is invalid (its shutdown
    // signal); ours lives in the acceptor, so it is marked valid once bound.
    void mark_listening(int fd) { svr_sock_ = fd; }
    ~HttpCore() override { svr_sock_ = INVALID_SOCKET; }  // not httplib's to close
};

struct AcceptorOptions {
    size_t max_body = 32 << 20;
    int max_connections = 512;     // beyond it the oldest waiting connection is dropped, or a 503 answers
    int n_workers = 8;
    int idle_timeout_ms = 5000;    // a connection without a request byte
    int header_timeout_ms = 10000; // from a request's first byte to the end of its head
    int request_timeout_ms = 60000;  // from a request's first byte to the end of its body
    int write_timeout_ms = 10000;  // a client that stops reading an answer
    AdmissionPolicy policy;
    std::function<void(const std::string& line)> log;  // requests refused before routing; empty: none
};

class HttpAcceptor {
public:
    HttpAcceptor(HttpCore& http, AcceptorOptions options);
    ~HttpAcceptor();
    HttpAcceptor(const HttpAcceptor&) = delete;
    HttpAcceptor& operator=(const HttpAcceptor&) = delete;

    int bind(const std::string& host, int port);  // the bound port (port 0: any free one); throws
    void run();       // serves until shutdown() and the last running request has ended
    void shutdown();  // stops accepting and closes waiting connections; running requests finish
    bool running() const;

    struct State;

private:
    std::unique_ptr<State> s_;
};

}  // namespace server
