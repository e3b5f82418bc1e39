// The Hub's HTTP API as huggingface_hub uses it: model info of a revision (files, sizes, LFS sha256),
// picking the GGUF a name means, and pull (info, then every part through /{repo}/resolve/{commit}/{file}).
#include "hub/hub_impl.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <regex>
#include <thread>

namespace hub {

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// -00001-of-00003.gguf: the split's part number and count, {0, 0} for a single file.
std::pair<int, int> split_part(const std::string& path) {
    static const std::regex SPLIT(R"(-(\d{5})-of-(\d{5})\.gguf$)", std::regex::icase);
    std::smatch m;
    if (!std::regex_search(path, m, SPLIT)) return {0, 0};
    return {std::stoi(m[1]), std::stoi(m[2])};
}

// The name a split's parts share (the path without -0000K-of-0000N), the path itself otherwise.
std::string split_base(const std::string& path) {
    static const std::regex SPLIT(R"(-\d{5}-of-\d{5}\.gguf$)", std::regex::icase);
    return std::regex_replace(path, SPLIT, ".gguf");
}

// Does `quant` appear in `path` as a whole label (Q4_K does not match Q4_K_M, Q4_0 not IQ4_0)?
bool has_quant(const std::string& path, const std::string& quant) {
    const std::string p = lower(path), q = lower(quant);
    for (size_t at = p.find(q); at != std::string::npos; at = p.find(q, at + 1)) {
        const bool left = at == 0 || !std::isalnum((unsigned char)p[at - 1]);
        const size_t end = at + q.size();
        const bool right = end == p.size() || !(std::isalnum((unsigned char)p[end]) || p[end] == '_');
        if (left && right) return true;
    }
    return false;
}

std::string list_models(const std::vector<std::string>& models) {
    std::string out;
    for (const auto& m : models) {
        const std::string q = quant_of(m);
        out += "\n  " + (q.empty() ? m : q + "  (" + m + ")");
    }
    return out;
}

}  // namespace

std::optional<ModelRef> ModelRef::parse(const std::string& spec) {
    std::string s = spec;
    for (const char* prefix : {"hf.co/", "huggingface.co/", "https://huggingface.co/"})
        if (s.rfind(prefix, 0) == 0) s = s.substr(std::string(prefix).size());
    static const std::regex NAME(R"(^([A-Za-z0-9][A-Za-z0-9._-]*)/([A-Za-z0-9][A-Za-z0-9._-]*)(?:(/.+\.gguf)|:([A-Za-z0-9._-]+))?$)",
                                 std::regex::icase);
    std::smatch m;
    if (!std::regex_match(s, m, NAME)) return std::nullopt;
    ModelRef ref;
    ref.repo = m[1].str() + "/" + m[2].str();
    if (ends_with(lower(ref.repo), ".gguf")) return std::nullopt;  // dir/model.gguf: a file path, not a repo
    if (m[3].matched) ref.file = m[3].str().substr(1);
    if (m[4].matched) ref.quant = m[4].str();
    return ref;
}

std::string ModelRef::name() const {
    if (!file.empty()) return repo + "/" + file;
    return quant.empty() ? repo : repo + ":" + quant;
}

std::string quant_of(const std::string& file_name) {
    // Longest labels first so Q4_K_M wins over Q4_K, IQ4_XS over Q4_0-style prefixes.
    static const char* QUANTS[] = {"IQ2_XXS", "IQ3_XXS", "IQ1_S", "IQ1_M", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XS", "IQ3_S", "IQ3_M",
                                   "IQ4_XS", "IQ4_NL", "Q2_K_S", "Q2_K_L", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M",
                                   "Q4_K_L", "Q5_K_S", "Q5_K_M", "Q5_K_L", "Q6_K_L", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
                                   "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q8_K", "TQ1_0",
                                   "TQ2_0", "MXFP4", "BF16", "F16", "F32", "FP16", "FP32"};
    for (const char* q : QUANTS)
        if (has_quant(file_name, q)) return q;
    return "";
}

std::vector<std::string> pick_gguf(const std::vector<std::string>& paths, const ModelRef& ref) {
    // One candidate per model: single files and the first part of each split.
    std::vector<std::string> models;
    for (const auto& p : paths) {
        if (!ends_with(lower(p), ".gguf")) continue;
        auto [part, count] = split_part(p);
        if (count > 0 && part != 1) continue;
        models.push_back(p);
    }
    std::sort(models.begin(), models.end());
    std::vector<std::string> chosen;
    if (!ref.file.empty()) {
        if (std::find(paths.begin(), paths.end(), ref.file) == paths.end())
            throw Error("[hub] no such file " + ref.repo + "/" + ref.file + "; the repo has:" + list_models(models));
        auto [part, count] = split_part(ref.file);
        const std::string first = count > 0 ? split_base(ref.file) : ref.file;
        for (const auto& m : models)
            if ((count > 0 && split_base(m) == first) || m == ref.file) chosen.push_back(m);
    } else if (!ref.quant.empty()) {
        for (const auto& m : models)
            if (has_quant(m, ref.quant)) chosen.push_back(m);
        if (chosen.empty()) throw Error("[hub] " + ref.repo + " has no " + ref.quant + " GGUF; it has:" + list_models(models));
        if (chosen.size() > 1)
            throw Error("[hub] " + ref.repo + ":" + ref.quant + " is ambiguous; name one file (OWNER/REPO/FILE.gguf):" + list_models(chosen));
    } else {
        // Vision projectors (mmproj-*.gguf) ride along with a model; they are not one to pick.
        std::vector<std::string> main;
        for (const auto& m : models)
            if (lower(fs::path(m).filename().string()).rfind("mmproj", 0) != 0) main.push_back(m);
        if (main.empty()) throw Error("[hub] " + ref.repo + " has no GGUF file");
        for (const auto& m : main)
            if (has_quant(m, "Q4_K_M")) chosen.push_back(m);
        if (chosen.size() != 1) chosen = {main.front()};
    }
    if (chosen.empty()) throw Error("[hub] no GGUF model in " + ref.repo + " matches " + ref.name());
    // Every part of a split, in order; a missing part is an error (the model cannot load without it).
    auto [part, count] = split_part(chosen.front());
    if (count == 0) return chosen;
    const std::string base = split_base(chosen.front());
    std::vector<std::string> parts(static_cast<size_t>(count));
    for (const auto& p : paths) {
        auto [k, n] = split_part(p);
        if (n == count && split_base(p) == base && k >= 1 && k <= n) parts[size_t(k - 1)] = p;
    }
    for (int k = 0; k < count; k++)
        if (parts[size_t(k)].empty())
            throw Error("[hub] " + chosen.front() + " is split in " + std::to_string(count) + " parts but part " + std::to_string(k + 1) + " is missing");
    return parts;
}

RepoInfo fetch_repo_info(const Settings& settings, const std::string& repo, const std::string& revision) {
    if (settings.offline) throw Error("[hub] offline (HF_HUB_OFFLINE=1): cannot ask the Hub about " + repo);
    const std::string url = settings.endpoint + "/api/models/" + repo + "/revision/" + url_encode_path(revision) + "?blobs=true";
    HttpResult r;
    for (int attempt = 0;; attempt++) {
        r = http_get(settings, url);
        if (!is_transient(r) || attempt >= settings.retries) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(settings.backoff_ms << attempt));
    }
    if (r.status != 200) throw_http_error(r, repo, "");
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(r.body);
    } catch (const nlohmann::json::exception&) {
        throw Error("[hub] the model info of " + repo + " is not JSON (is HF_ENDPOINT a Hub?)");
    }
    RepoInfo info;
    info.commit = j.value("sha", "");
    if (info.commit.empty() || !j.contains("siblings") || !j["siblings"].is_array())
        throw Error("[hub] the model info of " + repo + " has no commit or file list");
    for (const auto& s : j["siblings"]) {
        RepoFile f;
        f.path = s.value("rfilename", "");
        if (s.contains("size") && s["size"].is_number_unsigned()) f.size = s["size"].get<uint64_t>();
        if (s.contains("lfs") && s["lfs"].is_object()) {
            f.sha256 = s["lfs"].value("sha256", "");
            if (s["lfs"].contains("size") && s["lfs"]["size"].is_number_unsigned()) f.size = s["lfs"]["size"].get<uint64_t>();
        }
        if (!f.path.empty()) info.files.push_back(f);
    }
    return info;
}

PullResult pull(const Settings& settings, const ModelRef& ref, const ProgressFn& progress) {
    auto report = [&](Progress p) { if (progress) progress(p); };
    if (settings.cache_dir.empty()) throw Error("[hub] no cache folder: set HF_HUB_CACHE, HF_HOME or HOME");
    if (settings.offline) {
        if (auto cached = find_cached(settings, ref)) return *cached;
        throw Error("[hub] offline (HF_HUB_OFFLINE=1) and " + ref.name() + " is not in the cache " + settings.cache_dir.string());
    }
    report({.status = "pulling manifest"});
    const RepoInfo info = fetch_repo_info(settings, ref.repo, ref.revision);
    std::vector<std::string> paths;
    for (const auto& f : info.files) paths.push_back(f.path);
    const std::vector<std::string> files = pick_gguf(paths, ref);
    write_ref(settings, ref.repo, ref.revision, info.commit);
    PullResult result;
    for (const std::string& path : files) {
        const RepoFile& file = *std::find_if(info.files.begin(), info.files.end(), [&](const RepoFile& f) { return f.path == path; });
        if (file.sha256.empty()) throw Error("[hub] " + ref.repo + "/" + path + " is not stored in LFS: no sha256 to verify it by");
        const fs::path blob = blob_path(settings, ref.repo, file.sha256);
        if (fetch_blob(settings, ref.repo, info.commit, file, blob, progress)) result.downloaded = true;
        const fs::path link = snapshot_path(settings, ref.repo, info.commit, path);
        link_snapshot(link, blob);
        result.parts.push_back(link);
    }
    result.path = result.parts.front();
    report({.status = "success"});
    return result;
}

}  // namespace hub
