// A fake Hugging Face Hub on loopback for the tests: the model info API (siblings with sizes and LFS
// sha256), /{repo}/resolve/{revision}/{file} redirecting to a CDN path, Range requests, gated repos
// that need a bearer token, and fault injection (a download cut off midway, a wrong listed sha256).
// It counts the bytes it serves per file, so tests can tell what was fetched again.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace fake {

std::string sha256_hex(const std::string& bytes);

class FakeHub {
public:
    static constexpr const char* TOKEN = "hf_test_token";  // what gated repos accept

    FakeHub();
    ~FakeHub();
    std::string endpoint() const;  // http://127.0.0.1:PORT

    void add_file(const std::string& repo, const std::string& path, std::string content);
    void set_gated(const std::string& repo);
    void set_commit(const std::string& repo, const std::string& commit);
    void list_wrong_sha256(const std::string& repo, const std::string& path);  // the checksum mismatch
    void list_size(const std::string& repo, const std::string& path, uint64_t size);  // e.g. more than any disk
    // The next download of this file stops after `offset` bytes of it and drops the connection.
    void cut_once(const std::string& repo, const std::string& path, uint64_t offset);
    // Every download of this file stops after `offset` bytes (until cleared with UINT64_MAX).
    void cut_always(const std::string& repo, const std::string& path, uint64_t offset);
    // Downloads of this file wait `ms` between 64 KiB chunks (so concurrent pulls overlap).
    void slow_down(const std::string& repo, const std::string& path, int ms);

    uint64_t bytes_served(const std::string& repo, const std::string& path) const;
    int info_requests() const;  // model info API calls, any repo

private:
    struct File {
        std::string content, sha256, listed_sha256;
        uint64_t listed_size = UINT64_MAX;  // UINT64_MAX: the content's size
        uint64_t cut_at = UINT64_MAX;
        bool cut_repeat = false;
        int delay_ms = 0;
        uint64_t served = 0;
    };
    struct Repo {
        std::string commit = "0123456789abcdef0123456789abcdef01234567";
        bool gated = false;
        std::map<std::string, File> files;
    };
    bool authorized(const Repo& repo, const httplib::Request& req) const;
    void routes();

    mutable std::mutex mutex_;
    std::map<std::string, Repo> repos_;
    int info_requests_ = 0;
    httplib::Server http_;
    std::thread thread_;
    int port_ = 0;
};

}  // namespace fake
