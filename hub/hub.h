// The Hugging Face Hub client: model names (OWNER/REPO[:QUANT], OWNER/REPO/FILE.gguf), the Hub's HTTP
// API (model info, resolve), resumable verified downloads, and the Hub's standard cache layout, so a
// model fetched by other tools is found and one fetched here is found by them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace hub {

namespace fs = std::filesystem;

// Anything that goes wrong talking to the Hub or the cache; the message starts with "[hub]".
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Where and how to reach the Hub, read from the environment the way huggingface_hub reads it.
struct Settings {
    std::string endpoint = "https://huggingface.co";  // $HF_ENDPOINT (a mirror, or the tests' fake hub)
    std::string token;                                 // $HF_TOKEN, sent as a bearer token
    bool offline = false;                              // $HF_HUB_OFFLINE=1: never touch the network
    fs::path cache_dir;                                // $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
    int retries = 4;                                   // transient failures retried this often per file
    int backoff_ms = 500;                              // first retry delay, doubled each time
    static Settings from_env();
};

// A model name: OWNER/REPO[:QUANT] picks a GGUF by quant, OWNER/REPO/FILE.gguf one exact file.
struct ModelRef {
    std::string repo;               // OWNER/REPO
    std::string quant;              // "" = the default pick (Q4_K_M, else the only/first GGUF)
    std::string file;               // exact path in the repo, or ""
    std::string revision = "main";
    // Parses a model name; nullopt when `spec` is not one (a file path, say). "hf.co/" is allowed in front.
    static std::optional<ModelRef> parse(const std::string& spec);
    std::string name() const;  // OWNER/REPO:QUANT or OWNER/REPO/FILE
};

// One file of a repo's revision, with its LFS content hash when it is stored in LFS.
struct RepoFile {
    std::string path;
    uint64_t size = 0;
    std::string sha256;  // "" when the file is not in LFS
};

struct RepoInfo {
    std::string commit;  // the revision's commit hash
    std::vector<RepoFile> files;
};

// GET /api/models/{repo}/revision/{revision}?blobs=true (names, sizes, LFS sha256).
RepoInfo fetch_repo_info(const Settings& settings, const std::string& repo, const std::string& revision);

// The GGUF files `ref` names among `paths`: every part of a split model (-00001-of-0000N.gguf), in
// order. Throws Error listing what the repo has when the quant is missing or ambiguous.
std::vector<std::string> pick_gguf(const std::vector<std::string>& paths, const ModelRef& ref);

// The quant label in a GGUF file name ("Q4_K_M", "IQ4_XS", "F16", ...), or "".
std::string quant_of(const std::string& file_name);

// What a pull reports, in ollama's /api/pull vocabulary: "pulling manifest", then per file
// "pulling <digest>" with total/completed bytes, "verifying sha256 digest", and "success".
struct Progress {
    std::string status{};
    std::string file{};    // repo path of the file being fetched ("" for manifest and success)
    std::string digest{};  // "sha256:<hex>"
    uint64_t total = 0, completed = 0;
};
using ProgressFn = std::function<void(const Progress&)>;

// Progress for people: a bar with bytes, speed and ETA when `out` is a terminal, plain lines otherwise.
ProgressFn terminal_progress(std::FILE* out);

struct PullResult {
    fs::path path;               // the model's (first) file in the snapshot
    std::vector<fs::path> parts; // every file of a split model
    bool downloaded = false;     // false: everything was in the cache already
};

// Fetches the model `ref` names into the cache (what is already there is kept, partial files resume)
// and returns its snapshot paths. Offline: resolves from the cache only.
PullResult pull(const Settings& settings, const ModelRef& ref, const ProgressFn& progress = {});

// Resolves `ref` from the cache alone (no network); nullopt when it is not there.
std::optional<PullResult> find_cached(const Settings& settings, const ModelRef& ref);

// The models in the cache: one entry per GGUF (split models once, by their first part).
struct CachedModel {
    std::string name;   // OWNER/REPO:QUANT, or OWNER/REPO/FILE when the name carries no quant
    std::string repo, quant, file;
    uint64_t size = 0;  // bytes, every part
    fs::path path;      // first part in the snapshot
};
std::vector<CachedModel> list_cached(const Settings& settings);

// Removes one cached model (its snapshot links and the blobs nothing else uses); returns the files
// removed. Throws Error when no cached model has that name.
std::vector<fs::path> remove_cached(const Settings& settings, const std::string& name);

// The Hub cache's folder for a repo: models--OWNER--REPO.
fs::path repo_dir(const Settings& settings, const std::string& repo);

}  // namespace hub
