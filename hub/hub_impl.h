// Hub internals shared by its files: HTTP over libcurl (http.cpp), the cache layout (cache.cpp) and
// file hashing. Only hub/*.cpp include this.
#pragma once

#include "hub/hub.h"

#include <functional>
#include <map>
#include <string>

namespace hub {

struct HttpResult {
    long status = 0;                            // 0: no HTTP answer (see curl_error)
    std::string curl_error;                     // why the transfer failed, "" when it did not
    std::map<std::string, std::string> headers; // of the final response, names in lower case
    std::string body;                           // http_get only
};

// GET `url` following redirects (the bearer token goes to the endpoint's host only, as curl does).
HttpResult http_get(const Settings& settings, const std::string& url);
// GET `url` from byte `range_from` on (a Range request when > 0), handing the body to `sink`; a sink
// that returns false aborts the transfer. Only 2xx bodies reach the sink (with the status: 200 to a
// Range request means the server sends the whole file).
HttpResult http_download(const Settings& settings, const std::string& url, uint64_t range_from,
                         const std::function<bool(const char*, size_t, long)>& sink);
// Worth retrying: no answer at all, 5xx, 408 or 429.
bool is_transient(const HttpResult& r);
// The clear error for a refused request: needs a token (401/403), no such repo / revision / file (404).
[[noreturn]] void throw_http_error(const HttpResult& r, const std::string& repo, const std::string& file);

std::string url_encode_path(const std::string& path);  // each segment percent-encoded, '/' kept
std::string sha256_file(const fs::path& path);         // lower-case hex

// Cache layout (cache.cpp): models--OWNER--REPO/{blobs/<sha256>, snapshots/<commit>/<file>, refs/<revision>}.
fs::path blob_path(const Settings& settings, const std::string& repo, const std::string& sha256);
fs::path snapshot_path(const Settings& settings, const std::string& repo, const std::string& commit, const std::string& file);
fs::path lock_path(const Settings& settings, const std::string& repo, const std::string& sha256);
void write_ref(const Settings& settings, const std::string& repo, const std::string& revision, const std::string& commit);
std::string read_ref(const Settings& settings, const std::string& repo, const std::string& revision);  // "" when absent
// Points snapshots/<commit>/<file> at the blob (a relative symlink, as huggingface_hub makes).
void link_snapshot(const fs::path& snapshot_file, const fs::path& blob);

// Downloads one file into its blob (download.cpp): lock, resume, retries, free-space check, sha256.
// Returns false when the blob was already complete (nothing fetched).
bool fetch_blob(const Settings& settings, const std::string& repo, const std::string& commit, const RepoFile& file,
                const fs::path& blob, const ProgressFn& progress);

std::string human_bytes(uint64_t n);  // "1.2 GB"

}  // namespace hub
