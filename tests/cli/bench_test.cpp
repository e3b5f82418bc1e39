// `tinyllm bench` as a user runs it: the report's lines and fields, -d (after cached tokens), the errors.
// What it measures is never asserted (speed is for benchmarks, not tests).
#include "cli/run_tinyllm.h"

#include <nlohmann/json.hpp>

TEST_CASE("bench reports prefill and decode on the built-in model, in text and JSON") {
    Run r = run_tinyllm("bench -p 16 -n 8 -r 1", false);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("pp16 ") != std::string::npos);
    CHECK(r.out.find("tg8 ") != std::string::npos);
    CHECK(r.out.find("peak RSS") != std::string::npos);
    Run j = run_tinyllm("bench -p 16 -n 8 -r 1 --json", false);
    REQUIRE(j.status == 0);
    auto out = nlohmann::json::parse(j.out);
    CHECK(out["pp_tok_s"].get<double>() > 0);
    CHECK(out["tg_tok_s"].get<double>() > 0);
    CHECK(out["depth"] == 0);
    // a decode step of the built-in model launches generated and hand-written kernels
    CHECK(out["kernels_per_step"].get<double>() > out["custom_kernels_per_step"].get<double>());
    CHECK(out["custom_kernels_per_step"].get<double>() > 0);
}

TEST_CASE("bench -d measures both after that many cached tokens, which it does not time") {
    Run r = run_tinyllm("bench -p 16 -n 8 -d 200 -r 1", false);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("pp16 @ d200") != std::string::npos);
    CHECK(r.out.find("tg8 @ d200") != std::string::npos);
    Run j = run_tinyllm("bench -p 16 -n 8 -d 200 -r 1 --json", false);
    REQUIRE(j.status == 0);
    CHECK(nlohmann::json::parse(j.out)["depth"] == 200);
}

TEST_CASE("bench rejects bad counts and -d with --parallel") {
    Run neg = run_tinyllm("bench -d -5");
    CHECK(neg.status != 0);
    CHECK(neg.out.find("counts must be positive") != std::string::npos);
    Run both = run_tinyllm("bench -d 16 --parallel 2");
    CHECK(both.status != 0);
    CHECK(both.out.find("-d is for one sequence") != std::string::npos);
}
