// The Hub's standard cache layout, shared with huggingface_hub, llama.cpp and others:
// <cache>/models--OWNER--REPO/{blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>,
// refs/<revision> = <commit>}; locks in <cache>/.locks/models--OWNER--REPO/<sha256>.lock.
#include "hub/hub_impl.h"

#include <openssl/evp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <unistd.h>

namespace hub {

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string folder_name(const std::string& repo) {
    std::string out = "models--";
    for (char c : repo) out += c == '/' ? std::string("--") : std::string(1, c);
    return out;
}

// OWNER/REPO from models--OWNER--REPO ("" for anything else).
std::string repo_of_folder(const std::string& name) {
    if (name.rfind("models--", 0) != 0) return "";
    std::string rest = name.substr(8);
    size_t sep = rest.find("--");
    if (sep == std::string::npos) return "";
    return rest.substr(0, sep) + "/" + rest.substr(sep + 2);
}

// A name beside `p` no other writer uses (other processes and other threads of this one), for
// writing a file whole and renaming it into place.
fs::path private_twin(const fs::path& p) {
    static std::atomic<uint64_t> counter{0};
    return p.string() + ".tmp" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

uint64_t file_size_or_zero(const fs::path& p) {
    std::error_code ec;
    auto n = fs::file_size(p, ec);
    return ec ? 0 : n;
}

// The GGUF files of one snapshot, as repo paths.
std::vector<std::string> snapshot_ggufs(const fs::path& snapshot) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(snapshot, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() > 5 && name.substr(name.size() - 5) == ".gguf" && fs::exists(it->path()))
            out.push_back(it->path().lexically_relative(snapshot).generic_string());  // not relative(): it follows the link
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

Settings Settings::from_env() {
    Settings s;
    if (std::string e = env("HF_ENDPOINT"); !e.empty()) s.endpoint = e;
    while (!s.endpoint.empty() && s.endpoint.back() == '/') s.endpoint.pop_back();
    s.token = env("HF_TOKEN");
    const std::string offline = env("HF_HUB_OFFLINE");
    s.offline = offline == "1" || offline == "true" || offline == "TRUE" || offline == "yes" || offline == "ON";
    if (std::string c = env("HF_HUB_CACHE"); !c.empty()) s.cache_dir = c;
    else if (std::string h = env("HF_HOME"); !h.empty()) s.cache_dir = fs::path(h) / "hub";
    else if (std::string home = env("HOME"); !home.empty()) s.cache_dir = fs::path(home) / ".cache" / "huggingface" / "hub";
    return s;  // no cache folder at all: pull says so (list finds nothing)
}

fs::path repo_dir(const Settings& settings, const std::string& repo) { return settings.cache_dir / folder_name(repo); }

fs::path blob_path(const Settings& settings, const std::string& repo, const std::string& sha256) {
    return repo_dir(settings, repo) / "blobs" / sha256;
}

fs::path snapshot_path(const Settings& settings, const std::string& repo, const std::string& commit, const std::string& file) {
    return repo_dir(settings, repo) / "snapshots" / commit / file;
}

fs::path lock_path(const Settings& settings, const std::string& repo, const std::string& sha256) {
    return settings.cache_dir / ".locks" / folder_name(repo) / (sha256 + ".lock");
}

void write_ref(const Settings& settings, const std::string& repo, const std::string& revision, const std::string& commit) {
    if (revision == commit) return;  // a pinned commit needs no ref
    fs::path ref = repo_dir(settings, repo) / "refs" / revision;
    fs::create_directories(ref.parent_path());
    fs::path tmp = private_twin(ref);
    std::ofstream(tmp) << commit;
    fs::rename(tmp, ref);  // atomic: a concurrent pull reads the old ref or the new one, never half of one
}

std::string read_ref(const Settings& settings, const std::string& repo, const std::string& revision) {
    std::ifstream in(repo_dir(settings, repo) / "refs" / revision);
    std::string commit;
    if (in) in >> commit;
    if (commit.empty() && fs::is_directory(repo_dir(settings, repo) / "snapshots" / revision)) return revision;
    return commit;
}

// The link is made under a private name and renamed over the old one, so a concurrent pull of the
// same file never sees it missing.
void link_snapshot(const fs::path& snapshot_file, const fs::path& blob) {
    fs::create_directories(snapshot_file.parent_path());
    const fs::path tmp = private_twin(snapshot_file);
    std::error_code ec;
    fs::create_symlink(fs::relative(blob, snapshot_file.parent_path()), tmp, ec);
    if (ec)  // file systems without symlinks get a copy
        fs::copy_file(blob, tmp, fs::copy_options::overwrite_existing);
    fs::rename(tmp, snapshot_file);
}

std::string sha256_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("[hub] cannot read " + path.string());
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    std::vector<char> buf(1 << 20);
    while (in) {
        in.read(buf.data(), std::streamsize(buf.size()));
        EVP_DigestUpdate(ctx, buf.data(), size_t(in.gcount()));
    }
    unsigned char digest[32];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx, digest, &n);
    EVP_MD_CTX_free(ctx);
    static const char* HEX = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; i++) out += {HEX[digest[i] >> 4], HEX[digest[i] & 15]};
    return out;
}

std::string human_bytes(uint64_t n) {
    const char* units[] = {"B", "kB", "MB", "GB", "TB"};
    double v = double(n);
    int u = 0;
    while (v >= 1000 && u < 4) v /= 1000, u++;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
    return buf;
}

std::optional<PullResult> find_cached(const Settings& settings, const ModelRef& ref) {
    const std::string commit = read_ref(settings, ref.repo, ref.revision);
    if (commit.empty()) return std::nullopt;
    const fs::path snapshot = repo_dir(settings, ref.repo) / "snapshots" / commit;
    std::vector<std::string> files;
    try {
        files = pick_gguf(snapshot_ggufs(snapshot), ref);
    } catch (const Error&) {
        return std::nullopt;
    }
    PullResult result;
    for (const auto& f : files) {
        fs::path p = snapshot / f;
        if (!fs::exists(p)) return std::nullopt;  // a part is missing: not complete in the cache
        result.parts.push_back(p);
    }
    result.path = result.parts.front();
    return result;
}

std::vector<CachedModel> list_cached(const Settings& settings) {
    std::vector<CachedModel> out;
    std::error_code ec;
    if (!fs::is_directory(settings.cache_dir, ec)) return out;
    std::vector<fs::path> repos;
    for (const auto& e : fs::directory_iterator(settings.cache_dir, ec)) repos.push_back(e.path());
    std::sort(repos.begin(), repos.end());
    for (const fs::path& dir : repos) {
        const std::string repo = repo_of_folder(dir.filename().string());
        if (repo.empty() || !fs::is_directory(dir / "snapshots", ec)) continue;
        std::set<std::string> seen;  // a file in several snapshots is listed once, from the newest ref
        std::vector<fs::path> snapshots;
        if (std::string main = read_ref(settings, repo, "main"); !main.empty()) snapshots.push_back(dir / "snapshots" / main);
        for (const auto& s : fs::directory_iterator(dir / "snapshots", ec)) snapshots.push_back(s.path());
        for (const fs::path& snapshot : snapshots) {
            const auto ggufs = snapshot_ggufs(snapshot);
            for (const std::string& file : ggufs) {
                const std::string base = fs::path(file).filename().string();
                if (base.find("-of-") != std::string::npos && base.find("-00001-of-") == std::string::npos) continue;
                if (!seen.insert(file).second) continue;
                CachedModel m;
                m.repo = repo;
                m.file = file;
                m.quant = quant_of(base);
                m.path = snapshot / file;
                ModelRef ref{repo, "", file};
                for (const std::string& part : pick_gguf(ggufs, ref)) m.size += file_size_or_zero(snapshot / part);
                out.push_back(m);
            }
        }
        // A quant shared by two files of one repo cannot name one of them: those use the file name.
        std::map<std::string, int> per_quant;
        for (const auto& m : out) if (m.repo == repo) per_quant[m.quant]++;
        for (auto& m : out)
            if (m.repo == repo) m.name = !m.quant.empty() && per_quant[m.quant] == 1 ? repo + ":" + m.quant : repo + "/" + m.file;
    }
    return out;
}

std::vector<fs::path> remove_cached(const Settings& settings, const std::string& name) {
    std::vector<CachedModel> models = list_cached(settings);
    auto it = std::find_if(models.begin(), models.end(), [&](const CachedModel& m) {
        std::string lower_name = name, lower_m = m.name;
        std::transform(lower_name.begin(), lower_name.end(), lower_name.begin(), ::tolower);
        std::transform(lower_m.begin(), lower_m.end(), lower_m.begin(), ::tolower);
        return lower_m == lower_name || m.repo + "/" + m.file == name;
    });
    if (it == models.end()) throw Error("[hub] no cached model named '" + name + "' (see tinyllm list)");
    const fs::path repo = repo_dir(settings, it->repo);
    fs::path snapshot_root = it->path;  // snapshots/<commit>: the model's path less its repo path
    const fs::path file = it->file;
    for (auto part = file.begin(); part != file.end(); ++part) snapshot_root = snapshot_root.parent_path();
    std::vector<fs::path> removed;
    std::error_code ec;
    const std::vector<std::string> parts = pick_gguf(snapshot_ggufs(snapshot_root), ModelRef{it->repo, "", it->file});
    std::set<fs::path> blobs;
    for (const std::string& part : parts) {
        fs::path link = snapshot_root / part;
        if (fs::is_symlink(link, ec)) blobs.insert(fs::weakly_canonical(link, ec));
        if (fs::remove(link, ec)) removed.push_back(link);
    }
    // A blob goes when no snapshot of the repo still points at it.
    for (auto it2 = fs::recursive_directory_iterator(repo / "snapshots", ec); !ec && it2 != fs::recursive_directory_iterator(); it2.increment(ec))
        if (fs::is_symlink(it2->path())) blobs.erase(fs::weakly_canonical(it2->path(), ec));
    for (const fs::path& blob : blobs)
        if (fs::remove(blob, ec)) removed.push_back(blob);
    return removed;
}

}  // namespace hub
