// Where tests find their data: fixtures inside the repository, and the large reference sets in
// ../shared (absent on a user's fresh clone: those tests say so and skip; CI sets
// TINYLLM_REQUIRE_SHARED=1 so a missing ../shared fails instead).
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace test_data {

inline std::string source_dir() { return TINYLLM_SOURCE_DIR; }
inline std::string shared_dir() { return TINYLLM_SHARED_DIR; }
inline std::string builtin_model() { return source_dir() + "/models/stories260K.gguf"; }
inline std::string shared(const std::string& rel) { return shared_dir() + "/" + rel; }

// The whole file at `path`, bytes as they are; a file that cannot be opened fails the test.
inline std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    return {std::istreambuf_iterator<char>(f), {}};
}

inline bool shared_available() {
    if (std::filesystem::exists(shared_dir() + "/models")) return true;
    const char* req = std::getenv("TINYLLM_REQUIRE_SHARED");
    if (req && *req && std::string(req) != "0") FAIL("../shared is required (TINYLLM_REQUIRE_SHARED) but absent: " + shared_dir());
    WARN("SKIPPED: reference data ../shared is absent (" + shared_dir() + "); this test runs only where it exists");
    return false;
}

}  // namespace test_data

// Use at the top of a test that needs ../shared: skips loudly when it is absent.
#define REQUIRE_SHARED_DATA()                       \
    do {                                            \
        if (!test_data::shared_available()) return; \
    } while (0)
