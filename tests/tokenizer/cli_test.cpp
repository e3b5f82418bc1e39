// `tinyllm tokenize` run as a user runs it (the executable CTest names in TINYLLM_BIN).
#include "tokenizer_test_util.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sys/wait.h>

using namespace tok_test;

namespace {

struct Run {
    int status;
    std::string out;
};

bool have_binary(std::string& bin) {
    const char* b = std::getenv("TINYLLM_BIN");
    if (!b || !std::filesystem::exists(b)) {
        WARN("SKIPPED: the tinyllm executable is not built (TINYLLM_BIN)");
        return false;
    }
    bin = b;
    return true;
}

// Runs `tinyllm <args>` through the shell, with `input_file` on stdin when given.
Run run(const std::string& bin, const std::string& args, const std::string& input_file = "") {
    std::string cmd = "'" + bin + "' " + args + (input_file.empty() ? "" : " < '" + input_file + "'") + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    Run r;
    std::array<char, 4096> buf;
    for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
    r.status = WEXITSTATUS(pclose(p));
    return r;
}

}  // namespace

TEST_CASE("tinyllm tokenize prints the ids llama.cpp gives for the built-in model") {
    REQUIRE_SHARED_DATA();
    std::string bin;
    if (!have_binary(bin)) return;
    std::ifstream in(test_data::shared("golden/llamacpp/stories260K-f32.json"));
    const auto golden = nlohmann::json::parse(in);
    const auto& c = golden.at("cases").at(0);
    const Run plain = run(bin, "tokenize --json '" + c.at("prompt").get<std::string>() + "'");
    REQUIRE(plain.status == 0);
    CHECK(nlohmann::json::parse(plain.out).at("ids") == c.at("prompt_ids_no_special"));
    const Run with_bos = run(bin, "tokenize --add-special --json '" + c.at("prompt").get<std::string>() + "'");
    CHECK(nlohmann::json::parse(with_bos.out).at("ids") == c.at("prompt_ids"));
    const Run table = run(bin, "tokenize 'Once upon'");
    CHECK(table.out == "403\t\xe2\x96\x81Once\n407\t\xe2\x96\x81upon\n");
}

TEST_CASE("tinyllm tokenize --file - reads any bytes from stdin exactly") {
    REQUIRE_SHARED_DATA();
    std::string bin;
    if (!have_binary(bin)) return;
    for (const Case& c : read_expected("llama3")) {
        if (c.text.find('\0') == std::string::npos && c.text.find('\r') == std::string::npos) continue;
        const std::string path = (std::filesystem::temp_directory_path() / ("tinyllm_tokenize_" + std::to_string(c.line))).string();
        std::ofstream(path, std::ios::binary) << c.text;
        const Run r = run(bin, "tokenize --json --model '" + test_data::shared("tokenizers/vocab/llama3.vocab.gguf") + "' --file -", path);
        std::filesystem::remove(path);
        INFO("line " << c.line);
        REQUIRE(r.status == 0);
        CHECK(nlohmann::json::parse(r.out).at("ids").get<std::vector<int32_t>>() == c.ids);
    }
}

TEST_CASE("tinyllm tokenize explains bad usage and bad models") {
    std::string bin;
    if (!have_binary(bin)) return;
    const Run none = run(bin, "tokenize");
    CHECK(none.status != 0);
    CHECK_THAT(none.out, Catch::Contains("give either TEXT or --file PATH"));
    const Run missing = run(bin, "tokenize --model /no/such/model.gguf hi");
    CHECK(missing.status != 0);
    CHECK_THAT(missing.out, Catch::Contains("/no/such/model.gguf"));
    const Run unknown = run(bin, "tokenize --frobnicate hi");
    CHECK(unknown.status != 0);
    CHECK_THAT(unknown.out, Catch::Contains("unknown option --frobnicate"));
}
