// `tinyllm run --grammar / --json-schema` on the built-in stories260K (a SentencePiece vocabulary with
// byte fallback): the output follows the grammar whatever the model would have said, bad files fail.
#include "cli/run_tinyllm.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

namespace {

std::string temp_file(const std::string& name, const std::string& text) {
    std::string path = (std::filesystem::temp_directory_path() / ("tinyllm_grammar_" + name)).string();
    std::ofstream(path) << text;
    return path;
}

}  // namespace

TEST_CASE("run --grammar: every seed's output is in the grammar's language") {
    std::string g = temp_file("list.gbnf", "root ::= item (\", \" item){0,2} \".\"\nitem ::= (\"cat\" | \"dog\" | [a-z]{1,3}) \"é\"?\n");
    for (int seed = 1; seed <= 3; seed++) {
        Run r = run_tinyllm("run -p 'Once upon a time' -n 40 --temp 1 --seed " + std::to_string(seed) + " --grammar " + g, false);
        REQUIRE(r.status == 0);
        INFO(r.out);
        CHECK(std::regex_match(r.out, std::regex("(cat|dog|[a-z]{1,3})(é)?(, (cat|dog|[a-z]{1,3})(é)?){0,2}\\.(</s>)?\n")));  // run prints the end token's text
    }
}

TEST_CASE("run --json-schema: the output parses and follows the schema") {
    std::string s = temp_file("s.json", R"({"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9},
        "w":{"enum":["sun","moon"]}},"required":["n","w"],"additionalProperties":false})");
    Run r = run_tinyllm("run -p 'Once upon a time' -n 40 --temp 1 --seed 7 --json-schema " + s, false);
    REQUIRE(r.status == 0);
    std::string text = r.out.substr(0, r.out.find("</s>"));  // run prints the end token's text
    auto j = nlohmann::json::parse(text);
    CHECK(j["n"].get<int>() >= 1);
    CHECK(j["n"].get<int>() <= 9);
    CHECK((j["w"] == "sun" || j["w"] == "moon"));
}

TEST_CASE("run with a bad grammar or schema fails with the rule or keyword") {
    Run r = run_tinyllm("run -n 4 --grammar " + temp_file("bad.gbnf", "root ::= missing\n"));
    CHECK(r.status != 0);
    CHECK(r.out.find("undefined rule 'missing'") != std::string::npos);
    r = run_tinyllm("run -n 4 --json-schema " + temp_file("bad.json", R"({"type":"string","contentMediaType":"x"})"));
    CHECK(r.status != 0);
    CHECK(r.out.find("'contentMediaType'") != std::string::npos);
}

TEST_CASE("run --chat-template: the prompt is the template's rendering, as the server renders it") {
    // a template that writes the user's message inside fixed text: its ids must be the plain prompt's
    std::string t = temp_file("t.jinja", "Once upon a {{ messages[0]['content'] }}");
    Run chat = run_tinyllm("run -p 'time' -n 1 --json --chat-template " + t, false);
    Run plain = run_tinyllm("run -p 'Once upon a time' -n 1 --json", false);
    REQUIRE(chat.status == 0);
    REQUIRE(plain.status == 0);
    CHECK(nlohmann::json::parse(chat.out)["prompt_ids"] == nlohmann::json::parse(plain.out)["prompt_ids"]);
    // --chat alone uses the model's own template (stories260K has none: its preset's fallback)
    Run fallback = run_tinyllm("run -p 'time' -n 1 --json --chat", false);
    REQUIRE(fallback.status == 0);
    CHECK(nlohmann::json::parse(fallback.out)["prompt_ids"] != nlohmann::json::parse(plain.out)["prompt_ids"]);
    Run missing = run_tinyllm("run -p x --chat-template /nonexistent.jinja");
    CHECK(missing.status != 0);
    CHECK(missing.out.find("[cli] --chat-template: cannot read") != std::string::npos);
}
