// A session with parallel > 1 (llm/batched_session.cpp) as the server uses it: generate() from several
// threads at once. Results do not depend on company: four greedy requests running together give the
// ids each gives alone through the single-sequence session (up to a near tie of the lone run's top two
// logits); sampling, grammars and cancellation stay per request; a repeated prompt reuses the cached
// blocks of its prefix; a finished or cancelled request leaves nothing behind in the pool.
#include "common/test_data.h"
#include "devices/amd/fake/fake_kfd.h"
#include "llm/company.h"
#include "llm/grammar.h"
#include "llm/session.h"
#include "engine/tensor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

namespace {

const char* PROMPTS[] = {"Once upon a time, there was a little girl", "The cat sat", "One day, a big dog named Max went to the park to play with",
                         "Lily"};
constexpr int N_GEN = 24;

struct Lone {
    std::vector<int32_t> ids;
    std::vector<float> margins, tops;  // per step: the gap between the two largest logits, the largest
};

std::unique_ptr<llm::Session> open(const std::string& path, int parallel, const std::string& device = "CPU") {
    llm::SessionOptions so;
    so.model_path = path;
    so.n_ctx = 256;
    so.parallel = parallel;
    so.device = device;
    return llm::open_session(so);
}

llm::GenerateOptions greedy(int n, Lone* record = nullptr, int n_vocab = 0) {
    llm::GenerateOptions go;
    go.max_tokens = n;
    go.stop_at_end = false;
    if (record)
        go.on_token = [record, n_vocab](const llm::TokenStep& st) {
            float a = -1e30f, b = -1e30f;
            for (int v = 0; v < n_vocab; v++) {
                const float l = st.logits[v];
                if (l > a) b = a, a = l;
                else if (l > b) b = l;
            }
            record->margins.push_back(a - b), record->tops.push_back(a);
            return true;
        };
    return go;
}

// serving_stats once the sequences that ended have left (generate() returns before the scheduler has
// taken its sequence out: at its next step).
llm::ServingStats settled(const llm::Session& s) {
    for (int i = 0; i < 500 && s.serving_stats().running + s.serving_stats().waiting > 0; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return s.serving_stats();
}

// The four prompts through one session from four threads at once.
std::vector<llm::GenerateResult> together(llm::Session& s, const std::vector<std::vector<int32_t>>& prompts, const llm::GenerateOptions& go) {
    std::vector<llm::GenerateResult> out(prompts.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < prompts.size(); i++) threads.emplace_back([&, i] { out[i] = s.generate(prompts[i], go); });
    for (auto& t : threads) t.join();
    return out;
}

// The lone runs on the CPU; the four together on `device` ("AMD": the fake GPU, TINYLLM_FAKE_KFD).
void check_same_company(const std::string& path, const std::string& device = "CPU") {
    INFO(path);
    auto single = open(path, 1);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<Lone> lone(std::size(PROMPTS));
    for (size_t i = 0; i < std::size(PROMPTS); i++) {
        prompts.push_back(single->tokenizer().encode(PROMPTS[i], true, true));
        single->reset();
        lone[i].ids = single->generate(prompts[i], greedy(N_GEN, &lone[i], single->info().n_vocab)).ids;
    }
    if (device == "AMD") {
        amd::install_fake_kfd();
        setenv("TINYLLM_FAKE_KFD", "1", 1);
    }
    auto batched = open(path, 4, device);
    REQUIRE(batched->max_parallel() == 4);
    std::vector<llm::GenerateResult> got = together(*batched, prompts, greedy(N_GEN));
    const llm::ServingStats st = settled(*batched);
    batched.reset();
    engine::set_default_device("CPU");
    unsetenv("TINYLLM_FAKE_KFD");
    for (size_t i = 0; i < prompts.size(); i++) {
        INFO("prompt " << i);
        REQUIRE(got[i].ids.size() == size_t(N_GEN));
        // equal, or equal up to a step where the lone run's two largest logits nearly tie (batch_test.cpp)
        size_t first = 0;
        while (first < size_t(N_GEN) && got[i].ids[first] == lone[i].ids[first]) first++;
        INFO("first difference at step " << first);
        if (first < size_t(N_GEN))
            CHECK(lone[i].margins[first] <= 2 * test_data::batch_logit_tolerance(path) * std::max(1.0f, std::fabs(lone[i].tops[first])));
    }
    CHECK(st.running == 0);
    CHECK(st.waiting == 0);
    CHECK(st.blocks_used == 0);
}

}  // namespace

TEST_CASE("parallel session: stories260K, four requests from four threads give each one's lone ids") {
    check_same_company(test_data::builtin_model());
}

TEST_CASE("parallel session: every golden architecture gives the lone ids in company (up to near ties)") {
    REQUIRE_SHARED_DATA();
    for (const char* m : {"random-llama-q8_0", "random-qwen2-f16", "random-qwen3-f16", "random-qwen3moe-q8_0", "random-olmoe-f32",
                          "random-deepseek2-f32", "random-glm4moe-q8_0", "random-qwen3next-q8_0", "random-qwen35-f32",
                          "random-qwen35moe-f16", "random-kimi-linear-q8_0", "random-gpt-oss-f16", "random-gpt-oss-mxfp4"})
        check_same_company(test_data::shared(std::string("models/") + m + ".gguf"));
}

TEST_CASE("parallel session: a seeded sampler and a grammar stay with their own request") {
    auto single = open(test_data::builtin_model(), 1);
    auto batched = open(test_data::builtin_model(), 4);
    const auto prompt = single->tokenizer().encode("Once upon a time", true, true);
    llm::GenerateOptions sampled = llm::GenerateOptions{};
    sampled.max_tokens = 24, sampled.stop_at_end = false, sampled.sampling = llm::default_sampling(), sampled.sampling.seed = 7;
    llm::GenerateOptions digits = sampled;
    digits.grammar.grammar = llm::parse_gbnf("root ::= [0-9 ]+");
    const auto lone_sampled = single->generate(prompt, sampled).ids;
    single->reset();
    const auto lone_digits = single->generate(prompt, digits).ids;

    std::vector<int32_t> a, b, c;
    std::thread t1([&] { a = batched->generate(prompt, sampled).ids; });
    std::thread t2([&] { b = batched->generate(prompt, digits).ids; });
    std::thread t3([&] { c = batched->generate(prompt, sampled).ids; });
    t1.join(), t2.join(), t3.join();
    CHECK(a == lone_sampled);
    CHECK(c == lone_sampled);  // the same seed in another sequence draws the same
    CHECK(b == lone_digits);
    std::string text = single->tokenizer().decode(b);
    CHECK(text.find_first_not_of("0123456789 ") == std::string::npos);
}

TEST_CASE("parallel session: a repeated prompt reuses the cached blocks of its prefix and gives the same ids") {
    auto s = open(test_data::builtin_model(), 2);
    std::string long_text = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends.";
    const auto prompt = s->tokenizer().encode(long_text, true, true);
    REQUIRE(prompt.size() > 33);
    const auto first = s->generate(prompt, greedy(8));
    CHECK(first.n_reused == 0);
    const auto again = s->generate(prompt, greedy(8));
    CHECK(again.n_reused == int((prompt.size() - 1) / 16 * 16));  // whole blocks, the last prompt token computed again
    CHECK(again.ids == first.ids);
    // a follow-up that extends the first answer reuses the blocks its answer filled too
    std::vector<int32_t> follow = prompt;
    follow.insert(follow.end(), first.ids.begin(), first.ids.end());
    for (int32_t id : s->tokenizer().encode(" The end.", false, true)) follow.push_back(id);
    const auto turn2 = s->generate(follow, greedy(4));
    CHECK(turn2.n_reused == int((prompt.size() + first.ids.size() - 1) / 16 * 16));
    CHECK(settled(*s).prefix_hit_tokens == again.n_reused + turn2.n_reused);
    CHECK(s->serving_stats().blocks_cached > 0);
    s->reset();  // forgets the cached blocks
    CHECK(settled(*s).blocks_cached == 0);
    CHECK(s->generate(prompt, greedy(8)).n_reused == 0);
}

TEST_CASE("parallel session: a cancelled request leaves at once, the others finish, no block stays held") {
    auto s = open(test_data::builtin_model(), 4);
    const auto prompt = s->tokenizer().encode("Once upon a time", true, true);
    std::atomic<bool> cancel{false};
    llm::GenerateOptions go = greedy(200);
    go.cancel = &cancel;
    int seen = 0;
    go.on_token = [&](const llm::TokenStep&) {
        if (++seen == 5) cancel = true;
        return true;
    };
    llm::GenerateResult cancelled, other;
    std::thread t1([&] { cancelled = s->generate(prompt, go); });
    std::thread t2([&] { other = s->generate(prompt, greedy(40)); });
    t1.join(), t2.join();
    CHECK(cancelled.finish == llm::FinishReason::CANCELLED);
    CHECK(cancelled.ids.size() == 5);
    CHECK(other.ids.size() == 40);
    const llm::ServingStats st = settled(*s);
    CHECK(st.running == 0);
    CHECK(st.blocks_used == 0);
    CHECK(st.slots.empty());
}

TEST_CASE("parallel session: a prompt longer than the context is refused as by the single session") {
    auto s = open(test_data::builtin_model(), 2);
    CHECK_THROWS_AS(s->generate(std::vector<int32_t>(257, 1), greedy(1)), std::length_error);
    CHECK_THROWS_AS(s->generate({}, greedy(1)), std::invalid_argument);
}

TEST_CASE("parallel session on the fake AMD GPU: four requests together give the CPU's lone ids") {
    // On the emulated gfx1100 the paged attention and the KV stores run as AMD hand kernels
    // (tests/cli/amd_run_test.cpp checks which kernels run), a hybrid's recurrent batch forms on the host.
    check_same_company(test_data::builtin_model(), "AMD");
    REQUIRE_SHARED_DATA();
    check_same_company(test_data::shared("models/random-qwen3next-f32.gguf"), "AMD");
}
