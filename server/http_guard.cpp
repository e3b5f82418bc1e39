// Request heads, body framing and admission, decided before the body is read (see http_guard.h).
// The parser is strict where leniency lets a request smuggle past the checks: one framing per body,
// no obsolete line folding, no whitespace before a field's colon.
#include "server/http_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>

namespace server {

namespace {

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool is_token_char(unsigned char c) { return std::isalnum(c) || std::string_view("!#$%&'*+-.^_`|~").find(char(c)) != std::string_view::npos; }

ApiError bad(int status, const std::string& what, std::string code = "") { return ApiError(status, "[server] " + what, "", std::move(code)); }

// The host part of a Host header or an origin's authority: "[::1]:8080" -> "::1", "a.b:80" -> "a.b".
std::string host_name(std::string_view authority) {
    if (authority.starts_with("[")) {
        size_t close = authority.find(']');
        return lower(authority.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
    }
    return lower(authority.substr(0, authority.find(':')));
}

}  // namespace

const std::string* RequestHead::field(std::string_view name) const {
    for (const auto& [key, value] : fields)
        if (iequals(key, name)) return &value;
    return nullptr;
}

std::string RequestHead::rebuilt() const {
    std::string out = method + " " + target + " " + version + "\r\n";
    for (const auto& [key, value] : fields)
        if (!iequals(key, "Range") && !iequals(key, "Expect")) out += key + ": " + value + "\r\n";
    return out + "\r\n";
}

std::optional<RequestHead> parse_head(std::string_view data) {
    // Clients may send blank lines before a request (RFC 9112 §2.2).
    size_t start = 0;
    while (data.substr(start).starts_with("\r\n")) start += 2;
    const size_t end = data.find("\r\n\r\n", start);
    const size_t head_end = end == std::string_view::npos ? data.size() : end + 4;
    if (head_end - start > HEAD_MAX_BYTES)
        throw bad(431, "the request head is over " + std::to_string(HEAD_MAX_BYTES) + " bytes", "request_header_fields_too_large");
    const size_t line_end = data.find("\r\n", start);
    if (line_end == std::string_view::npos) return std::nullopt;
    size_t n_lines = std::count(data.begin() + long(start), data.begin() + long(head_end), '\n');
    if (n_lines > HEAD_MAX_FIELDS + 2)
        throw bad(431, "the request has more than " + std::to_string(HEAD_MAX_FIELDS) + " header fields", "request_header_fields_too_large");
    if (end == std::string_view::npos) return std::nullopt;

    RequestHead head;
    head.size = head_end;
    std::string_view line = data.substr(start, line_end - start);
    const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
    if (sp1 == std::string_view::npos || sp2 == sp1) throw bad(400, "malformed request line");
    head.method = std::string(line.substr(0, sp1));
    head.target = std::string(line.substr(sp1 + 1, sp2 - sp1 - 1));
    head.version = std::string(line.substr(sp2 + 1));
    if (head.method.empty() || !std::all_of(head.method.begin(), head.method.end(), [](char c) { return is_token_char(c); }))
        throw bad(400, "malformed request method");
    if (head.version != "HTTP/1.1" && head.version != "HTTP/1.0") throw bad(400, "unsupported HTTP version (HTTP/1.0 and 1.1 are served)");
    if (head.target.empty() || head.target.find_first_of(" \t") != std::string::npos) throw bad(400, "malformed request target");
    for (unsigned char c : head.target)
        if (c < 0x21 || c == 0x7f) throw bad(400, "control characters in the request target");
    head.path = head.target.substr(0, head.target.find('?'));

    for (size_t pos = line_end + 2; pos < end + 2;) {
        size_t eol = data.find("\r\n", pos);
        std::string_view field = data.substr(pos, eol - pos);
        pos = eol + 2;
        const size_t colon = field.find(':');
        if (colon == 0 || colon == std::string_view::npos) throw bad(400, "malformed header field");
        std::string_view name = field.substr(0, colon), value = trim(field.substr(colon + 1));
        if (!std::all_of(name.begin(), name.end(), [](char c) { return is_token_char(static_cast<unsigned char>(c)); }))
            throw bad(400, "malformed header field name");  // also refuses obsolete folding and "Name :"
        for (unsigned char c : value)
            if ((c < 0x20 && c != '\t') || c == 0x7f) throw bad(400, "control characters in a header field");
        head.fields.emplace_back(std::string(name), std::string(value));
    }
    return head;
}

BodyFraming body_framing(const RequestHead& head, size_t max_body) {
    int n_length = 0, n_encoding = 0;
    for (const auto& [key, value] : head.fields) {
        n_length += iequals(key, "Content-Length");
        n_encoding += iequals(key, "Transfer-Encoding");
    }
    if (n_length && n_encoding) throw bad(400, "both Content-Length and Transfer-Encoding");
    BodyFraming framing;
    if (n_encoding) {
        if (n_encoding > 1 || !iequals(*head.field("Transfer-Encoding"), "chunked"))
            throw bad(400, "only 'Transfer-Encoding: chunked' is supported");
        framing.kind = BodyFraming::CHUNKED;
    } else if (n_length) {
        const std::string& v = *head.field("Content-Length");
        uint64_t length = 0;
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), length);
        if (n_length > 1 || v.empty() || ec != std::errc() || p != v.data() + v.size()) throw bad(400, "invalid Content-Length");
        if (length > max_body)
            throw bad(413, "the request body is " + std::to_string(length) + " bytes; the limit is " + std::to_string(max_body) + " (--max-body)",
                      "request_too_large");
        framing.kind = length ? BodyFraming::LENGTH : BodyFraming::NONE;
        framing.length = size_t(length);
    } else if (head.method == "POST" || head.method == "PUT" || head.method == "PATCH") {
        throw bad(411, "a request body needs Content-Length or chunked Transfer-Encoding", "length_required");
    }
    return framing;
}

bool ChunkedScanner::scan(std::string_view body) {
    while (phase_ != Phase::DONE) {
        if (phase_ == Phase::DATA) {
            const size_t n = std::min(remaining_, body.size() - pos_);
            pos_ += n;
            remaining_ -= n;
            if (remaining_) return false;
            phase_ = Phase::DATA_END;
            continue;
        }
        const size_t eol = body.find("\r\n", pos_);
        const size_t line_limit = phase_ == Phase::TRAILER ? HEAD_MAX_BYTES : 1024;
        if (eol == std::string_view::npos) {
            if (body.size() - pos_ > line_limit) throw bad(400, "malformed chunked body (line too long)");
            return false;
        }
        std::string_view line = body.substr(pos_, eol - pos_);
        pos_ = eol + 2;
        if (phase_ == Phase::DATA_END) {
            if (!line.empty()) throw bad(400, "malformed chunked body (no CRLF after a chunk)");
            phase_ = Phase::SIZE;
        } else if (phase_ == Phase::TRAILER) {
            trailer_bytes_ += line.size() + 2;
            if (trailer_bytes_ > HEAD_MAX_BYTES) throw bad(431, "the chunked trailer is too large", "request_header_fields_too_large");
            if (line.empty()) phase_ = Phase::DONE;
        } else {  // SIZE: hex digits, then optional ";ext"
            std::string_view digits = trim(line.substr(0, line.find(';')));
            uint64_t size = 0;
            auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size, 16);
            if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size()) throw bad(400, "malformed chunk size");
            if (size > max_body_ - decoded_)
                throw bad(413, "the chunked request body is over the limit of " + std::to_string(max_body_) + " bytes (--max-body)", "request_too_large");
            decoded_ += size;
            remaining_ = size_t(size);
            phase_ = size ? Phase::DATA : Phase::TRAILER;
        }
    }
    return true;
}

bool is_loopback_host(std::string_view host) {
    in_addr v4{};
    in6_addr v6{};
    if (inet_pton(AF_INET6, std::string(host).c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);  // --host ::1
    const std::string h = host_name(host);
    if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
    return h == "localhost" || h.ends_with(".localhost");
}

bool keys_equal(std::string_view a, std::string_view b) {
    // Every byte of the longer one is compared, so the time says nothing about where they differ.
    const size_t n = std::max(a.size(), b.size());
    unsigned diff = a.size() != b.size();
    for (size_t i = 0; i < n; i++) {
        const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
        diff |= x ^ y;
    }
    return diff == 0;
}

std::string escape_for_log(std::string_view text) {
    static constexpr char HEX[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : text) {
        if (c >= 0x20 && c < 0x7f && c != '\\') out += char(c);
        else out += std::string("\\x") + HEX[c >> 4] + HEX[c & 15];
    }
    return out;
}

std::string resolve_api_key(const std::string& from_flag, const std::string& key_file) {
    std::string key = from_flag;
    if (key.empty() && !key_file.empty()) {
        std::ifstream in(key_file);
        if (!in || !std::getline(in, key)) throw std::runtime_error("[server] cannot read the API key from '" + key_file + "'");
        if (!key.empty() && key.back() == '\r') key.pop_back();
        if (trim(key).empty()) throw std::runtime_error("[server] the API key file '" + key_file + "' starts with an empty line");
    } else if (key.empty()) {
        if (const char* env = std::getenv("TINYLLM_API_KEY")) key = env;
    }
    return std::string(trim(key));
}

std::optional<ApiError> admit(const RequestHead& head, const AdmissionPolicy& policy) {
    // DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 sends its own Host.
    const std::string* host = head.field("Host");
    if (host && policy.loopback_only_hosts && !is_loopback_host(*host) &&
        std::none_of(policy.allowed_hosts.begin(), policy.allowed_hosts.end(), [&](const std::string& h) { return host_name(h) == host_name(*host); }))
        return ApiError(403, "[server] Host '" + escape_for_log(*host) + "' is not this server's (start it with --allow-host " +
                                 escape_for_log(host_name(*host)) + " to accept it)", "", "host_not_allowed");

    // A page's cross-origin request must not run without --cors naming it (simple POSTs skip preflight).
    const std::string* origin = head.field("Origin");
    if (origin && policy.cors_origin != "*" && *origin != policy.cors_origin) {
        const bool same_origin = host && (iequals(*origin, "http://" + *host) || iequals(*origin, "https://" + *host));
        if (!same_origin)
            return ApiError(403, "[server] cross-origin requests from '" + escape_for_log(*origin) + "' are not allowed (see --cors)", "",
                            "origin_not_allowed");
    }

    const bool open_route = head.path == "/" || head.path == "/health";
    if (!policy.api_key.empty() && !open_route && head.method != "OPTIONS") {
        const std::string* auth = head.field("Authorization");
        const std::string* x_api_key = head.field("x-api-key");
        bool ok = false;
        if (auth && auth->size() > 7 && iequals(std::string_view(*auth).substr(0, 7), "Bearer "))
            ok = keys_equal(trim(std::string_view(*auth).substr(7)), policy.api_key);
        if (x_api_key) ok = ok || keys_equal(*x_api_key, policy.api_key);
        if (!ok)
            return ApiError(401, auth || x_api_key ? "[server] invalid API key"
                                                   : "[server] missing API key: send 'Authorization: Bearer KEY'", "", "invalid_api_key");
    }

    if (const std::string* encoding = head.field("Content-Encoding"); encoding && !iequals(*encoding, "identity"))
        return ApiError(415, "[server] compressed request bodies (Content-Encoding: " + escape_for_log(*encoding) + ") are not accepted", "",
                        "unsupported_media_type");
    // Every POST route reads JSON. A page can send text/plain or a form without preflight, so those
    // types are refused unless --cors lets pages in; urlencoded (curl's default) cannot carry a JSON
    // object from a browser form, since the form encodes its braces.
    if (head.method == "POST" && policy.cors_origin.empty()) {
        const std::string* type = head.field("Content-Type");
        const std::string media = type ? lower(trim(std::string_view(*type).substr(0, type->find(';')))) : "";
        if (type && media != "application/json" && !media.ends_with("+json") && media != "application/x-www-form-urlencoded")
            return ApiError(415, "[server] the request body must be JSON (Content-Type: application/json), not '" + escape_for_log(media) + "'",
                            "", "unsupported_media_type");
    }
    return std::nullopt;
}

}  // namespace server
