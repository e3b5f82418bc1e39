// The accept loop (see http_acceptor.h): connections wait on one epoll thread until a whole admitted
// request has arrived; workers run cpp-httplib on it over an in-memory stream and hand the connection
// back for its next request. Every close happens on the epoll thread, so descriptors are never reused
// under a worker's feet.
#include "server/http_acceptor.h"
#include "server/server_impl.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <unordered_map>

namespace server {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t READ_CHUNK = 64 << 10;
constexpr size_t CLOSING_DRAIN_MAX = 1 << 20;  // what a refused client may still send before we close
constexpr auto CLOSING_LINGER = std::chrono::seconds(1);

const char* reason(int status) {
    switch (status) {
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 408: return "Request Timeout";
        case 411: return "Length Required";
        case 413: return "Content Too Large";
        case 414: return "URI Too Long";
        case 415: return "Unsupported Media Type";
        case 431: return "Request Header Fields Too Large";
        case 503: return "Service Unavailable";
        default: return "Error";
    }
}

std::string address_of(const sockaddr_storage& a, int& port) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET) {
        auto& in = reinterpret_cast<const sockaddr_in&>(a);
        inet_ntop(AF_INET, &in.sin_addr, buf, sizeof buf);
        port = ntohs(in.sin_port);
    } else if (a.ss_family == AF_INET6) {
        auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
        inet_ntop(AF_INET6, &in6.sin6_addr, buf, sizeof buf);
        port = ntohs(in6.sin6_port);
    }
    return buf;
}

struct Endpoints {
    std::string remote_ip, local_ip;
    int remote_port = -1, local_port = -1;
};

// One admitted request's bytes for cpp-httplib to read, and the socket for its answer.
class RequestStream : public httplib::Stream {
public:
    RequestStream(int fd, std::string request, const Endpoints& ends, int write_timeout_ms)
        : fd_(fd), data_(std::move(request)), ends_(ends), write_timeout_ms_(write_timeout_ms) {}
    bool is_readable() const override { return pos_ < data_.size(); }
    bool is_writable() const override {
        pollfd p{fd_, POLLOUT, 0};
        return poll(&p, 1, write_timeout_ms_) > 0 && !(p.revents & (POLLERR | POLLHUP));
    }
    ssize_t read(char* ptr, size_t size) override {  // the request ends where the acceptor framed it
        const size_t n = std::min(size, data_.size() - pos_);
        std::memcpy(ptr, data_.data() + pos_, n);
        pos_ += n;
        return ssize_t(n);
    }
    ssize_t write(const char* ptr, size_t size) override {
        size_t done = 0;
        while (done < size) {
            ssize_t n = ::send(fd_, ptr + done, size - done, MSG_NOSIGNAL);  // SO_SNDTIMEO bounds a stalled client
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return -1;
            done += size_t(n);
        }
        return ssize_t(done);
    }
    void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = ends_.remote_ip, port = ends_.remote_port; }
    void get_local_ip_and_port(std::string& ip, int& port) const override { ip = ends_.local_ip, port = ends_.local_port; }
    socket_t socket() const override { return fd_; }

private:
    int fd_;
    std::string data_;
    size_t pos_ = 0;
    Endpoints ends_;
    int write_timeout_ms_;
};

}  // namespace

struct HttpAcceptor::State {
    struct Conn {
        enum class Phase { WAITING, BODY, DISPATCHED, CLOSING } phase = Phase::WAITING;
        int fd = -1;
        std::string buf;            // received and not yet handed to a worker
        Clock::time_point since;    // WAITING: start of the wait; BODY: the request's first byte
        bool started = false;       // a byte of the next request has arrived
        Clock::time_point started_at;
        std::optional<RequestHead> head;
        BodyFraming framing;
        std::optional<ChunkedScanner> chunked;
        size_t drained = 0;         // CLOSING: bytes discarded
        Endpoints ends;
    };
    using Phase = Conn::Phase;

    HttpCore& http;
    AcceptorOptions o;
    int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
    std::unordered_map<int, std::unique_ptr<Conn>> conns;
    size_t buffered = 0;       // bytes held in Conn::buf across connections
    size_t max_buffered;       // beyond it new request data gets 503
    std::unique_ptr<httplib::ThreadPool> workers;
    std::atomic<bool> is_running{false}, stopping{false};
    std::mutex returned_mutex;
    std::vector<std::pair<int, bool>> returned;  // (fd, keep the connection) from workers

    State(HttpCore& h, AcceptorOptions opt) : http(h), o(std::move(opt)), max_buffered(std::max<size_t>(4 * o.max_body, 64 << 20)) {}

    void wake() {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
    }

    void watch(Conn& c) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.fd = c.fd;
        epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c.fd, &ev);
    }

    void close_conn(int fd) {
        auto it = conns.find(fd);
        if (it == conns.end()) return;
        buffered -= it->second->buf.size();
        if (it->second->phase != Phase::DISPATCHED) epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
        ::close(fd);
        conns.erase(it);
    }

    void log_refusal(const Conn& c, const ApiError& e) {
        if (!o.log) return;
        const std::string what = c.head ? c.head->method + " " + c.head->path : std::string("-");
        o.log("[server] " + escape_for_log(what) + " " + std::to_string(e.status) + " · refused before routing: " + e.what());
    }

    static std::string error_response(const ApiError& e, const std::string& cors_origin) {
        const std::string body = dump(error_json(e));
        std::string out = "HTTP/1.1 " + std::to_string(e.status) + " " + reason(e.status) +
                          "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\nConnection: close\r\n";
        if (!cors_origin.empty()) out += "Access-Control-Allow-Origin: " + cors_origin + "\r\n";
        return out + "\r\n" + body;
    }

    // Answers from here and closes after a short drain, so the client reads the answer, not a reset.
    void refuse(Conn& c, const ApiError& e) {
        log_refusal(c, e);
        const std::string response = error_response(e, o.policy.cors_origin);
        [[maybe_unused]] ssize_t n = ::send(c.fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        ::shutdown(c.fd, SHUT_WR);
        buffered -= c.buf.size();
        c.buf.clear();
        c.buf.shrink_to_fit();
        c.phase = Phase::CLOSING;
        c.since = Clock::now();
    }

    void dispatch(Conn& c, size_t request_end) {
        std::string request = c.head->rebuilt();
        request.append(c.buf, c.head->size, request_end - c.head->size);
        c.buf.erase(0, request_end);
        buffered -= request_end;
        epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
        c.phase = Phase::DISPATCHED;
        c.head.reset();
        c.chunked.reset();
        workers->enqueue([this, fd = c.fd, ends = c.ends, request = std::move(request)]() mutable {
            RequestStream stream(fd, std::move(request), ends, o.write_timeout_ms);
            bool closed = false;
            const bool ok = http.process(stream, stopping.load(), closed);
            {
                std::lock_guard lock(returned_mutex);
                returned.emplace_back(fd, ok && !closed && !stopping.load());
            }
            wake();
        });
    }

    // Moves a connection on with what it has received: parse the head, admit, frame, dispatch.
    void advance(Conn& c) {
        try {
            if (c.phase == Phase::WAITING) {
                if (!c.buf.empty() && !c.started) c.started = true, c.started_at = Clock::now();
                c.head = parse_head(c.buf);
                if (!c.head) return;
                if (auto refusal = admit(*c.head, o.policy)) return refuse(c, *refusal);
                c.framing = body_framing(*c.head, o.max_body);
                if (c.framing.kind == BodyFraming::CHUNKED) c.chunked.emplace(o.max_body);
                const std::string* expect = c.head->field("Expect");
                if (expect && c.framing.kind != BodyFraming::NONE && c.buf.size() == c.head->size) {
                    static constexpr char CONTINUE[] = "HTTP/1.1 100 Continue\r\n\r\n";
                    [[maybe_unused]] ssize_t n = ::send(c.fd, CONTINUE, sizeof CONTINUE - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                }
                c.phase = Phase::BODY;
            }
            if (c.phase == Phase::BODY) {
                size_t end = c.head->size;
                if (c.framing.kind == BodyFraming::LENGTH) {
                    end += c.framing.length;
                    if (c.buf.size() < end) return;
                } else if (c.framing.kind == BodyFraming::CHUNKED) {
                    if (!c.chunked->scan(std::string_view(c.buf).substr(c.head->size))) return;
                    end += c.chunked->end();
                }
                dispatch(c, end);
            }
        } catch (const ApiError& e) {
            refuse(c, e);
        }
    }

    void on_readable(Conn& c) {
        char chunk[READ_CHUNK];
        for (int rounds = 0; rounds < 16 && (c.phase == Phase::WAITING || c.phase == Phase::BODY || c.phase == Phase::CLOSING); rounds++) {
            ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
            if (n <= 0) {  // the client closed (or reset) before sending a whole request
                if (c.phase == Phase::WAITING && c.buf.empty()) return close_conn(c.fd);
                if (c.phase == Phase::CLOSING) return close_conn(c.fd);
                refuse(c, ApiError(400, "[server] the client closed the connection before the request was complete"));
                return close_conn(c.fd);
            }
            if (c.phase == Phase::CLOSING) {
                c.drained += size_t(n);
                if (c.drained > CLOSING_DRAIN_MAX) return close_conn(c.fd);
                continue;
            }
            if (buffered + size_t(n) > max_buffered)
                return refuse(c, ApiError(503, "[server] too much request data in flight; retry later", "", "server_busy"));
            c.buf.append(chunk, size_t(n));
            buffered += size_t(n);
            advance(c);
            if (size_t(n) < sizeof chunk) return;
        }
    }

    // At the cap the connection that has waited longest without a request in progress makes room.
    bool make_room() {
        Conn* oldest = nullptr;
        for (auto& [fd, c] : conns) {
            if (c->phase == Phase::CLOSING) return close_conn(fd), true;
            if (c->phase == Phase::WAITING && (!oldest || c->since < oldest->since)) oldest = c.get();
        }
        if (!oldest) return false;
        close_conn(oldest->fd);
        return true;
    }

    void on_accept() {
        for (;;) {
            sockaddr_storage peer{};
            socklen_t len = sizeof peer;
            int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
            if (fd < 0) return;  // EAGAIN, or out of descriptors: the backlog waits for the next round
            if (int(conns.size()) >= o.max_connections && !make_room()) {
                const std::string response = error_response(
                    ApiError(503, "[server] too many connections (" + std::to_string(o.max_connections) + "); retry later", "", "server_busy"),
                    o.policy.cors_origin);
                [[maybe_unused]] ssize_t n = ::send(fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
                ::close(fd);
                continue;
            }
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // stream chunks leave at once
            timeval tv{o.write_timeout_ms / 1000, (o.write_timeout_ms % 1000) * 1000};
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
            auto c = std::make_unique<Conn>();
            c->fd = fd;
            c->since = Clock::now();
            c->ends.remote_ip = address_of(peer, c->ends.remote_port);
            sockaddr_storage self{};
            len = sizeof self;
            getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len);
            c->ends.local_ip = address_of(self, c->ends.local_port);
            watch(*c);
            conns.emplace(fd, std::move(c));
        }
    }

    void take_returned() {
        std::vector<std::pair<int, bool>> back;
        {
            std::lock_guard lock(returned_mutex);
            back.swap(returned);
        }
        for (auto [fd, keep] : back) {
            auto it = conns.find(fd);
            if (it == conns.end()) continue;
            Conn& c = *it->second;
            if (!keep || stopping) {
                close_conn(fd);
                continue;
            }
            c.phase = Phase::WAITING;
            c.since = Clock::now();
            c.started = false;
            watch(c);
            if (!c.buf.empty()) advance(c);  // a pipelined request
        }
    }

    void sweep() {
        const auto now = Clock::now();
        auto over = [&](Clock::time_point t, int ms) { return now - t > std::chrono::milliseconds(ms); };
        std::vector<int> to_close;
        for (auto& [fd, cp] : conns) {
            Conn& c = *cp;
            if (c.phase == Phase::CLOSING && now - c.since > CLOSING_LINGER) to_close.push_back(fd);
            else if (c.phase == Phase::WAITING && !c.started && over(c.since, o.idle_timeout_ms)) to_close.push_back(fd);
            else if (c.phase == Phase::WAITING && c.started && over(c.started_at, o.header_timeout_ms))
                refuse(c, ApiError(408, "[server] the request head did not arrive within " + std::to_string(o.header_timeout_ms) + " ms", "", "request_timeout"));
            else if (c.phase == Phase::BODY && over(c.started_at, o.request_timeout_ms))
                refuse(c, ApiError(408, "[server] the request body did not arrive within " + std::to_string(o.request_timeout_ms) + " ms", "", "request_timeout"));
        }
        for (int fd : to_close) close_conn(fd);
    }
};

HttpAcceptor::HttpAcceptor(HttpCore& http, AcceptorOptions options) : s_(std::make_unique<State>(http, std::move(options))) {
    // Made here, not in run(): shutdown() may wake the loop from another thread at any time.
    s_->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    s_->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s_->epoll_fd < 0 || s_->wake_fd < 0) throw std::runtime_error(std::string("[server] epoll: ") + std::strerror(errno));
}

HttpAcceptor::~HttpAcceptor() {
    for (auto& [fd, c] : s_->conns) ::close(fd);
    for (int fd : {s_->listen_fd, s_->epoll_fd, s_->wake_fd})
        if (fd >= 0) ::close(fd);
}

int HttpAcceptor::bind(const std::string& host, int port) {
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const std::string where = "[server] cannot listen on " + host + ":" + std::to_string(port);
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
        throw std::runtime_error(where + " (not an address of this machine)");
    int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const bool ok = fd >= 0 && ::bind(fd, found->ai_addr, found->ai_addrlen) == 0 && listen(fd, 512) == 0;
    freeaddrinfo(found);
    if (!ok) {
        if (fd >= 0) ::close(fd);
        throw std::runtime_error(where + " (" + std::strerror(errno) + ")");
    }
    s_->listen_fd = fd;
    s_->http.mark_listening(fd);
    sockaddr_storage self{};
    socklen_t len = sizeof self;
    getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len);
    int bound = -1;
    address_of(self, bound);
    return bound;
}

void HttpAcceptor::run() {
    State& s = *s_;
    if (s.listen_fd < 0) throw std::runtime_error("[server] run() before bind()");
    s.workers = std::make_unique<httplib::ThreadPool>(size_t(std::max(1, s.o.n_workers)));
    for (int fd : {s.listen_fd, s.wake_fd}) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    }
    s.is_running = true;
    auto last_sweep = Clock::now();
    bool accepting = true;
    epoll_event events[64];
    for (;;) {
        if (s.stopping && accepting) {  // stop accepting; connections without a running request close
            accepting = false;
            epoll_ctl(s.epoll_fd, EPOLL_CTL_DEL, s.listen_fd, nullptr);
            ::close(s.listen_fd);
            s.listen_fd = -1;
            std::vector<int> idle;
            for (auto& [fd, c] : s.conns)
                if (c->phase != State::Phase::DISPATCHED) idle.push_back(fd);
            for (int fd : idle) s.close_conn(fd);
        }
        if (!accepting && s.conns.empty()) break;
        const int n = epoll_wait(s.epoll_fd, events, 64, 100);
        for (int i = 0; i < n; i++) {
            const int fd = events[i].data.fd;
            if (fd == s.listen_fd) {
                s.on_accept();
            } else if (fd == s.wake_fd) {
                uint64_t count;
                [[maybe_unused]] ssize_t r = ::read(s.wake_fd, &count, sizeof count);
            } else if (auto it = s.conns.find(fd); it != s.conns.end()) {
                s.on_readable(*it->second);
            }
        }
        s.take_returned();
        if (Clock::now() - last_sweep > std::chrono::milliseconds(100)) {
            s.sweep();
            last_sweep = Clock::now();
        }
    }
    s.workers->shutdown();
    s.is_running = false;
}

void HttpAcceptor::shutdown() {
    s_->stopping = true;
    s_->wake();
}

bool HttpAcceptor::running() const { return s_->is_running; }

}  // namespace server
