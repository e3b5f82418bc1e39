// tinyllm pull / list / rm and -m OWNER/REPO[:QUANT], run as a user runs them, against the fake Hub
// (tests/hub/fake) with HF_ENDPOINT and HF_HUB_CACHE pointing at it and at a fresh cache folder.
#include "cli/run_tinyllm.h"
#include "hub/fake/fake_hub.h"

#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;

namespace {

std::string builtin_bytes() {
    std::ifstream in(std::string(TINYLLM_SOURCE_DIR) + "/models/stories260K.gguf", std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

struct HubEnv {
    fake::FakeHub hub;
    fs::path cache = fs::temp_directory_path() / ("tinyllm-cli-hub-" + std::to_string(std::random_device{}()));
    HubEnv() {
        hub.add_file("acme/tiny-GGUF", "tiny-Q4_K_M.gguf", builtin_bytes());
        hub.add_file("acme/tiny-GGUF", "tiny-Q8_0.gguf", builtin_bytes() + "x");
        setenv("HF_ENDPOINT", hub.endpoint().c_str(), 1);
        setenv("HF_HUB_CACHE", cache.c_str(), 1);
        unsetenv("HF_HUB_OFFLINE");
        unsetenv("HF_TOKEN");
    }
    ~HubEnv() { fs::remove_all(cache); }
};

}  // namespace

TEST_CASE("pull fetches a model by name with plain progress lines, list shows it, rm removes it") {
    HubEnv env;
    Run pull = run_tinyllm("pull acme/tiny-GGUF");
    INFO(pull.out);
    CHECK(pull.status == 0);
    CHECK(pull.out.find("pulling manifest") != std::string::npos);
    CHECK(pull.out.find("tiny-Q4_K_M.gguf: 100%") != std::string::npos);
    CHECK(pull.out.find("verifying sha256 digest") != std::string::npos);
    CHECK(pull.out.find("pulled ") != std::string::npos);
    CHECK(env.hub.bytes_served("acme/tiny-GGUF", "tiny-Q8_0.gguf") == 0);

    Run again = run_tinyllm("pull acme/tiny-GGUF:q4_k_m");
    CHECK(again.out.find("already in the cache") != std::string::npos);

    Run list = run_tinyllm("list");
    INFO(list.out);
    CHECK(list.out.find("acme/tiny-GGUF:Q4_K_M") != std::string::npos);
    CHECK(list.out.find((env.cache / "models--acme--tiny-GGUF" / "snapshots").string()) != std::string::npos);

    Run rm = run_tinyllm("rm acme/tiny-GGUF:Q4_K_M");
    CHECK(rm.status == 0);
    CHECK(rm.out.find("removed") != std::string::npos);
    CHECK(run_tinyllm("list").out.find("no models") != std::string::npos);
}

TEST_CASE("-m OWNER/REPO:QUANT pulls on first use, then runs from the cache offline exactly like the file") {
    HubEnv env;
    const std::string args = " -p 'Once upon a time' -n 12 --temp 0";
    Run first = run_tinyllm("run -m acme/tiny-GGUF:Q4_K_M" + args, false);
    Run direct = run_tinyllm("run -m '" + std::string(TINYLLM_SOURCE_DIR) + "/models/stories260K.gguf'" + args, false);
    CHECK(first.status == 0);
    CHECK(first.out == direct.out);
    setenv("HF_HUB_OFFLINE", "1", 1);
    setenv("HF_ENDPOINT", "http://127.0.0.1:1", 1);  // nothing listens: offline must not try
    Run offline = run_tinyllm("run -m acme/tiny-GGUF" + args, false);
    CHECK(offline.status == 0);
    CHECK(offline.out == direct.out);
    Run missing = run_tinyllm("run -m acme/tiny-GGUF:Q8_0" + args);
    CHECK(missing.status == 1);
    CHECK(missing.out.find("offline") != std::string::npos);
}

TEST_CASE("pull of a missing repo or quant fails with a clear error") {
    HubEnv env;
    Run repo = run_tinyllm("pull acme/absent");
    CHECK(repo.status == 1);
    CHECK(repo.out.find("no such repo acme/absent") != std::string::npos);
    Run quant = run_tinyllm("pull acme/tiny-GGUF:Q2_K");
    CHECK(quant.status == 1);
    CHECK(quant.out.find("has no Q2_K GGUF") != std::string::npos);
    CHECK(quant.out.find("Q8_0") != std::string::npos);
    CHECK(run_tinyllm("pull not-a-name").status == 1);
}
