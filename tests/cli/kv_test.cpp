// `--kv TYPE` as a user gives it (llama.cpp's -ctk/-ctv): q8_0 and q4_0 caches run through `run`, `chat`
// and `bench`; a model or device that cannot use one says why and exits cleanly; `serve` lists it.
#include "cli/run_tinyllm.h"
#include "common/test_data.h"

#include <nlohmann/json.hpp>

namespace {

std::string model(const std::string& name) { return "'" + test_data::shared("models/" + name + ".gguf") + "'"; }

}  // namespace

TEST_CASE("run --kv q8_0 and q4_0 generate on a model with 32-wide heads") {
    REQUIRE_SHARED_DATA();
    for (const char* kv : {"q8_0", "q4_0"}) {
        Run r = run_tinyllm("run -m " + model("random-qwen2-q8_0") + " --kv " + kv + " -p 'Hello there' -n 8 --temp 0 --json", false);
        INFO(kv << ": " << r.out);
        REQUIRE(r.status == 0);
        CHECK(nlohmann::json::parse(r.out)["ids"].size() == 8);
    }
}

TEST_CASE("run --kv q4_0 on an MLA model refuses with the reason") {
    REQUIRE_SHARED_DATA();
    Run r = run_tinyllm("run -m " + model("random-deepseek2-f32") + " --kv q4_0 -p hi -n 4");
    CHECK(r.status == 1);
    CHECK(r.out.find("error: [model] KV cache q4_0: deepseek2's MLA layers keep their latent cache in f16 or f32") != std::string::npos);
}

TEST_CASE("run --kv q8_0 on a model whose heads are not whole blocks refuses with the reason") {
    Run r = run_tinyllm("run --kv q8_0 -p hi -n 4");  // stories260K: 8-wide heads
    CHECK(r.status == 1);
    CHECK(r.out.find("q8_0 KV caches need head dims that are multiples of its 32-value blocks, got 8") != std::string::npos);
}

TEST_CASE("run --kv takes a type name: an unknown one is a usage error naming the choices") {
    Run r = run_tinyllm("run --kv q9 -p hi -n 1");
    CHECK(r.status != 0);
    CHECK(r.out.find("--kv: unknown type 'q9' (f16, f32, q8_0 or q4_0)") != std::string::npos);
}

TEST_CASE("chat and bench take --kv q8_0, and every command's --help lists it") {
    REQUIRE_SHARED_DATA();
    Run chat = run_tinyllm("chat -m " + model("random-qwen2-f32") + " --kv q8_0 -n 4 --temp 0 < /dev/null", false);
    CHECK(chat.status == 0);
    Run bench = run_tinyllm("bench -m " + model("random-qwen2-f32") + " --kv q4_0 -p 16 -n 4 -d 40 -r 1", false);
    REQUIRE(bench.status == 0);
    CHECK(bench.out.find("tg4 @ d40") != std::string::npos);
    for (const char* command : {"serve", "run", "chat", "bench"}) {
        Run help = run_tinyllm(std::string(command) + " --help", false);
        INFO(command);
        CHECK(help.out.find("--kv") != std::string::npos);
        CHECK(help.out.find("q8_0") != std::string::npos);
    }
}
