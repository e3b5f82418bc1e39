// `tinyllm run` on the built-in stories260K against llama.cpp's golden output, kept in the repository
// (tests/fixtures/stories260K-f32.golden.json, a copy of ../shared/golden/llamacpp/stories260K-f32.json)
// so it runs on every clone.
#include "cli/run_tinyllm.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace {

using nlohmann::json;

json golden_case(size_t i) {
    std::ifstream f(std::string(TINYLLM_SOURCE_DIR) + "/tests/fixtures/stories260K-f32.golden.json");
    REQUIRE(f.good());
    const json g = json::parse(f);
    return g["cases"].at(i);
}

}  // namespace

TEST_CASE("run prints the golden greedy continuation of the built-in model") {
    json c = golden_case(0);  // "Once upon a time"
    Run r = run_tinyllm("run -p 'Once upon a time' -n 32 --temp 0", false);
    REQUIRE(r.status == 0);
    CHECK(r.out == c["generated_text"].get<std::string>() + "\n");
}

TEST_CASE("run --json reports the golden prompt ids, generated ids and top logits") {
    json c = golden_case(1);  // "Lily and Tom went to the park. They"
    Run r = run_tinyllm("run --json --top-logits 3 -n 8 --temp 0 -p '" + c["prompt"].get<std::string>() + "'", false);
    REQUIRE(r.status == 0);
    json out = json::parse(r.out);
    CHECK(out["prompt_ids"] == c["prompt_ids"]);
    auto gen = c["generated_ids"].get<std::vector<int>>();
    CHECK(out["ids"].get<std::vector<int>>() == std::vector<int>(gen.begin(), gen.begin() + 8));
    REQUIRE(out["top_logits"].size() == 8);
    for (size_t i = 0; i < 8; i++) {
        const json& ours = out["top_logits"][i];
        const json& ref = c["steps"][i]["top_logits"];
        REQUIRE(ours.size() == 3);
        for (size_t k = 0; k < 3; k++) {
            CHECK(ours[k][0] == ref[k][0]);
            // stories260K: tau 0.02 sigma with sigma about 7 (golden README)
            CHECK(std::abs(ours[k][1].get<double>() - ref[k][1].get<double>()) < 0.02 * c["steps"][i]["logit_std"].get<double>());
        }
    }
}

TEST_CASE("run --force feeds the given ids and reports logits for each of them") {
    json c = golden_case(2);  // "" (BOS only)
    auto gen = c["generated_ids"].get<std::vector<int>>();
    std::string forced = std::to_string(gen[0]) + "," + std::to_string(gen[1]) + "," + std::to_string(gen[2]);
    Run r = run_tinyllm("run --json --top-logits 1 --ids 1 --force " + forced, false);
    REQUIRE(r.status == 0);
    json out = json::parse(r.out);
    CHECK(out["ids"].get<std::vector<int>>() == std::vector<int>{gen[0], gen[1], gen[2]});
    REQUIRE(out["top_logits"].size() == 3);
    for (int i = 0; i < 3; i++) CHECK(out["top_logits"][i][0][0] == c["steps"][i]["top_logits"][0][0]);
}

TEST_CASE("run rejects bad arguments and missing models with a message") {
    Run bad_n = run_tinyllm("run -n lots");
    CHECK(bad_n.status != 0);
    CHECK(bad_n.out.find("-n needs an integer") != std::string::npos);
    Run missing = run_tinyllm("run -m /nonexistent/model.gguf -p hi");
    CHECK(missing.status != 0);
    CHECK(missing.out.find("/nonexistent/model.gguf") != std::string::npos);
    Run bad_ids = run_tinyllm("run --ids 1,99999 -n 1");
    CHECK(bad_ids.status != 0);
    CHECK(bad_ids.out.find("outside the vocabulary") != std::string::npos);
}
