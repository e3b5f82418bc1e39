// hub::pull against the fake Hub on loopback: picking by repo and quant, split models, resume after a
// cut download (bytes already there are not fetched again), checksum mismatch, 401/404, offline mode,
// cache reuse, concurrent pulls of one file, and the cache listing.
#include "hub/fake/fake_hub.h"
#include "hub/hub.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <vector>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

std::string random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = char(rng());
    return s;
}

std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// A fresh cache folder per test and Settings pointing at the fake hub.
struct HubFixture {
    fake::FakeHub hub;
    fs::path cache;
    hub::Settings settings;
    HubFixture() {
        cache = fs::temp_directory_path() / ("tinyllm-hub-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
        fs::create_directories(cache);
        settings.endpoint = hub.endpoint();
        settings.cache_dir = cache;
        settings.retries = 0;
        settings.backoff_ms = 10;
    }
    ~HubFixture() { fs::remove_all(cache); }
    hub::PullResult pull(const std::string& name) { return hub::pull(settings, *hub::ModelRef::parse(name)); }
};

constexpr const char* REPO = "acme/tiny-GGUF";

void add_quants(fake::FakeHub& hub) {
    hub.add_file(REPO, "README.md", "# tiny");
    hub.add_file(REPO, "tiny-Q8_0.gguf", random_bytes(300000, 1));
    hub.add_file(REPO, "tiny-Q4_K_M.gguf", random_bytes(200000, 2));
    hub.add_file(REPO, "tiny-Q4_K_S.gguf", random_bytes(190000, 3));
    hub.add_file(REPO, "tiny-IQ4_XS.gguf", random_bytes(180000, 4));
}

}  // namespace

TEST_CASE("model names parse as OWNER/REPO:QUANT and OWNER/REPO/FILE.gguf, file paths do not") {
    auto a = hub::ModelRef::parse("acme/tiny-GGUF:q8_0");
    REQUIRE(a);
    CHECK(a->repo == "acme/tiny-GGUF");
    CHECK(a->quant == "q8_0");
    auto b = hub::ModelRef::parse("hf.co/acme/tiny-GGUF/sub/tiny-Q8_0.gguf");
    REQUIRE(b);
    CHECK(b->repo == "acme/tiny-GGUF");
    CHECK(b->file == "sub/tiny-Q8_0.gguf");
    CHECK(hub::ModelRef::parse("acme/tiny-GGUF")->quant.empty());
    CHECK_FALSE(hub::ModelRef::parse("models/stories260K.gguf"));
    CHECK_FALSE(hub::ModelRef::parse("/abs/path.gguf"));
    CHECK_FALSE(hub::ModelRef::parse("model.gguf"));
    CHECK(hub::quant_of("Qwen3-0.6B-Q4_K_M.gguf") == "Q4_K_M");
    CHECK(hub::quant_of("x-IQ4_XS-00001-of-00002.gguf") == "IQ4_XS");
    CHECK(hub::quant_of("stories260K.gguf").empty());
}

TEST_CASE("pull by repo takes Q4_K_M into the Hub cache layout (blob, snapshot link, ref)") {
    HubFixture f;
    add_quants(f.hub);
    hub::PullResult r = f.pull(REPO);
    CHECK(r.downloaded);
    CHECK(r.path.filename() == "tiny-Q4_K_M.gguf");
    const fs::path repo = f.cache / "models--acme--tiny-GGUF";
    const std::string sha = fake::sha256_hex(random_bytes(200000, 2));
    CHECK(fs::is_regular_file(repo / "blobs" / sha));
    CHECK(fs::is_symlink(repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567" / "tiny-Q4_K_M.gguf"));
    CHECK(read_all(repo / "refs" / "main") == "0123456789abcdef0123456789abcdef01234567");
    CHECK(read_all(r.path) == random_bytes(200000, 2));
    CHECK(f.hub.bytes_served(REPO, "tiny-Q8_0.gguf") == 0);
}

TEST_CASE("pull by quant is case-insensitive and a whole label, missing or ambiguous quants list the repo's") {
    HubFixture f;
    add_quants(f.hub);
    CHECK(f.pull("acme/tiny-GGUF:q8_0").path.filename() == "tiny-Q8_0.gguf");
    CHECK(f.pull("acme/tiny-GGUF:Q4_K_S").path.filename() == "tiny-Q4_K_S.gguf");
    CHECK_THROWS_WITH(f.pull("acme/tiny-GGUF:Q5_K_M"), Catch::Contains("has no Q5_K_M GGUF") && Catch::Contains("IQ4_XS") &&
                                                            Catch::Contains("Q4_K_M"));
    f.hub.add_file(REPO, "other-Q8_0.gguf", "x");
    CHECK_THROWS_WITH(f.pull("acme/tiny-GGUF:Q8_0"), Catch::Contains("ambiguous") && Catch::Contains("other-Q8_0.gguf"));
    CHECK(f.pull("acme/tiny-GGUF/other-Q8_0.gguf").path.filename() == "other-Q8_0.gguf");
}

TEST_CASE("pull of a split model downloads every part and returns the first") {
    HubFixture f;
    for (int k = 1; k <= 3; k++) {
        char name[64];
        std::snprintf(name, sizeof name, "Q8_0/big-Q8_0-%05d-of-00003.gguf", k);
        f.hub.add_file("acme/big", name, random_bytes(50000, 10 + k));
    }
    f.hub.add_file("acme/big", "big-F16.gguf", "f16");
    hub::PullResult r = f.pull("acme/big:Q8_0");
    REQUIRE(r.parts.size() == 3);
    CHECK(r.path.filename() == "big-Q8_0-00001-of-00003.gguf");
    for (int k = 1; k <= 3; k++) CHECK(read_all(r.parts[size_t(k - 1)]) == random_bytes(50000, 10 + k));
    CHECK(f.hub.bytes_served("acme/big", "big-F16.gguf") == 0);
}

TEST_CASE("a download cut off midway resumes with a Range request: the bytes already there are not fetched again") {
    HubFixture f;
    add_quants(f.hub);
    f.hub.cut_once(REPO, "tiny-Q8_0.gguf", 120000);
    CHECK_THROWS_WITH(f.pull("acme/tiny-GGUF:Q8_0"), Catch::Contains("next pull resumes"));
    const std::string sha = fake::sha256_hex(random_bytes(300000, 1));
    CHECK(fs::file_size(f.cache / "models--acme--tiny-GGUF" / "blobs" / (sha + ".incomplete")) == 120000);
    hub::PullResult r = f.pull("acme/tiny-GGUF:Q8_0");
    CHECK(read_all(r.path) == random_bytes(300000, 1));
    CHECK(f.hub.bytes_served(REPO, "tiny-Q8_0.gguf") == 300000);  // 120000 + the 180000 left
    CHECK_FALSE(fs::exists(f.cache / "models--acme--tiny-GGUF" / "blobs" / (sha + ".incomplete")));
}

TEST_CASE("a transient failure is retried with backoff and resumes where it stopped") {
    HubFixture f;
    add_quants(f.hub);
    f.settings.retries = 2;
    f.hub.cut_once(REPO, "tiny-Q8_0.gguf", 70000);
    hub::PullResult r = f.pull("acme/tiny-GGUF:Q8_0");
    CHECK(read_all(r.path) == random_bytes(300000, 1));
    CHECK(f.hub.bytes_served(REPO, "tiny-Q8_0.gguf") == 300000);
}

TEST_CASE("a checksum mismatch deletes the download and says so, nothing appears in the snapshot") {
    HubFixture f;
    add_quants(f.hub);
    f.hub.list_wrong_sha256(REPO, "tiny-Q8_0.gguf");
    CHECK_THROWS_WITH(f.pull("acme/tiny-GGUF:Q8_0"), Catch::Contains("sha256 mismatch") && Catch::Contains("deleted"));
    const fs::path repo = f.cache / "models--acme--tiny-GGUF";
    for (const auto& e : fs::recursive_directory_iterator(repo)) CHECK(e.path().filename().string().find("Q8_0") == std::string::npos);
    for (const auto& e : fs::directory_iterator(repo / "blobs")) FAIL("left in blobs: " + e.path().string());
}

TEST_CASE("a file larger than the free disk space is refused before any byte is fetched") {
    HubFixture f;
    add_quants(f.hub);
    f.hub.list_size(REPO, "tiny-Q8_0.gguf", uint64_t(1) << 60);  // an exabyte
    CHECK_THROWS_WITH(f.pull("acme/tiny-GGUF:Q8_0"), Catch::Contains("not enough free space"));
    CHECK(f.hub.bytes_served(REPO, "tiny-Q8_0.gguf") == 0);
}

TEST_CASE("a gated repo needs a token (401), missing repos and files are 404s with clear errors") {
    HubFixture f;
    add_quants(f.hub);
    f.hub.set_gated(REPO);
    CHECK_THROWS_WITH(f.pull(REPO), Catch::Contains("needs a token") && Catch::Contains("HF_TOKEN"));
    f.settings.token = fake::FakeHub::TOKEN;
    CHECK(f.pull(REPO).path.filename() == "tiny-Q4_K_M.gguf");
    CHECK_THROWS_WITH(f.pull("acme/nothing-here"), Catch::Contains("no such repo acme/nothing-here"));
    CHECK_THROWS_WITH(f.pull("acme/tiny-GGUF/absent.gguf"), Catch::Contains("no such file acme/tiny-GGUF/absent.gguf"));
}

TEST_CASE("offline mode resolves from the cache only and never touches the network") {
    HubFixture f;
    add_quants(f.hub);
    f.pull("acme/tiny-GGUF:Q8_0");
    const int calls = f.hub.info_requests();
    f.settings.offline = true;
    f.settings.endpoint = "http://127.0.0.1:1";  // nothing listens there
    hub::PullResult r = f.pull("acme/tiny-GGUF:q8_0");
    CHECK_FALSE(r.downloaded);
    CHECK(read_all(r.path) == random_bytes(300000, 1));
    CHECK(f.hub.info_requests() == calls);
    CHECK_THROWS_WITH(f.pull("acme/tiny-GGUF:IQ4_XS"), Catch::Contains("offline") && Catch::Contains("not in the cache"));
}

TEST_CASE("an existing cache entry is reused: a second pull fetches no bytes") {
    HubFixture f;
    add_quants(f.hub);
    f.pull(REPO);
    hub::PullResult again = f.pull(REPO);
    CHECK_FALSE(again.downloaded);
    CHECK(f.hub.bytes_served(REPO, "tiny-Q4_K_M.gguf") == 200000);
}

TEST_CASE("concurrent pulls of the same file fetch it once and all get it whole") {
    HubFixture f;
    add_quants(f.hub);
    f.hub.slow_down(REPO, "tiny-Q8_0.gguf", 20);
    constexpr int N = 6;  // they also write the same ref and snapshot link at the same moment
    std::vector<std::string> errors(N);
    std::vector<hub::PullResult> results(N);
    std::vector<std::thread> threads;
    for (int i = 0; i < N; i++)
        threads.emplace_back([&, i] {
            try {
                results[i] = f.pull("acme/tiny-GGUF:Q8_0");
            } catch (const std::exception& e) {
                errors[i] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    int downloaded = 0;
    for (int i = 0; i < N; i++) {
        INFO("pull " << i);
        CHECK(errors[i] == "");
        CHECK((read_all(results[i].path) == random_bytes(300000, 1)));  // (()): no 300 kB of bytes in a failure
        downloaded += results[i].downloaded;
    }
    CHECK(downloaded == 1);  // one fetched it, the others found it done after the lock
    CHECK(f.hub.bytes_served(REPO, "tiny-Q8_0.gguf") == 300000);
}

TEST_CASE("the cache lists pulled models by name, size and path, and removes one with its blob") {
    HubFixture f;
    add_quants(f.hub);
    f.pull("acme/tiny-GGUF:Q8_0");
    f.pull("acme/tiny-GGUF:Q4_K_M");
    auto models = hub::list_cached(f.settings);
    REQUIRE(models.size() == 2);
    CHECK(models[0].name == "acme/tiny-GGUF:Q4_K_M");
    CHECK(models[0].size == 200000);
    CHECK(models[1].name == "acme/tiny-GGUF:Q8_0");
    auto removed = hub::remove_cached(f.settings, "acme/tiny-GGUF:q8_0");
    CHECK(removed.size() == 2);  // the snapshot link and the blob
    models = hub::list_cached(f.settings);
    REQUIRE(models.size() == 1);
    CHECK(models[0].quant == "Q4_K_M");
    CHECK_THROWS_WITH(hub::remove_cached(f.settings, "acme/tiny-GGUF:Q8_0"), Catch::Contains("no cached model"));
}
