// Session::embed against llama.cpp: the pooled, normalized final hidden states of two architectures
// (qwen3 with last-token pooling, llama with mean pooling) must point where llama.cpp's do (cosine
// ≥ 0.999; tests/fixtures/embeddings_llamacpp.json, recorded by scripts/record_embeddings.sh).
#include "common/test_data.h"
#include "llm/session.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <functional>

namespace {

nlohmann::json fixture() {
    std::ifstream in(test_data::source_dir() + "/tests/fixtures/embeddings_llamacpp.json");
    REQUIRE(in);
    return nlohmann::json::parse(in);
}

llm::Pooling pooling_of(const std::string& name) {
    return name == "mean" ? llm::Pooling::MEAN : name == "cls" ? llm::Pooling::CLS : llm::Pooling::LAST;
}

double cosine(const std::vector<float>& a, const std::vector<double>& b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < a.size(); i++) ab += a[i] * b[i], aa += double(a[i]) * a[i], bb += b[i] * b[i];
    return ab / std::sqrt(aa * bb);
}

}  // namespace

TEST_CASE("embeddings match llama.cpp's on qwen3 (last) and llama (mean)", "[embed]") {
    REQUIRE_SHARED_DATA();
    const nlohmann::json cases = fixture()["cases"];
    REQUIRE(cases.size() == 2);
    for (const auto& c : cases) {
        llm::SessionOptions o;
        o.model_path = test_data::shared("models/" + c["model"].get<std::string>());
        o.n_ctx = 256;
        auto session = llm::open_session(o);
        for (const auto& input : c["inputs"]) {
            const std::string text = input["text"];
            INFO(c["model"].get<std::string>() << " · " << text);
            const std::vector<int32_t> ids = session->tokenizer().encode(text, true, true);
            CHECK(ids == input["ids"].get<std::vector<int32_t>>());
            const std::vector<float> ours = session->embed(input["ids"].get<std::vector<int32_t>>(), pooling_of(c["pooling"]));
            const std::vector<double> theirs = input["embedding"].get<std::vector<double>>();
            REQUIRE(ours.size() == theirs.size());
            CHECK(cosine(ours, theirs) >= 0.999);
        }
    }
}

namespace {

// Chats, repeats the chat, runs `between` (embeddings), chats again: the last reply and the prefix it
// reuses must equal the plain repeat's, i.e. the embeddings left the chat's cache alone.
void check_chat_cache_survives(const std::string& model, int n_ctx, int max_tokens,
                               const std::function<void(llm::Session&, const std::vector<int32_t>&)>& between) {
    llm::SessionOptions o;
    o.model_path = test_data::shared(model);
    o.n_ctx = n_ctx;
    auto session = llm::open_session(o);
    const std::vector<int32_t> ids = session->tokenizer().encode("Hello world, how are you today?", true, true);
    llm::GenerateOptions g;
    g.max_tokens = max_tokens;
    const llm::GenerateResult before = session->generate(ids, g);
    const llm::GenerateResult repeat = session->generate(ids, g);  // what a plain repeat reuses
    REQUIRE(repeat.n_reused > 0);
    between(*session, ids);
    const llm::GenerateResult after = session->generate(ids, g);
    CHECK(after.ids == before.ids);
    CHECK(after.n_reused == repeat.n_reused);
}

}  // namespace

TEST_CASE("an embedding is unit length, deterministic, and leaves the chat's cached prefix in place", "[embed]") {
    REQUIRE_SHARED_DATA();
    check_chat_cache_survives("models/random-qwen3-q8_0.gguf", 256, 4, [](llm::Session& session, const std::vector<int32_t>& ids) {
        for (llm::Pooling p : {llm::Pooling::MEAN, llm::Pooling::CLS, llm::Pooling::LAST}) {
            const std::vector<float> a = session.embed(ids, p), b = session.embed(ids, p);
            double norm = 0;
            for (float x : a) norm += double(x) * x;
            CHECK(std::abs(norm - 1.0) < 1e-4);
            CHECK(a == b);
        }
        // The first token sees only itself: cls pooling of one token equals its last pooling.
        CHECK(session.embed({ids[0]}, llm::Pooling::CLS) == session.embed({ids[0]}, llm::Pooling::LAST));
        // A longer input than the chat's prompt: it would have overwritten every cached row.
        session.embed(session.tokenizer().encode("Something else entirely, and longer than the chat was.", true, true), llm::Pooling::MEAN);
    });
}

TEST_CASE("an embedding leaves a hybrid model's recurrent checkpoints in place", "[embed]") {
    REQUIRE_SHARED_DATA();
    check_chat_cache_survives("models/random-qwen35-q8_0.gguf", 128, 3,
                              [](llm::Session& session, const std::vector<int32_t>& ids) { session.embed(ids, llm::Pooling::LAST); });
}

TEST_CASE("embed refuses no pooling and empty input", "[embed]") {
    REQUIRE_SHARED_DATA();
    llm::SessionOptions o;
    o.model_path = test_data::shared("models/random-qwen3-q8_0.gguf");
    o.n_ctx = 64;
    auto session = llm::open_session(o);
    CHECK(session->info().pooling == llm::Pooling::NONE);
    CHECK_THROWS_AS(session->embed({1, 2, 3}, llm::Pooling::NONE), std::invalid_argument);
    CHECK_THROWS_AS(session->embed({}, llm::Pooling::MEAN), std::invalid_argument);
    CHECK_THROWS_AS(session->embed(std::vector<int32_t>(65, 1), llm::Pooling::MEAN), std::length_error);
}
