// `tinyllm run` on the built-in stories260K against llama.cpp's golden output, kept in the repository
// (tests/fixtures/stories260K-f32.golden.json, a copy of ../shared/golden/llamacpp/stories260K-f32.json)
// so it runs on every clone.
#include "cli/run_tinyllm.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <fstream>
#include <iterator>
#include <map>

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

TEST_CASE("run keeps compiled kernels in TINYLLM_KERNEL_CACHE: the same text from the cache, and from a damaged one") {
    namespace fs = std::filesystem;
    const fs::path dir = fs::path(TINYLLM_BINARY_DIR) / ("test-kernel-cache-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    const std::string log = dir.string() + ".log";
    const std::string want = golden_case(0)["generated_text"].get<std::string>() + "\n";
    const char* was = std::getenv("TINYLLM_KERNEL_CACHE");  // catch_main.cpp's, put back at the end
    const std::string previous = was ? was : "";
    ::setenv("TINYLLM_KERNEL_CACHE", dir.c_str(), 1);
    ::setenv("DEBUG", "2", 1);
    auto run = [&] {
        Run r = run_tinyllm("run -p 'Once upon a time' -n 32 --temp 0 2>'" + log + "'", false);
        std::ifstream f(log);
        const std::string err((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        REQUIRE(r.status == 0);
        CHECK(r.out == want);
        return err;
    };
    auto files = [&] {
        std::map<fs::path, uintmax_t> sizes;
        for (const auto& e : fs::directory_iterator(dir)) sizes[e.path()] = e.file_size();
        return sizes;
    };

    std::string err = run();  // cold: every kernel compiled and kept
    CHECK(err.find("compiling") != std::string::npos);
    CHECK(err.find("from the kernel cache") == std::string::npos);
    const auto kept = files();
    REQUIRE(kept.size() > 5);

    err = run();  // warm: nothing compiled
    CHECK(err.find("from the kernel cache") != std::string::npos);
    CHECK(err.find("compiling") == std::string::npos);
    CHECK(files() == kept);

    // every file damaged: cut short, or one byte of its object code changed in place
    bool cut = true;
    for (const auto& [path, size] : kept) {
        if (cut) {
            fs::resize_file(path, size / 2);
        } else {
            std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
            const auto at = static_cast<std::streamoff>(size - 100);  // the checksum is the last 8 bytes
            f.seekg(at);
            const char c = static_cast<char>(f.get());
            f.seekp(at);
            f.put(static_cast<char>(~c));
        }
        cut = !cut;
    }
    err = run();  // each one a miss, compiled again and rewritten whole
    CHECK(err.find("from the kernel cache") == std::string::npos);
    CHECK(files() == kept);
    fs::remove_all(dir);
    fs::remove(log);
    ::setenv("TINYLLM_KERNEL_CACHE", previous.c_str(), 1);
    ::unsetenv("DEBUG");
}
