// HTTP over libcurl for the Hub client: TLS, proxies ($HTTPS_PROXY) and redirects as users' systems
// expect; Hub refusals become errors that say what to do.
#include "hub/hub_impl.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

namespace hub {

namespace {

struct Transfer {
    HttpResult* result;
    const std::function<bool(const char*, size_t, long)>* sink;  // nullptr: collect into result->body
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    std::string line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect): its status, fresh headers
        t->result->headers.clear();
        size_t sp = line.find(' ');
        t->result->status = sp == std::string::npos ? 0 : std::atol(line.c_str() + sp + 1);
        return size * n;
    }
    if (size_t colon = line.find(':'); colon != std::string::npos) {
        std::string name = line.substr(0, colon), value = line.substr(colon + 1);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        value.erase(0, value.find_first_not_of(" \t"));
        value.erase(value.find_last_not_of(" \t\r\n") + 1);
        t->result->headers[name] = value;
    }
    return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* t = static_cast<Transfer*>(user);
    // Redirect and error bodies are not the file: only a 2xx body goes to the sink.
    if (t->sink) {
        if (t->result->status < 200 || t->result->status >= 300) return size * n;
        return (*t->sink)(data, size * n, t->result->status) ? size * n : 0;
    }
    t->result->body.append(data, size * n);
    return size * n;
}

HttpResult perform(const Settings& settings, const std::string& url, uint64_t range_from,
                   const std::function<bool(const char*, size_t, long)>* sink) {
    static std::once_flag init;
    std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    HttpResult result;
    Transfer transfer{&result, sink};
    CURL* curl = curl_easy_init();
    if (!curl) throw Error("[hub] libcurl could not start a transfer");
    curl_slist* headers = nullptr;
    if (!settings.token.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + settings.token).c_str());
    headers = curl_slist_append(headers, "User-Agent: tinyllm/1 (huggingface_hub-compatible)");
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 30L);
    // A stalled transfer (under 1 byte/s for 60 s) fails and is retried from where it stopped.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
    std::string range = std::to_string(range_from) + "-";
    if (range_from > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
    CURLcode code = curl_easy_perform(curl);
    // A transfer cut short keeps its status (2xx: the bytes written so far are good) and says why.
    if (code != CURLE_OK) result.curl_error = curl_easy_strerror(code);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return result;
}

}  // namespace

HttpResult http_get(const Settings& settings, const std::string& url) { return perform(settings, url, 0, nullptr); }

HttpResult http_download(const Settings& settings, const std::string& url, uint64_t range_from,
                         const std::function<bool(const char*, size_t, long)>& sink) {
    return perform(settings, url, range_from, &sink);
}

bool is_transient(const HttpResult& r) {
    return !r.curl_error.empty() || r.status == 0 || r.status >= 500 || r.status == 408 || r.status == 429;
}

void throw_http_error(const HttpResult& r, const std::string& repo, const std::string& file) {
    auto code = r.headers.count("x-error-code") ? r.headers.at("x-error-code") : "";
    const std::string what = file.empty() ? repo : repo + "/" + file;
    if (code == "GatedRepo" || (code.empty() && (r.status == 401 || r.status == 403)))
        throw Error("[hub] " + repo + " needs a token (HTTP " + std::to_string(r.status) +
                    "): it is gated or private; accept its terms on the Hub and set HF_TOKEN");
    if (code == "RepoNotFound" || code == "RepositoryNotFound" || (r.status == 404 && file.empty()) || r.status == 401)
        throw Error("[hub] no such repo " + repo + " (HTTP " + std::to_string(r.status) + "; set HF_TOKEN if it is private)");
    if (code == "RevisionNotFound") throw Error("[hub] no such revision of " + repo);
    if (r.status == 404) throw Error("[hub] no such file " + what + " (HTTP 404)");
    if (r.status == 0) throw Error("[hub] cannot reach the Hub for " + what + ": " + r.curl_error);
    throw Error("[hub] " + what + ": HTTP " + std::to_string(r.status));
}

std::string url_encode_path(const std::string& path) {
    static const char* HEX = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : path) {
        if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') out += char(c);
        else out += {'%', HEX[c >> 4], HEX[c & 15]};
    }
    return out;
}

}  // namespace hub
