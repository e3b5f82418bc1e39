// `tinyllm template` end to end, run exactly as a user runs it: a golden case's context renders to the
// golden bytes on stdout; a template error exits non-zero with the error on stderr.
#include "common/test_data.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using Json = nlohmann::ordered_json;

std::string tinyllm_binary() {
    const char* env = std::getenv("TINYLLM_BIN");
    return env && *env ? env : std::string(TINYLLM_BINARY_DIR) + "/tinyllm";
}

std::string slurp(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

Json golden_case(const std::string& template_name, const std::string& scenario) {
    std::ifstream f(test_data::shared("golden/templates/cases.jsonl"));
    for (std::string line; std::getline(f, line);) {
        Json c = Json::parse(line);
        if (c["template"] == template_name && c["scenario"] == scenario) return c;
    }
    FAIL("no golden case " << template_name << " / " << scenario);
    return {};
}

struct Run {
    int exit_code;
    std::string out, err;
};

// Runs `tinyllm template` on a golden case's template and context.
Run run_case(const Json& c, const std::string& extra_args) {
    std::string binary = tinyllm_binary();
    INFO("the tinyllm executable (build its target first): " << binary);
    REQUIRE(std::filesystem::exists(binary));
    auto dir = std::filesystem::temp_directory_path() / ("tinyllm_template_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "context.json") << c["context"].dump();
    std::string command = "'" + binary + "' template --template '" +
                          test_data::shared("golden/templates/templates/" + c["template"].get<std::string>()) +
                          "' --context '" + (dir / "context.json").string() + "' " + extra_args + " > '" +
                          (dir / "out").string() + "' 2> '" + (dir / "err").string() + "'";
    int status = std::system(command.c_str());
    Run run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "out"), slurp(dir / "err")};
    std::filesystem::remove_all(dir);
    return run;
}

}  // namespace

TEST_CASE("tinyllm template prints a golden rendering byte for byte") {
    REQUIRE_SHARED_DATA();
    // Llama 3.2 puts strftime_now's date in the prompt: --now pins it to the goldens' date.
    Json c = golden_case("meta-llama-Llama-3.2-3B-Instruct.jinja", "e_tools");
    Run run = run_case(c, "--now 2026-01-15");
    CHECK(run.exit_code == 0);
    CHECK(run.err.empty());
    CHECK(run.out == c["expected"].get<std::string>());
}

TEST_CASE("tinyllm template exits non-zero with the template's error") {
    REQUIRE_SHARED_DATA();
    Json c = golden_case("google-gemma-2-2b-it.jinja", "b_system_user");
    Run run = run_case(c, "");
    CHECK(run.exit_code != 0);
    CHECK(run.out.empty());
    CHECK_THAT(run.err, Catch::Contains("google-gemma-2-2b-it.jinja:1: System role not supported"));
}
