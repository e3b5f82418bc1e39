// bench_tokenizer: load time and encode speed of each vocabulary on a ~225 KB mixed-script prompt
// built from the conformance corpus (prose, code, CJK, Indic, Thai, Arabic, emoji, whitespace runs).
// The prompt repeats the ~24 KB corpus, so the word cache helps after the first copy; --bytes 24000
// measures one copy: text seen once. "cold" is the first encode of a fresh tokenizer (empty cache).
// usage: bench_tokenizer [--reps N] [--bytes N] [--corpus corpus.jsonl] [--dump-prompt FILE] [VOCAB.gguf ...]
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

std::string build_prompt(const std::string& corpus_path, size_t target_bytes) {
    std::ifstream in(corpus_path);
    if (!in) throw std::runtime_error("cannot read " + corpus_path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) lines.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    std::string prompt;
    while (prompt.size() < target_bytes)
        for (const std::string& l : lines) {
            if (prompt.size() >= target_bytes) break;
            prompt += l;
            prompt += '\n';
        }
    return prompt;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::string shared = TINYLLM_SHARED_DIR;
    std::string corpus = shared + "/tokenizers/corpus.jsonl", dump;
    int reps = 9;
    size_t bytes = 225 * 1024;
    std::vector<std::string> vocabs;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
        else if (!std::strcmp(argv[i], "--bytes") && i + 1 < argc) bytes = std::strtoul(argv[++i], nullptr, 10);
        else if (!std::strcmp(argv[i], "--corpus") && i + 1 < argc) corpus = argv[++i];
        else if (!std::strcmp(argv[i], "--dump-prompt") && i + 1 < argc) dump = argv[++i];
        else vocabs.push_back(argv[i]);
    }
    if (vocabs.empty())
        for (const char* n : {"llama3", "qwen3", "gpt4o", "gemma3", "llama2", "mistral_v1"})
            vocabs.push_back(shared + "/tokenizers/vocab/" + n + ".vocab.gguf");
    try {
        const std::string prompt = build_prompt(corpus, bytes);
        if (!dump.empty()) std::ofstream(dump, std::ios::binary) << prompt;
        std::printf("prompt: %zu bytes from %s; %d repetitions, medians\n", prompt.size(), corpus.c_str(), reps);
        std::printf("%-22s %9s %8s %12s %12s %10s %10s\n", "vocabulary", "load ms", "tokens", "cold ms", "warm ms",
                    "cold tok/s", "warm tok/s");
        for (const std::string& path : vocabs) {
            auto t0 = Clock::now();
            auto file = gguf::File::open(path);
            auto tok = tok::Tokenizer::from_gguf(*file);
            const double load_ms = ms_since(t0);
            t0 = Clock::now();
            const size_t n_tokens = tok->encode(prompt, false, true).size();  // empty word cache
            const double cold_ms = ms_since(t0);
            std::vector<double> warm;
            for (int r = 0; r < reps; r++) {
                t0 = Clock::now();
                const size_t n = tok->encode(prompt, false, true).size();
                warm.push_back(ms_since(t0));
                if (n != n_tokens) throw std::runtime_error("encode is not deterministic");
            }
            const double warm_ms = median(warm);
            const std::string name = path.substr(path.find_last_of('/') + 1);
            std::printf("%-22s %9.1f %8zu %12.2f %12.2f %10.0f %10.0f\n", name.c_str(), load_ms, n_tokens, cold_ms, warm_ms,
                        n_tokens / cold_ms * 1e3, n_tokens / warm_ms * 1e3);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
        return 1;
    }
    return 0;
}
