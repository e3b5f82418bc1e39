// The flags `run`, `chat` and `serve` share for structured output and templates: --grammar FILE
// (GBNF), --json-schema FILE (JSON Schema) and --chat-template FILE (replaces the model's template).
#include "llm/grammar.h"
#include "server/cli/cli.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cli {

std::string read_text_file(const std::string& path, const std::string& flag) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("[cli] " + flag + ": cannot read '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

llm::GrammarSpec grammar_flags(Args& args) {
    std::string grammar_path, schema_path;
    const bool have_grammar = args.value("--grammar", grammar_path);
    const bool have_schema = args.value("--json-schema", schema_path);
    if (have_grammar && have_schema) args.usage_error("give either --grammar or --json-schema, not both");
    llm::GrammarSpec spec;
    if (have_grammar) spec.grammar = llm::parse_gbnf(read_text_file(grammar_path, "--grammar"));
    if (have_schema) {
        auto schema = nlohmann::ordered_json::parse(read_text_file(schema_path, "--json-schema"), nullptr, false);
        if (schema.is_discarded()) throw std::runtime_error("[cli] --json-schema: '" + schema_path + "' is not valid JSON");
        spec.grammar = llm::parse_gbnf(llm::json_schema_to_gbnf(schema));
    }
    return spec;
}

std::string chat_template_flag(Args& args) {
    std::string path;
    return args.value("--chat-template", path) ? read_text_file(path, "--chat-template") : "";
}

}  // namespace cli
