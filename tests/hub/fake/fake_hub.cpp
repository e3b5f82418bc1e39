// The fake Hub's routes (see fake_hub.h). The layout follows huggingface.co: the API answers under
// /api/models/OWNER/REPO/revision/REV, files resolve under /OWNER/REPO/resolve/REV/PATH and LFS files
// redirect (302) to a content host, here /cdn/<sha256>.
#include "hub/fake/fake_hub.h"

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <chrono>

namespace fake {

std::string sha256_hex(const std::string& bytes) {
    unsigned char digest[32];
    unsigned int n = 0;
    EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr);
    static const char* HEX = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; i++) out += {HEX[digest[i] >> 4], HEX[digest[i] & 15]};
    return out;
}

FakeHub::FakeHub() {
    routes();
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    for (int i = 0; i < 5000 && !http_.is_running(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FakeHub::~FakeHub() {
    http_.stop();
    if (thread_.joinable()) thread_.join();
}

std::string FakeHub::endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

void FakeHub::add_file(const std::string& repo, const std::string& path, std::string content) {
    std::lock_guard lock(mutex_);
    File& f = repos_[repo].files[path];
    f.sha256 = f.listed_sha256 = sha256_hex(content);
    f.content = std::move(content);
}

void FakeHub::set_gated(const std::string& repo) {
    std::lock_guard lock(mutex_);
    repos_[repo].gated = true;
}

void FakeHub::set_commit(const std::string& repo, const std::string& commit) {
    std::lock_guard lock(mutex_);
    repos_[repo].commit = commit;
}

void FakeHub::list_wrong_sha256(const std::string& repo, const std::string& path) {
    std::lock_guard lock(mutex_);
    repos_[repo].files[path].listed_sha256 = sha256_hex("not the content");
}

void FakeHub::list_size(const std::string& repo, const std::string& path, uint64_t size) {
    std::lock_guard lock(mutex_);
    repos_[repo].files[path].listed_size = size;
}

void FakeHub::cut_once(const std::string& repo, const std::string& path, uint64_t offset) {
    std::lock_guard lock(mutex_);
    File& f = repos_[repo].files[path];
    f.cut_at = offset;
    f.cut_repeat = false;
}

void FakeHub::cut_always(const std::string& repo, const std::string& path, uint64_t offset) {
    std::lock_guard lock(mutex_);
    File& f = repos_[repo].files[path];
    f.cut_at = offset;
    f.cut_repeat = true;
}

void FakeHub::slow_down(const std::string& repo, const std::string& path, int ms) {
    std::lock_guard lock(mutex_);
    repos_[repo].files[path].delay_ms = ms;
}

uint64_t FakeHub::bytes_served(const std::string& repo, const std::string& path) const {
    std::lock_guard lock(mutex_);
    auto r = repos_.find(repo);
    if (r == repos_.end()) return 0;
    auto f = r->second.files.find(path);
    return f == r->second.files.end() ? 0 : f->second.served;
}

int FakeHub::info_requests() const {
    std::lock_guard lock(mutex_);
    return info_requests_;
}

bool FakeHub::authorized(const Repo& repo, const httplib::Request& req) const {
    return !repo.gated || req.get_header_value("Authorization") == std::string("Bearer ") + TOKEN;
}

void FakeHub::routes() {
    auto refuse = [](httplib::Response& res, int status, const char* code, const std::string& message) {
        res.status = status;
        res.set_header("X-Error-Code", code);
        res.set_content(nlohmann::json{{"error", message}}.dump(), "application/json");
    };

    http_.Get(R"(/api/models/([^/]+/[^/]+)/revision/([^/]+))", [this, refuse](const httplib::Request& req, httplib::Response& res) {
        std::lock_guard lock(mutex_);
        info_requests_++;
        auto it = repos_.find(req.matches[1]);
        if (it == repos_.end()) return refuse(res, 404, "RepoNotFound", "Repository not found");
        const Repo& repo = it->second;
        if (!authorized(repo, req)) return refuse(res, 401, "GatedRepo", "Access to this model is restricted");
        if (req.matches[2] != "main" && req.matches[2] != repo.commit) return refuse(res, 404, "RevisionNotFound", "Invalid rev id");
        nlohmann::json siblings = nlohmann::json::array();
        for (const auto& [path, f] : repo.files) {
            const uint64_t size = f.listed_size != UINT64_MAX ? f.listed_size : f.content.size();
            siblings.push_back({{"rfilename", path}, {"size", size}, {"blobId", f.sha256.substr(0, 40)},
                                {"lfs", {{"sha256", f.listed_sha256}, {"size", size}, {"pointerSize", 134}}}});
        }
        res.set_content(nlohmann::json{{"id", req.matches[1]}, {"sha", repo.commit}, {"siblings", siblings}}.dump(), "application/json");
    });

    http_.Get(R"(/([^/]+/[^/]+)/resolve/([^/]+)/(.+))", [this, refuse](const httplib::Request& req, httplib::Response& res) {
        std::lock_guard lock(mutex_);
        auto it = repos_.find(req.matches[1]);
        if (it == repos_.end()) return refuse(res, 404, "RepoNotFound", "Repository not found");
        const Repo& repo = it->second;
        if (!authorized(repo, req)) return refuse(res, 401, "GatedRepo", "Access to this model is restricted");
        auto f = repo.files.find(req.matches[3]);
        if (f == repo.files.end()) return refuse(res, 404, "EntryNotFound", "Entry not found");
        res.status = 302;
        res.set_header("Location", "/cdn/" + std::string(req.matches[1]) + "/" + f->second.sha256);
        res.set_header("X-Repo-Commit", repo.commit);
        res.set_header("X-Linked-Etag", "\"" + f->second.sha256 + "\"");
        res.set_header("X-Linked-Size", std::to_string(f->second.content.size()));
    });

    // The content host: the token is not sent here (another origin on the real Hub; curl drops it
    // on a redirect to another host, and this one needs none).
    http_.Get(R"(/cdn/([^/]+/[^/]+)/([0-9a-f]{64}))", [this](const httplib::Request& req, httplib::Response& res) {
        std::lock_guard lock(mutex_);
        File* file = nullptr;
        auto r = repos_.find(req.matches[1]);
        if (r != repos_.end())
            for (auto& [path, f] : r->second.files)
                if (f.sha256 == req.matches[2]) file = &f;
        if (!file) {
            res.status = 404;
            return;
        }
        res.set_header("Accept-Ranges", "bytes");
        const uint64_t cut = file->cut_at;
        if (!file->cut_repeat) file->cut_at = UINT64_MAX;
        res.set_content_provider(file->content.size(), "application/octet-stream",
                                 [this, file, cut](size_t offset, size_t length, httplib::DataSink& sink) {
            const size_t chunk = std::min<size_t>(length, 64 << 10);
            size_t n = chunk;
            int delay = 0;
            {
                std::lock_guard lock(mutex_);
                if (offset >= cut) return false;  // the injected fault: drop the connection here
                n = size_t(std::min<uint64_t>(chunk, cut - offset));
                file->served += n;
                delay = file->delay_ms;
            }
            if (delay) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
            return sink.write(file->content.data() + offset, n);
        });
    });
}

}  // namespace fake
