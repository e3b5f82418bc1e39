// bench_grammar: what a JSON schema costs per generated token.
//   -m MODEL: decode tok/s of MODEL with and without the schema (alternating, medians of -r runs of -n tokens)
//   --vocab VOCAB.gguf: the grammar's own time per token on a vocabulary alone (noise logits, the sampler,
//   a fresh matcher per -n tokens as each request gets one), to set against a model's decode time.
// usage: bench_grammar (-m MODEL | --vocab VOCAB.gguf) [--schema FILE] [-n 64] [-r 5]
#include "gguf/gguf.h"
#include "llm/grammar.h"
#include "llm/sampler.h"
#include "llm/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Records with free strings, numbers and nested arrays: permissive states (string contents) and strict
// ones (keys, punctuation) alternate, as in real structured output.
const char* DEFAULT_SCHEMA = R"({"type":"array","items":{"type":"object","properties":{
  "id":{"type":"integer"},"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}},
  "score":{"type":"number"},"kind":{"enum":["a","b","c"]}},"required":["id","name","tags","score","kind"],
  "additionalProperties":false}})";

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

llm::SamplingParams sampling(uint64_t seed) {
    llm::SamplingParams s;  // the server's defaults
    s.temperature = 0.8f, s.top_k = 40, s.top_p = 0.95f, s.min_p = 0.05f, s.seed = seed;
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model, vocab_path, schema_text = DEFAULT_SCHEMA;
    int n = 64, reps = 5;
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) { std::fprintf(stderr, "bench_grammar: %s needs a value\n", a.c_str()); std::exit(2); }
            return argv[++i];
        };
        if (a == "-m") model = next();
        else if (a == "--vocab") vocab_path = next();
        else if (a == "-n") n = std::stoi(next());
        else if (a == "-r") reps = std::stoi(next());
        else if (a == "--schema") {
            std::ifstream in(next());
            std::stringstream ss;
            ss << in.rdbuf();
            schema_text = ss.str();
        } else {
            std::fprintf(stderr, "usage: bench_grammar (-m MODEL | --vocab VOCAB.gguf) [--schema FILE] [-n 64] [-r 5]\n");
            return 2;
        }
    }
    llm::GrammarSpec spec;
    spec.grammar = llm::parse_gbnf(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(schema_text)));

    if (!model.empty()) {
        llm::SessionOptions so;
        so.model_path = model;
        auto session = llm::open_session(so);
        std::vector<int32_t> prompt = session->tokenizer().encode("Here is the JSON:", true, true);
        std::vector<double> plain, constrained;
        for (int r = 0; r <= reps; r++)  // run 0 warms up (JIT compile, vocabulary trie)
            for (bool with : {false, true}) {
                llm::GenerateOptions go;
                go.max_tokens = n;
                go.sampling = sampling(uint64_t(r));
                go.stop_at_end = false;
                if (with) go.grammar = spec;
                session->reset();
                llm::GenerateResult res = session->generate(prompt, go);
                double tps = double(res.ids.size()) / (res.t_decode_ms / 1000.0);
                if (r > 0) (with ? constrained : plain).push_back(tps);
            }
        double p = median(plain), c = median(constrained);
        std::printf("%s: decode %.2f tok/s unconstrained, %.2f tok/s with the schema (%.3fx), medians of %d x %d tokens\n",
                    model.c_str(), p, c, c / p, reps, n);
        return 0;
    }
    if (vocab_path.empty()) {
        std::fprintf(stderr, "bench_grammar: give -m MODEL or --vocab VOCAB.gguf\n");
        return 2;
    }
    auto file = gguf::File::open(vocab_path);
    auto tokenizer = tok::Tokenizer::from_gguf(*file);
    auto t0 = Clock::now();
    llm::GrammarVocab vocab(*tokenizer);
    const double t_trie = ms_since(t0);
    std::mt19937_64 rng(1234);
    std::normal_distribution<float> noise(0.0f, 3.0f);
    std::vector<float> logits(size_t(tokenizer->n_vocab()));
    std::vector<double> per_token, plain_token;
    for (int r = 0; r < reps; r++) {
        llm::GrammarConstraint grammar(spec, vocab);
        llm::Sampler sampler(sampling(uint64_t(r)));
        for (float& l : logits) l = noise(rng);  // noise drawn outside the timing
        double t_sampling = 0.0, t_total = 0.0;
        int steps = 0;
        for (int step = 0; step < n; step++, steps++) {
            std::rotate(logits.begin(), logits.begin() + 7919 % logits.size(), logits.end());  // new order, no RNG cost
            auto t1 = Clock::now();
            sampler.sample(logits);
            t_sampling += ms_since(t1);
            auto t2 = Clock::now();  // what generate() does: the unconstrained choice if allowed, else the mask
            int32_t id = -1;
            if (!grammar.mask_known()) {
                int32_t first = sampler.sample(logits);
                if (grammar.allows(first)) id = first;
            }
            if (id < 0) {
                std::vector<float> masked = logits;
                if (!grammar.apply(masked)) break;
                id = sampler.sample(masked);
            }
            sampler.accept(id);
            if (!grammar.accept(id) || grammar.finished()) break;
            t_total += ms_since(t2);
        }
        per_token.push_back(t_total / std::max(steps, 1));
        plain_token.push_back(t_sampling / std::max(steps, 1));
    }
    std::printf("%s: %d tokens, trie built in %.1f ms; sampling %.3f ms per token with the schema, %.3f ms without "
                "(medians of %d runs of %d tokens, a fresh matcher each)\n",
                vocab_path.c_str(), tokenizer->n_vocab(), t_trie, median(per_token), median(plain_token), reps, n);
    return 0;
}
