// Runs the built `tinyllm` (path in TINYLLM_BIN), or another built binary, as a user would and captures
// what it prints.
#pragma once

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/wait.h>

struct Run {
    int status = -1;
    std::string out;  // stdout, and stderr too unless redirected in `args`
};

inline Run run_binary(const std::string& path, const std::string& args, bool merge_stderr = true) {
    REQUIRE(std::filesystem::exists(path));
    Run r;
    FILE* p = popen(("'" + path + "' " + args + (merge_stderr ? " 2>&1" : "")).c_str(), "r");
    REQUIRE(p != nullptr);
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

inline Run run_tinyllm(const std::string& args, bool merge_stderr = true) {
    const char* bin = std::getenv("TINYLLM_BIN");
    return run_binary(bin ? bin : std::string(TINYLLM_BINARY_DIR) + "/tinyllm", args, merge_stderr);
}
