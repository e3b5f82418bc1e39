// tinyllm bench: llama-bench's pp/tg. Prefill of a P-token prompt as one batch and decode of N tokens
// one at a time, each from an empty cache or after D cached tokens (-d, llama-bench's depth); medians
// and spread over repeats, decode bandwidth, peak RSS.
// With --parallel, llama-batched-bench's aggregate figures: S sequences prefilled and decoded together.
#include "cli/cli.h"
#include "engine/tensor.h"
#include "gguf/gguf.h"
#include "llm/batch.h"
#include "llm/sampler.h"
#include "llm/session.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <sys/resource.h>

namespace cli {

namespace {

const char* USAGE =
    "usage: tinyllm bench [-m MODEL] [-p 128] [-n 64] [-d 0] [-t THREADS] [-r REPEATS] [--kv f16|f32|q8_0|q4_0]\n"
    "                     [--device NAME] [--parallel 1,2,4,8] [--json]\n"
    "  -p N     prompt tokens evaluated as one batch (pp); 0 skips it\n"
    "  -n N     tokens decoded one at a time (tg); 0 skips it\n"
    "  -d D     both after D tokens already in the cache (their prefill is not timed)\n"
    "  -t N     threads (default: all cores)\n"
    "  -r N     repetitions after one warm-up (default 5); medians are reported\n"
    "  --kv TYPE  KV cache type: f16 (default), f32, q8_0 or q4_0\n"
    "  --device NAME  CPU, or AMD / AMD:0 (the first AMD GPU) (default: $TINYLLM_DEVICE, else CPU)\n"
    "  --parallel 1,2,4,8  for each count S: S different P-token prompts prefilled together, then N tokens\n"
    "           decoded by each, all in one batch (each from an empty cache); aggregate tok/s over all S\n";

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

// llama-batched-bench's PP and TG: for each sequence count, S random P-token prompts through one
// BatchRunner (no prefix sharing), then N greedy tokens each; tok/s summed over the sequences.
nlohmann::json bench_parallel(const std::string& path, const std::vector<int>& counts, int n_prompt, int n_gen, int repeats, gguf::Type kv_type) {
    auto model = llm::Model::load(path);
    const int n_vocab = model->config().n_vocab;
    std::mt19937 rng(1234);
    nlohmann::json rows = nlohmann::json::array();
    for (int S : counts) {
        llm::BatchOptions bo;
        bo.n_ctx = n_prompt + n_gen + 1, bo.max_seqs = S, bo.token_budget = std::max(S, 512), bo.kv_type = kv_type, bo.prefix_cache = false;
        llm::BatchRunner runner(*model, bo);
        std::vector<double> pp, tg;
        for (int rep = 0; rep <= repeats; rep++) {  // rep 0 warms up (captures the graph)
            std::vector<int> ids;
            for (int i = 0; i < S; i++) {
                llm::BatchRequest q;
                for (int k = 0; k < std::max(n_prompt, 1); k++) q.prompt.push_back(int32_t(rng() % uint32_t(n_vocab)));
                q.max_tokens = n_gen + 1;
                ids.push_back(runner.add(q));
            }
            auto t0 = std::chrono::steady_clock::now();
            std::vector<std::pair<int, int32_t>> next;  // each sequence's greedy token after its last logits
            while (int(next.size()) < S)
                for (const llm::SeqLogits& l : runner.step()) next.push_back({l.id, llm::argmax(l.logits)});
            auto t1 = std::chrono::steady_clock::now();
            for (int step = 0; step < n_gen; step++) {
                for (auto [id, token] : next) runner.push(id, token);
                next.clear();
                for (const llm::SeqLogits& l : runner.step()) next.push_back({l.id, llm::argmax(l.logits)});
            }
            auto t2 = std::chrono::steady_clock::now();
            for (int id : ids) runner.finish(id);
            if (rep == 0) continue;
            pp.push_back(double(S) * n_prompt / std::chrono::duration<double>(t1 - t0).count());
            tg.push_back(double(S) * n_gen / std::chrono::duration<double>(t2 - t1).count());
        }
        Summary spp = summarize(pp), stg = summarize(tg);
        rows.push_back({{"seqs", S}, {"pp_tok_s", spp.median}, {"pp_min", spp.min}, {"pp_max", spp.max},
                        {"tg_tok_s", stg.median}, {"tg_min", stg.min}, {"tg_max", stg.max}});
    }
    return rows;
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
    int n_prompt = 128, n_gen = 64, depth = 0, n_threads = 0, repeats = 5;
    if (args.value("-m", "--model", so.model_path)) so.model_path = resolve_model(so.model_path);
    args.number("-p", n_prompt);
    args.number("-n", n_gen);
    args.number("-d", depth);
    args.number("-t", n_threads);
    args.number("-r", repeats);
    so.kv_type = kv_flag(args);
    so.device = device_flag(args);
    bool json = args.flag("--json");
    std::string parallel;
    std::vector<int> counts;
    if (args.value("--parallel", parallel)) {
        for (size_t at = 0; at < parallel.size();) {
            size_t comma = parallel.find(',', at);
            const std::string item = parallel.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
            const int n = std::atoi(item.c_str());
            if (n < 1 || n > 64 || item.find_first_not_of("0123456789") != std::string::npos)
                args.usage_error("--parallel takes sequence counts from 1 to 64, like 1,2,4,8");
            counts.push_back(n);
            at = comma == std::string::npos ? parallel.size() : comma + 1;
        }
    }
    if (!args.positionals().empty()) args.usage_error("unexpected argument");
    if (n_prompt < 0 || n_gen < 0 || depth < 0 || repeats < 1 || n_threads < 0) args.usage_error("counts must be positive");
    if (depth > 0 && !counts.empty()) args.usage_error("-d is for one sequence; with --parallel, -p sets each prompt");
    if (n_threads > 0) setenv("TINYLLM_THREADS", std::to_string(n_threads).c_str(), 1);  // read when the CPU device starts
    so.n_ctx = depth + std::max(n_prompt, n_gen + 1) + 1;
    if (!counts.empty()) {
        engine::set_default_device(so.device);
        nlohmann::json rows = bench_parallel(so.model_path, counts, n_prompt, n_gen, repeats, so.kv_type);
        if (json) {
            std::printf("%s\n", nlohmann::json{{"model", so.model_path}, {"n_prompt", n_prompt}, {"n_gen", n_gen}, {"repeats", repeats}, {"parallel", rows}}.dump().c_str());
            return 0;
        }
        std::printf("model     %s\n", so.model_path.c_str());
        const double base = rows[0]["tg_tok_s"].get<double>();
        for (const auto& r : rows)
            std::printf("S=%-3d  pp%-5d %9.2f tok/s   tg%-5d %9.2f tok/s aggregate  (x%.2f of S=%d; min %.2f, max %.2f, %d runs)\n",
                        r["seqs"].get<int>(), n_prompt, r["pp_tok_s"].get<double>(), n_gen, r["tg_tok_s"].get<double>(),
                        r["tg_tok_s"].get<double>() / base, rows[0]["seqs"].get<int>(), r["tg_min"].get<double>(), r["tg_max"].get<double>(), repeats);
        return 0;
    }

    auto session = llm::open_session(so);
    auto file = gguf::File::open(so.model_path);
    int n_vocab = session->info().n_vocab;
    std::mt19937 rng(1234);
    std::vector<int32_t> context(static_cast<size_t>(depth)), prompt(static_cast<size_t>(std::max(n_prompt, 1)));  // cached, then measured
    for (int32_t& id : context) id = static_cast<int32_t>(rng() % n_vocab);
    for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % n_vocab);
    auto at_depth = [&] {  // an empty cache, then the D context tokens in it (not timed)
        session->reset();
        if (depth == 0) return;
        llm::GenerateOptions go;
        go.max_tokens = 0;
        session->generate(context, go);
    };
    auto check_reused = [&](const llm::GenerateResult& r) {
        if (r.n_reused != depth)
            throw std::runtime_error("[bench] the session reused " + std::to_string(r.n_reused) + " of the " + std::to_string(depth) +
                                     " context tokens: the timing would include their prefill");
    };
    auto after_context = [&](const std::vector<int32_t>& tail) {
        std::vector<int32_t> all = context;
        all.insert(all.end(), tail.begin(), tail.end());
        return all;
    };

    std::vector<double> pp, tg;
    double kernels_per_step = 0, custom_per_step = 0;  // kernel launches per decode step (hand-written ones)
    for (int rep = 0; rep <= repeats; rep++) {  // rep 0 warms up (compiles the graphs)
        if (n_prompt > 0) {
            at_depth();
            llm::GenerateOptions go;
            go.max_tokens = 0;
            auto r = session->generate(after_context(prompt), go);  // the context is reused: only the prompt is computed
            check_reused(r);
            if (rep > 0) pp.push_back(n_prompt / (r.t_prefill_ms / 1e3));
        }
        if (n_gen > 0) {
            at_depth();
            llm::GenerateOptions go;
            go.max_tokens = n_gen;  // N forward passes: the 1-token prompt, then N-1 generated tokens
            go.stop_at_end = false;
            const engine::Stats before = engine::stats();
            auto r = session->generate(after_context({prompt[0]}), go);
            check_reused(r);
            const engine::Stats after = engine::stats();
            kernels_per_step = double(after.kernels_run + after.custom_run - before.kernels_run - before.custom_run) / n_gen;
            custom_per_step = double(after.custom_run - before.custom_run) / n_gen;
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
        nlohmann::json out = {{"model", so.model_path}, {"n_prompt", n_prompt}, {"n_gen", n_gen}, {"depth", depth}, {"repeats", repeats},
                              {"threads", threads}, {"pp_tok_s", spp.median}, {"pp_min", spp.min}, {"pp_max", spp.max},
                              {"tg_tok_s", stg.median}, {"tg_min", stg.min}, {"tg_max", stg.max},
                              {"tg_gb_s", gbps}, {"kernels_per_step", kernels_per_step}, {"custom_kernels_per_step", custom_per_step},
                              {"peak_rss_mb", rss_mb}};
        std::printf("%s\n", out.dump().c_str());
    } else {
        std::printf("model     %s\n", so.model_path.c_str());
        const std::string at = depth > 0 ? " @ d" + std::to_string(depth) : "";
        const std::string pp_label = "pp" + std::to_string(n_prompt) + at, tg_label = "tg" + std::to_string(n_gen) + at;
        if (n_prompt > 0)
            std::printf("%-8s  %9.2f tok/s  (min %.2f, max %.2f, %d runs)\n", pp_label.c_str(), spp.median, spp.min, spp.max, repeats);
        if (n_gen > 0)
            std::printf("%-8s  %9.2f tok/s  (min %.2f, max %.2f, %d runs)  %.1f GB/s of weights, %.0f kernels a step (%.0f hand-written)\n",
                        tg_label.c_str(), stg.median, stg.min, stg.max, repeats, gbps, kernels_per_step, custom_per_step);
        std::printf("peak RSS  %.1f MB\n", rss_mb);
    }
    return 0;
}

}  // namespace cli
