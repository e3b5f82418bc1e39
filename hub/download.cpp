// One file from the Hub into its cache blob, robustly: a lock so two pulls never write the same blob,
// a free-space check, resume of blobs/<sha256>.incomplete with a Range request, retries with backoff
// on transient failures, and the sha256 verified before the blob appears.
#include "hub/hub_impl.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

namespace hub {

namespace {

using Clock = std::chrono::steady_clock;

// An exclusive flock on a lock file, held for the object's life (released if the process dies).
class FileLock {
public:
    explicit FileLock(const fs::path& path) {
        fs::create_directories(path.parent_path());
        fd_ = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
        if (fd_ < 0) throw Error("[hub] cannot create the lock " + path.string());
        while (::flock(fd_, LOCK_EX) != 0)
            if (errno != EINTR) throw Error("[hub] cannot lock " + path.string());
    }
    ~FileLock() { ::close(fd_); }
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

private:
    int fd_ = -1;
};

uint64_t size_or_zero(const fs::path& p) {
    std::error_code ec;
    uint64_t n = fs::file_size(p, ec);
    return ec ? 0 : n;
}

}  // namespace

bool fetch_blob(const Settings& settings, const std::string& repo, const std::string& commit, const RepoFile& file,
                const fs::path& blob, const ProgressFn& progress) {
    Progress p{.status = "pulling " + file.sha256.substr(0, 12), .file = file.path, .digest = "sha256:" + file.sha256,
               .total = file.size, .completed = 0};
    auto report = [&] { if (progress) progress(p); };
    auto already_there = [&] {
        if (!fs::exists(blob) || size_or_zero(blob) != file.size) return false;
        p.completed = file.size;
        report();
        return true;
    };
    if (already_there()) return false;
    fs::create_directories(blob.parent_path());
    FileLock lock(lock_path(settings, repo, file.sha256));
    if (already_there()) return false;  // another pull finished it while we waited for the lock

    const fs::path partial = blob.string() + ".incomplete";
    uint64_t have = size_or_zero(partial);
    if (have > file.size) {  // not a prefix of this file
        fs::remove(partial);
        have = 0;
    }
    const fs::space_info space = fs::space(blob.parent_path());
    if (space.available < file.size - have)
        throw Error("[hub] not enough free space for " + repo + "/" + file.path + ": it needs " + human_bytes(file.size - have) +
                    " more, " + blob.parent_path().string() + " has " + human_bytes(space.available));

    const std::string url = settings.endpoint + "/" + repo + "/resolve/" + commit + "/" + url_encode_path(file.path);
    p.completed = have;
    report();
    for (int attempt = 0;; attempt++) {
        std::FILE* out = std::fopen(partial.c_str(), "ab");
        if (!out) throw Error("[hub] cannot write " + partial.string());
        bool disk_error = false, first = true;
        auto last_report = Clock::now();
        HttpResult r = http_download(settings, url, have, [&](const char* data, size_t n, long status) {
            if (first && have > 0 && status == 200) {  // the server ignored the Range: start over
                std::fclose(out);
                out = std::fopen(partial.c_str(), "wb");
                have = 0;
                if (!out) return !(disk_error = true);
            }
            first = false;
            if (std::fwrite(data, 1, n, out) != n) return !(disk_error = true);
            have += n;
            p.completed = have;
            if (Clock::now() - last_report > std::chrono::milliseconds(100) || have == file.size) {
                last_report = Clock::now();
                report();
            }
            return true;
        });
        if (out && std::fclose(out) != 0) disk_error = true;
        if (disk_error) throw Error("[hub] cannot write " + partial.string() + " (disk full?)");
        if (r.status == 416) {  // the partial file does not fit the file on the server: start over
            fs::remove(partial);
            have = 0;
        } else if (r.status >= 200 && r.status < 300 && r.curl_error.empty()) {
            break;
        } else if (!is_transient(r)) {
            throw_http_error(r, repo, file.path);
        }
        if (attempt >= settings.retries)
            throw Error("[hub] downloading " + repo + "/" + file.path + " failed after " + std::to_string(attempt + 1) + " attempts (" +
                        (r.curl_error.empty() ? "HTTP " + std::to_string(r.status) : r.curl_error) + "); " +
                        human_bytes(have) + " are kept and the next pull resumes from there");
        std::this_thread::sleep_for(std::chrono::milliseconds(settings.backoff_ms << attempt));
    }

    if (have != file.size) {
        fs::remove(partial);
        throw Error("[hub] " + repo + "/" + file.path + ": got " + std::to_string(have) + " bytes, the Hub lists " +
                    std::to_string(file.size) + "; the partial file was deleted");
    }
    p.status = "verifying sha256 digest";
    report();
    const std::string got = sha256_file(partial);
    if (got != file.sha256) {
        fs::remove(partial);
        throw Error("[hub] " + repo + "/" + file.path + ": sha256 mismatch (got " + got + ", the Hub lists " + file.sha256 +
                    "); the downloaded file was deleted");
    }
    fs::rename(partial, blob);
    return true;
}

}  // namespace hub
