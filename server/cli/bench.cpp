// tinyllm bench: llama-bench's pp/tg. Prefill of a P-token prompt as one batch and decode of N tokens
// one at a time, each from an empty cache; medians and spread over repeats, decode bandwidth, peak RSS.
#include "gguf/gguf.h"
#include "llm/session.h"
#include "server/cli/cli.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sys/resource.h>

namespace cli {

namespace {

const char* USAGE =
    "usage: tinyllm bench [-m MODEL] [-p 128] [-n 64] [-t THREADS] [-r REPEATS] [--kv f16|f32] [--device NAME] [--json]\n"
    "  -p N     prompt tokens evaluated as one batch (pp); 0 skips it\n"
    "  -n N     tokens decoded one at a time (tg); 0 skips it\n"
    "  -t N     threads (default: all cores)\n"
    "  -r N     repetitions after one warm-up (default 5); medians are reported\n"
    "  --device NAME  CPU, or AMD / AMD:0 (the first AMD GPU) (default: $TINYLLM_DEVICE, else CPU)\n";

struct Summary {
    double median = 0, min = 0, max = 0;
};

Summary summarize(std::vector<double> v) {
    if (v.empty()) return {};
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return {med, v.front(), v.back()};
}

// Bytes a decode step reads: every weight once, except the embedding table (one row).
double weight_bytes_per_token(const gguf::File& f) {
    double bytes = 0;
    for (const gguf::TensorInfo& t : f.tensors())
        if (t.name != "token_embd.weight") bytes += double(t.n_bytes);
    if (!f.find_tensor("output.weight"))  // tied: the output matmul reads the embedding table
        if (const gguf::TensorInfo* e = f.find_tensor("token_embd.weight")) bytes += double(e->n_bytes);
    return bytes;
}

}  // namespace

int cmd_bench(const std::vector<std::string>& argv) {
    Args args(argv, "bench");
    if (args.flag("--help") || args.flag("-h")) {
        std::fputs(USAGE, stdout);
        return 0;
    }
    llm::SessionOptions so;
    so.model_path = builtin_model_path();
    int n_prompt = 128, n_gen = 64, n_threads = 0, repeats = 5;
    std::string kv = "f16";
    if (args.value("-m", "--model", so.model_path)) so.model_path = resolve_model(so.model_path);
    args.number("-p", n_prompt);
    args.number("-n", n_gen);
    args.number("-t", n_threads);
    args.number("-r", repeats);
    args.value("--kv", kv);
    so.device = device_flag(args);
    bool json = args.flag("--json");
    if (!args.positionals().empty()) args.usage_error("unexpected argument");
    if (n_prompt < 0 || n_gen < 0 || repeats < 1 || n_threads < 0) args.usage_error("counts must be positive");
    if (kv != "f16" && kv != "f32") args.usage_error("--kv must be f16 or f32");
    so.kv_f16 = kv == "f16";
    if (n_threads > 0) setenv("TINYLLM_THREADS", std::to_string(n_threads).c_str(), 1);  // read when the CPU device starts
    so.n_ctx = std::max(n_prompt, n_gen + 1) + 1;

    auto session = llm::open_session(so);
    auto file = gguf::File::open(so.model_path);
    int n_vocab = session->info().n_vocab;
    std::mt19937 rng(1234);
    std::vector<int32_t> prompt(std::max(n_prompt, 1));
    for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % n_vocab);

    std::vector<double> pp, tg;
    for (int rep = 0; rep <= repeats; rep++) {  // rep 0 warms up (compiles the graphs)
        if (n_prompt > 0) {
            session->reset();
            llm::GenerateOptions go;
            go.max_tokens = 0;
            auto r = session->generate(prompt, go);
            if (rep > 0) pp.push_back(n_prompt / (r.t_prefill_ms / 1e3));
        }
        if (n_gen > 0) {
            session->reset();
            llm::GenerateOptions go;
            go.max_tokens = n_gen;  // N forward passes: the 1-token prompt, then N-1 generated tokens
            go.stop_at_end = false;
            auto r = session->generate({prompt[0]}, go);
            if (rep > 0) tg.push_back(n_gen / ((r.t_prefill_ms + r.t_decode_ms) / 1e3));
        }
    }
    Summary spp = summarize(pp), stg = summarize(tg);
    double gbps = stg.median * weight_bytes_per_token(*file) / 1e9;
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = ru.ru_maxrss / 1024.0;
    const char* threads_env = std::getenv("TINYLLM_THREADS");
    int threads = threads_env ? std::atoi(threads_env) : 0;

    if (json) {
        nlohmann::json out = {{"model", so.model_path}, {"n_prompt", n_prompt}, {"n_gen", n_gen}, {"repeats", repeats},
                              {"threads", threads}, {"pp_tok_s", spp.median}, {"pp_min", spp.min}, {"pp_max", spp.max},
                              {"tg_tok_s", stg.median}, {"tg_min", stg.min}, {"tg_max", stg.max},
                              {"tg_gb_s", gbps}, {"peak_rss_mb", rss_mb}};
        std::printf("%s\n", out.dump().c_str());
    } else {
        std::printf("model     %s\n", so.model_path.c_str());
        if (n_prompt > 0)
            std::printf("pp%-6d  %9.2f tok/s  (min %.2f, max %.2f, %d runs)\n", n_prompt, spp.median, spp.min, spp.max, repeats);
        if (n_gen > 0)
            std::printf("tg%-6d  %9.2f tok/s  (min %.2f, max %.2f, %d runs)  %.1f GB/s of weights\n", n_gen, stg.median,
                        stg.min, stg.max, repeats, gbps);
        std::printf("peak RSS  %.1f MB\n", rss_mb);
    }
    return 0;
}

}  // namespace cli
