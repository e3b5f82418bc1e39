// What the server decides about a request before any of its body is read: the request head parsed
// within limits, the body's framing (Content-Length or chunked, both bounded) and the admission policy
// (API key, Host, Origin, content type and encoding). The acceptor (http_acceptor.h) applies them.
#pragma once

#include "server/request.h"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace server {

constexpr size_t HEAD_MAX_BYTES = 32 << 10;  // request line + headers; browsers send a few KB
constexpr size_t HEAD_MAX_FIELDS = 100;

struct RequestHead {
    std::string method, target, version;
    std::string path;                                          // target without the query
    std::vector<std::pair<std::string, std::string>> fields;   // as sent, values trimmed
    size_t size = 0;                                           // bytes up to and including the blank line

    const std::string* field(std::string_view name) const;     // first field of that name (any case)
    // The head as cpp-httplib gets it: without Range (no partial or multi-range answers) and Expect
    // (the acceptor answers 100-continue itself).
    std::string rebuilt() const;
};

// The head at the start of `data`, or nullopt while it is incomplete. Throws ApiError 400 (malformed),
// 414 (request line) or 431 (too many or too large fields), whether the head is complete or not.
std::optional<RequestHead> parse_head(std::string_view data);

// How the body after the head ends. Throws ApiError 400 (contradictory or bad framing), 411 (a POST
// without length: a length-less body would end only when the client half-closes) or 413.
struct BodyFraming {
    enum Kind { NONE, LENGTH, CHUNKED } kind = NONE;
    size_t length = 0;  // LENGTH: the body's bytes
};
BodyFraming body_framing(const RequestHead& head, size_t max_body);

// Follows chunked framing as bytes arrive, counting the decoded size against the limit.
class ChunkedScanner {
public:
    explicit ChunkedScanner(size_t max_body) : max_body_(max_body) {}
    // `body` is everything received after the head so far (it only grows). True once the last chunk
    // and the trailer have arrived; end() is then the body's length on the wire. Throws ApiError 400/413.
    bool scan(std::string_view body);
    size_t end() const { return pos_; }

private:
    enum class Phase { SIZE, DATA, DATA_END, TRAILER, DONE } phase_ = Phase::SIZE;
    size_t max_body_, pos_ = 0, remaining_ = 0, decoded_ = 0, trailer_bytes_ = 0;
};

// The admission policy: nullopt admits the request, otherwise the error to answer with.
struct AdmissionPolicy {
    std::string api_key;                     // "": none
    std::string cors_origin;                 // "": same-origin only
    bool loopback_only_hosts = true;         // bound to loopback: only loopback Host headers (DNS rebinding)
    std::vector<std::string> allowed_hosts;  // further Host names (--allow-host)
};
std::optional<ApiError> admit(const RequestHead& head, const AdmissionPolicy& policy);

bool is_loopback_host(std::string_view host);       // 127.x.y.z, ::1, localhost (for --host)
bool keys_equal(std::string_view a, std::string_view b);  // constant time in the contents
std::string escape_for_log(std::string_view text);  // control characters and bytes >= 0x7f as \xNN

}  // namespace server
