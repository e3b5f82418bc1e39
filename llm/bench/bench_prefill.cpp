// bench_prefill MODEL.gguf [N] [REPEATS]: a prompt of N random tokens (default 512) evaluated as one
// chunked prefill versus the same prompt fed one token at a time (teacher forcing through the decode
// graph), each from an empty state; prints the medians and their ratio.
#include "llm/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_prefill MODEL.gguf [N_TOKENS=512] [REPEATS=5]\n");
        return 2;
    }
    const int n = argc > 2 ? std::atoi(argv[2]) : 512, repeats = argc > 3 ? std::atoi(argv[3]) : 5;
    if (n < 2 || repeats < 1) {
        std::fprintf(stderr, "bench_prefill: N_TOKENS must be at least 2 and REPEATS positive\n");
        return 2;
    }
    try {
        llm::SessionOptions so;
        so.model_path = argv[1];
        so.n_ctx = n + 1;
        auto session = llm::open_session(so);
        std::mt19937 rng(1234);
        std::vector<int32_t> prompt(static_cast<size_t>(n));
        for (int32_t& id : prompt) id = int32_t(rng() % uint32_t(session->info().n_vocab));

        std::vector<double> batched, stepped;
        for (int rep = 0; rep <= repeats; rep++) {  // rep 0 warms up (compiles both graphs)
            session->reset();
            llm::GenerateOptions once;
            once.max_tokens = 1;  // the prompt's logits only: no decode step follows
            auto t0 = std::chrono::steady_clock::now();
            session->generate(prompt, once);
            double ms_batched = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();

            session->reset();
            llm::GenerateOptions step;
            step.forced.assign(prompt.begin() + 1, prompt.end());
            step.forced.push_back(0);  // the last forced id is sampled, never fed
            step.max_tokens = n;
            step.stop_at_end = false;
            t0 = std::chrono::steady_clock::now();
            session->generate({prompt[0]}, step);  // prompt[0], then prompt[1..n-1] one forward pass each
            double ms_stepped = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (rep > 0) batched.push_back(ms_batched), stepped.push_back(ms_stepped);
        }
        double b = median(batched), s = median(stepped);
        std::printf("model            %s\n", argv[1]);
        std::printf("prefill %d       %9.2f ms  (%.1f tok/s, median of %d)\n", n, b, n / (b / 1e3), repeats);
        std::printf("one at a time    %9.2f ms  (%.1f tok/s)\n", s, n / (s / 1e3));
        std::printf("speedup          %9.2fx\n", s / b);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
