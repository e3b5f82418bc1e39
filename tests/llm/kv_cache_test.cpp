// KV caches of q8_0 and q4_0 blocks (llama.cpp's -ctk/-ctv) end to end: a session's logits against the
// same session over an f32 cache, teacher-forced along the f32 run's tokens, within the distance measured
// for each type; a parallel session's pool in those blocks; and what open_session refuses, saying why.
#include "common/test_data.h"
#include "llm/session.h"

#include <algorithm>
#include <cmath>

namespace {

struct Steps {
    std::vector<int32_t> ids;
    std::vector<std::vector<float>> logits;  // per step
};

// The prompt, then n greedy tokens (or `forced` fed instead), keeping every step's raw logits.
Steps generate(const std::string& model, gguf::Type kv, const std::string& prompt, int n, const std::vector<int32_t>& forced = {},
               int parallel = 1) {
    llm::SessionOptions so;
    so.model_path = test_data::shared("models/" + model + ".gguf");
    so.n_ctx = 256, so.kv_type = kv, so.parallel = parallel;
    auto session = llm::open_session(so);
    llm::GenerateOptions go;
    go.max_tokens = n;
    go.stop_at_end = false;
    go.forced = forced;
    Steps s;
    const int n_vocab = session->info().n_vocab;
    go.on_token = [&](const llm::TokenStep& st) {
        s.logits.emplace_back(st.logits, st.logits + n_vocab);
        return true;
    };
    s.ids = session->generate(session->tokenizer().encode(prompt, true, true), go).ids;
    return s;
}

// The largest logit difference over all steps, in units of the reference step's logit standard deviation
// (the golden tests' sigma).
double worst_sigma(const Steps& got, const Steps& ref) {
    REQUIRE(got.logits.size() == ref.logits.size());
    double worst = 0;
    for (size_t i = 0; i < ref.logits.size(); i++) {
        const std::vector<float>& r = ref.logits[i];
        double mean = 0, var = 0, diff = 0;
        for (float x : r) mean += x;
        mean /= double(r.size());
        for (float x : r) var += (x - mean) * (x - mean);
        for (size_t v = 0; v < r.size(); v++) diff = std::max(diff, double(std::fabs(got.logits[i][v] - r[v])));
        worst = std::max(worst, diff / std::sqrt(var / double(r.size())));
    }
    return worst;
}

const char* PROMPT = "The quick brown fox jumps over the lazy dog, and then the dog runs after the fox around the old red barn until";

}  // namespace

// Measured (Intel Xeon, Sapphire Rapids, AVX-512), the largest over the models: f16 0.0023 sigma, q8_0
// 0.051, q4_0 0.72 (random-qwen2; llama-bpe 0.0014 / 0.038 / 0.63, the hybrid qwen3next, one attention layer
// of four, 0.0001 / 0.0028 / 0.050); the bounds leave about 1.5x margin. Mixtures of experts are left out:
// any change can flip an expert choice (an f16 cache already moves random-glm4moe's logits 1.9 sigma).
TEST_CASE("kv cache: logits over q8_0 and q4_0 caches stay within the measured distance of an f32 cache's") {
    REQUIRE_SHARED_DATA();
    for (auto [kv, bound] : {std::pair{gguf::Type::F16, 0.0035}, std::pair{gguf::Type::Q8_0, 0.08}, std::pair{gguf::Type::Q4_0, 1.1}})
        for (const char* model : {"random-qwen2-f32", "random-llama-bpe-f32", "random-qwen3next-f32"}) {
            const Steps ref = generate(model, gguf::Type::F32, PROMPT, 24);
            const Steps got = generate(model, kv, PROMPT, 24, ref.ids);  // along the same tokens
            const double sigma = worst_sigma(got, ref);
            INFO(model << " " << gguf::type_name(kv) << ": " << sigma << " sigma");
            CHECK(sigma <= bound);
        }
}

TEST_CASE("kv cache: a parallel session runs over a q8_0 pool of 34/64 the bytes, with the single session's logits") {
    REQUIRE_SHARED_DATA();
    llm::SessionOptions so;
    so.model_path = test_data::shared("models/random-qwen2-f32.gguf");
    so.n_ctx = 128, so.parallel = 2, so.pool_tokens = 256;
    so.kv_type = gguf::Type::F16;
    const int64_t f16_bytes = llm::open_session(so)->serving_stats().pool_bytes;
    so.kv_type = gguf::Type::Q8_0;
    const int64_t q8_bytes = llm::open_session(so)->serving_stats().pool_bytes;
    CHECK(q8_bytes * 64 == f16_bytes * 34);
    const Steps alone = generate("random-qwen2-f32", gguf::Type::Q8_0, PROMPT, 8);
    const Steps parallel = generate("random-qwen2-f32", gguf::Type::Q8_0, PROMPT, 8, alone.ids, 2);
    CHECK(worst_sigma(parallel, alone) <= 0.002);  // measured 0.00043: a batch's sums round differently (tests/llm/company.h)
}

TEST_CASE("kv cache: open_session refuses a block type the model cannot use, saying why") {
    REQUIRE_SHARED_DATA();
    llm::SessionOptions so;
    so.n_ctx = 64;
    auto open = [&](const std::string& model, gguf::Type kv, int parallel = 1) {
        so.model_path = model.find('/') == std::string::npos ? test_data::shared("models/" + model + ".gguf") : model;
        so.kv_type = kv, so.parallel = parallel;
        llm::open_session(so);
    };
    // MLA's latent cache (deepseek2, kimi-linear's MLA layer)
    CHECK_THROWS_WITH(open("random-deepseek2-f32", gguf::Type::Q4_0), "[model] KV cache q4_0: deepseek2's MLA layers keep their latent cache in f16 or f32");
    CHECK_THROWS_WITH(open("random-deepseek2-f32", gguf::Type::Q8_0, 4), Catch::Contains("MLA layers keep their latent cache in f16 or f32"));
    CHECK_THROWS_WITH(open("random-kimi-linear-f32", gguf::Type::Q8_0), Catch::Contains("kimi-linear's MLA layers"));
    // head dims that are not whole blocks: qwen3's 48, stories260K's 8
    CHECK_THROWS_WITH(open("random-qwen3-f32", gguf::Type::Q8_0), Catch::Contains("q8_0 KV caches need head dims that are multiples of its 32-value blocks, got 48"));
    CHECK_THROWS_WITH(open(test_data::builtin_model(), gguf::Type::Q4_0), Catch::Contains("got 8"));
    // a type no attention here reads
    CHECK_THROWS_WITH(open("random-qwen2-f32", gguf::Type::Q4_K), Catch::Contains("CPU's attention reads f16, f32, q8_0, q4_0 KV caches, not q4_K"));
    CHECK_NOTHROW(open("random-deepseek2-f32", gguf::Type::F16));
}
