// tinyllm pull / list / rm: models by name from the Hugging Face Hub into its standard cache, and
// resolve_model, through which every command's -m accepts OWNER/REPO[:QUANT] (pulled on first use).
#include "cli/cli.h"
#include "hub/hub.h"

#include <cstdio>
#include <filesystem>

namespace cli {

namespace {

constexpr const char* PULL_USAGE = R"(usage: tinyllm pull OWNER/REPO[:QUANT] | OWNER/REPO/FILE.gguf
  Downloads a GGUF model from the Hugging Face Hub into its cache (see tinyllm list). QUANT picks the
  file whose name carries it (case-insensitive; default Q4_K_M, else the only/first GGUF); every part
  of a split model is fetched. A partial download resumes; the sha256 is checked.
  Environment: HF_ENDPOINT (mirror), HF_TOKEN (gated/private repos), HF_HUB_OFFLINE=1 (cache only),
  HF_HUB_CACHE / HF_HOME (cache folder, default ~/.cache/huggingface/hub), HTTPS_PROXY.
)";

constexpr const char* LIST_USAGE = R"(usage: tinyllm list
  The models in the Hugging Face Hub cache: name, quant, size and path. Any name works as -m NAME.
)";

constexpr const char* RM_USAGE = R"(usage: tinyllm rm NAME
  Removes a model listed by tinyllm list from the cache (its snapshot file and unused blobs).
)";

hub::ModelRef parse_name(Args& args, const std::string& name) {
    auto ref = hub::ModelRef::parse(name);
    if (!ref) args.usage_error("'" + name + "' is not a model name (OWNER/REPO[:QUANT] or OWNER/REPO/FILE.gguf)");
    return *ref;
}

}  // namespace

std::string resolve_model(const std::string& spec) {
    std::error_code ec;
    if (std::filesystem::exists(spec, ec)) return spec;
    auto ref = hub::ModelRef::parse(spec);
    if (!ref) return spec;  // a path: loading says it is missing
    const hub::Settings settings = hub::Settings::from_env();
    if (auto cached = hub::find_cached(settings, *ref)) return cached->path.string();
    std::fprintf(stderr, "%s is not in the cache: pulling it\n", ref->name().c_str());
    return hub::pull(settings, *ref, hub::terminal_progress(stderr)).path.string();
}

int cmd_pull(const std::vector<std::string>& argv) {
    Args args(argv, "pull");
    if (args.flag("--help") || args.flag("-h")) {
        std::fputs(PULL_USAGE, stdout);
        return 0;
    }
    auto pos = args.positionals();
    if (pos.size() != 1) args.usage_error("needs one model name");
    const hub::ModelRef ref = parse_name(args, pos[0]);
    hub::PullResult r = hub::pull(hub::Settings::from_env(), ref, hub::terminal_progress(stderr));
    std::printf("%s %s\n", r.downloaded ? "pulled" : "already in the cache:", r.path.string().c_str());
    return 0;
}

int cmd_list(const std::vector<std::string>& argv) {
    Args args(argv, "list");
    if (args.flag("--help") || args.flag("-h")) {
        std::fputs(LIST_USAGE, stdout);
        return 0;
    }
    if (!args.positionals().empty()) args.usage_error("takes no arguments");
    const hub::Settings settings = hub::Settings::from_env();
    const auto models = hub::list_cached(settings);
    if (models.empty()) {
        std::printf("no models in %s (tinyllm pull OWNER/REPO[:QUANT] adds one)\n", settings.cache_dir.string().c_str());
        return 0;
    }
    size_t width = 4;
    for (const auto& m : models) width = std::max(width, m.name.size());
    std::printf("%-*s  %-8s  %9s  %s\n", int(width), "NAME", "QUANT", "SIZE", "PATH");
    for (const auto& m : models) {
        char size[32];
        std::snprintf(size, sizeof size, "%.1f MB", double(m.size) / 1e6);
        std::printf("%-*s  %-8s  %9s  %s\n", int(width), m.name.c_str(), m.quant.empty() ? "-" : m.quant.c_str(), size,
                    m.path.string().c_str());
    }
    return 0;
}

int cmd_rm(const std::vector<std::string>& argv) {
    Args args(argv, "rm");
    if (args.flag("--help") || args.flag("-h")) {
        std::fputs(RM_USAGE, stdout);
        return 0;
    }
    auto pos = args.positionals();
    if (pos.size() != 1) args.usage_error("needs one model name (see tinyllm list)");
    for (const auto& path : hub::remove_cached(hub::Settings::from_env(), pos[0])) std::printf("removed %s\n", path.string().c_str());
    return 0;
}

}  // namespace cli
