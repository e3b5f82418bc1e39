// tinyllm pull / list / rm and -m OWNER/REPO[:QUANT], run as a user runs them, against the fake Hub
// (tests/hub/fake) with HF_ENDPOINT and HF_HUB_CACHE pointing at it and at a fresh cache folder.
#include "cli/run_tinyllm.h"
#include "hub/fake/fake_hub.h"

#include <filesystem>
#include <fstream>
#include <random>

#include <csignal>
#include <sys/wait.h>
#include <unistd.h>

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

TEST_CASE("run -m OWNER/REPO:QUANT pulls on first use, then runs from the cache offline exactly like the file") {
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

TEST_CASE("pull killed midway (SIGKILL) resumes: the second run fetches only the bytes not on disk") {
    HubEnv env;
    std::string big(3 << 20, '\0');
    for (size_t i = 0; i < big.size(); i++) big[i] = char((i * 2654435761u) >> 13);
    env.hub.add_file("acme/big-GGUF", "big-Q8_0.gguf", big);
    env.hub.slow_down("acme/big-GGUF", "big-Q8_0.gguf", 30);  // ~2 MB/s: time to kill it midway
    const char* bin = std::getenv("TINYLLM_BIN");
    const std::string path = bin ? bin : std::string(TINYLLM_BINARY_DIR) + "/tinyllm";
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        execl(path.c_str(), path.c_str(), "pull", "acme/big-GGUF:Q8_0", (char*)nullptr);
        _exit(127);
    }
    for (int i = 0; i < 1000 && env.hub.bytes_served("acme/big-GGUF", "big-Q8_0.gguf") < (1 << 20); i++) usleep(10000);
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    usleep(300000);  // the hub's sender notices the dead connection (a chunk already on its way counts)
    const uint64_t served_first = env.hub.bytes_served("acme/big-GGUF", "big-Q8_0.gguf");
    REQUIRE(served_first >= (1 << 20));
    REQUIRE(served_first < big.size());
    const fs::path partial = env.cache / "models--acme--big-GGUF" / "blobs" / (fake::sha256_hex(big) + ".incomplete");
    REQUIRE(fs::exists(partial));
    const uint64_t on_disk = fs::file_size(partial);
    CHECK(on_disk > 0);
    env.hub.slow_down("acme/big-GGUF", "big-Q8_0.gguf", 0);
    Run again = run_tinyllm("pull acme/big-GGUF:Q8_0");
    INFO(again.out);
    CHECK(again.status == 0);
    CHECK(env.hub.bytes_served("acme/big-GGUF", "big-Q8_0.gguf") - served_first == big.size() - on_disk);
}
