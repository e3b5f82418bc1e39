// `tinyllm run --device AMD` as a user runs it: without a GPU a clear message; on the fake /dev/kfd (the
// test-only switch TINYLLM_FAKE_KFD, in tinyllm_fake_gpu: the same CLI linked with the fakes, which the
// production binary refuses) the golden stories260K continuation — the whole AMD path: generated
// kernels compiled to gfx1100 code objects and loaded, hand kernels from the embedded code objects, AQL
// dispatches through the queue, executed by the fake GPU's host twins and the kernels_amd emulator.
#include "cli/run_tinyllm.h"
#include "common/test_data.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

namespace {

nlohmann::json stories_golden(size_t i) {
    std::ifstream f(std::string(TINYLLM_SOURCE_DIR) + "/tests/fixtures/stories260K-f32.golden.json");
    REQUIRE(f.good());
    return nlohmann::json::parse(f)["cases"].at(i);
}

// Runs tinyllm_fake_gpu with the fake GPU switched on (or `tinyllm` with it off) for this command only.
Run run_with_fake_kfd(const char* value, const std::string& args, bool merge_stderr) {
    if (value) setenv("TINYLLM_FAKE_KFD", value, 1);
    else unsetenv("TINYLLM_FAKE_KFD");
    Run r = value ? run_binary(std::string(TINYLLM_BINARY_DIR) + "/tinyllm_fake_gpu", args, merge_stderr)
                  : run_tinyllm(args, merge_stderr);
    unsetenv("TINYLLM_FAKE_KFD");
    return r;
}

// The custom kernels a DEBUG=2 run launched, by name, each checked to be an AMD hand kernel (no host
// fallback); "generated" counts the generated ones.
std::map<std::string, int> kernels_run(const Run& r) {
    std::map<std::string, int> count;
    std::istringstream lines(r.out);
    for (std::string line; std::getline(lines, line);) {
        size_t at = line.find("[engine]   ");
        if (at == std::string::npos) continue;
        std::string kernel = line.substr(at + 11, line.find(' ', at + 11) - at - 11);
        INFO(line);
        if (kernel.rfind("C_", 0) == 0) CHECK(kernel.rfind("C_amd_", 0) == 0);
        count[kernel.rfind("C_", 0) == 0 ? kernel : "generated"]++;
    }
    return count;
}

}  // namespace

TEST_CASE("run --device AMD without an AMD GPU says so and exits cleanly") {
    if (access("/dev/kfd", F_OK) == 0) {
        WARN("this machine has /dev/kfd: the no-GPU message cannot be checked here");
        return;
    }
    Run r = run_with_fake_kfd(nullptr, "run --device AMD -p 'Once upon a time' -n 4 --temp 0", true);
    CHECK(r.status == 1);
    CHECK(r.out.find("error: [devices] AMD: no AMD GPU: /dev/kfd does not exist") != std::string::npos);
}

TEST_CASE("the production binary has no fake GPU: TINYLLM_FAKE_KFD is refused with a clear message") {
    setenv("TINYLLM_FAKE_KFD", "1", 1);
    Run r = run_tinyllm("run --device AMD -p 'Once upon a time' -n 4 --temp 0", true);
    unsetenv("TINYLLM_FAKE_KFD");
    CHECK(r.status == 1);
    CHECK(r.out.find("error: [devices] AMD: TINYLLM_FAKE_KFD is set, but this binary has no fake /dev/kfd") != std::string::npos);
}

TEST_CASE("run --device names the known devices when given an unknown one") {
    Run r = run_tinyllm("run --device TPU -n 1");
    CHECK(r.status == 1);
    CHECK(r.out.find("unknown device 'TPU' (known: AMD, CPU, NULL)") != std::string::npos);
}

TEST_CASE("run --device AMD on the fake GPU prints the golden stories260K continuation") {
    nlohmann::json c = stories_golden(0);  // "Once upon a time", 32 greedy tokens
    Run r = run_with_fake_kfd("1", "run --device AMD -p 'Once upon a time' -n 32 --temp 0", false);
    REQUIRE(r.status == 0);
    CHECK(r.out == c["generated_text"].get<std::string>() + "\n");
}

TEST_CASE("run --device AMD on the fake GPU runs every custom kernel as an AMD hand kernel") {
    setenv("DEBUG", "2", 1);  // one line per kernel run
    Run r = run_with_fake_kfd("1", "run --device AMD -p 'Once upon a time' -n 2 --temp 0", true);
    unsetenv("DEBUG");
    std::string messages;  // on failure, what it said besides the kernel lines
    std::istringstream all(r.out);
    for (std::string line; std::getline(all, line);)
        if (line.find("[engine]") == std::string::npos) messages += line + "\n";
    INFO(messages);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("TINYLLM_FAKE_KFD is set: a fake /dev/kfd with an emulated gfx1100") != std::string::npos);
    std::map<std::string, int> run = kernels_run(r);
    CHECK(run["C_amd_attention"] == 5 * 2);  // 5 layers, prefill and one decode step
    CHECK(run["generated"] > 50);
}

TEST_CASE("bench --parallel on the fake GPU stores keys and runs paged attention as AMD hand kernels") {
    setenv("DEBUG", "2", 1);  // one line per kernel run
    Run r = run_with_fake_kfd("1", "bench --device AMD -p 16 -n 4 -r 1 --parallel 2", true);
    unsetenv("DEBUG");
    REQUIRE(r.status == 0);
    std::map<std::string, int> run = kernels_run(r);
    CHECK(run["C_amd_paged_attention"] >= 5 * 2);  // 5 layers, a prefill and a decode step at least
    CHECK(run["C_amd_kv_store"] == 2 * run["C_amd_paged_attention"]);  // keys and values
    CHECK(r.out.find("S=2") != std::string::npos);
}

// quant-q8_0's 256x256 Q8_0 weights are 69632 bytes, a whole number of pages: the AMD Q8_0 kernels used
// to read one word past a weight's last block and ran into the fake KFD's guard page (SIGSEGV).
TEST_CASE("run --device AMD on the fake GPU runs a Q8_0 model whose weights end on a page boundary") {
    REQUIRE_SHARED_DATA();
    const std::string args = "-m '" + test_data::shared("models/quant-q8_0.gguf") + "' --ids 1,2,3,4 -n 8 --temp 0 --json";
    Run cpu = run_tinyllm("run " + args, false);
    Run amd = run_with_fake_kfd("1", "run --device AMD " + args, false);
    REQUIRE(cpu.status == 0);
    REQUIRE(amd.status == 0);
    auto ids = [](const Run& r) { return nlohmann::json::parse(r.out)["ids"]; };
    CHECK(ids(amd).size() == 8);
    CHECK(ids(amd) == ids(cpu));
}

// A block KV cache would run every attention and store on the host over the GPU's memory: refused when
// the session opens, naming what the AMD device reads (the CPU takes the same model and flag).
TEST_CASE("run --device AMD --kv q8_0 on the fake GPU refuses: its attention reads f16 and f32 caches") {
    REQUIRE_SHARED_DATA();
    const std::string args = "-m '" + test_data::shared("models/quant-q8_0.gguf") + "' --kv q8_0 --ids 1,2,3,4 -n 4 --temp 0";
    Run amd = run_with_fake_kfd("1", "run --device AMD " + args, true);
    CHECK(amd.status == 1);
    CHECK(amd.out.find("error: [engine] kv_cache: AMD's attention reads f16, f32 KV caches, not q8_0") != std::string::npos);
    CHECK(run_tinyllm("run " + args, false).status == 0);
}
