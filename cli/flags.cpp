// The flags several commands share, read one way: sampling (--temp, --top-k, --top-p, --min-p, --seed),
// --device / $TINYLLM_DEVICE, --kv TYPE, --grammar FILE (GBNF), --json-schema FILE (JSON Schema) and
// --chat-template FILE (replaces the model's template).
#include "cli/cli.h"
#include "devices/device.h"
#include "devices/env.h"
#include "llm/grammar.h"

#include <cctype>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace cli {

namespace {

// The registered backend a device name means ("" when none): names are case-insensitive, and "AMD:0",
// the name `info --devices` gives the first AMD GPU, is the AMD backend (which drives that GPU).
std::string backend_of(const std::string& name) {
    std::string key = name;
    for (char& c : key) c = char(std::toupper(static_cast<unsigned char>(c)));
    if (key == "AMD:0") key = "AMD";
    for (const std::string& known : devices::registered())
        if (key == known) return key;
    return "";
}

}  // namespace

bool accepts_device(const std::string& name) { return !backend_of(name).empty(); }

std::string device_flag(Args& args) {
    std::string name;
    const bool given = args.value("--device", name);
    if (!given) name = devices::env::device();
    if (std::string backend = backend_of(name); !backend.empty()) return backend;
    std::string known;
    for (const std::string& k : devices::registered()) known += (known.empty() ? "" : ", ") + k;
    args.usage_error(std::string(given ? "--device" : "$TINYLLM_DEVICE") + ": unknown device '" + name + "' (known: " + known +
                     "); AMD:0 is AMD, and tinyllm info --devices lists this machine's");
}

gguf::Type kv_flag(Args& args) {
    std::string name = "f16";
    args.value("--kv", name);
    const std::optional<gguf::Type> type = gguf::type_from_name(name);
    if (!type) args.usage_error("--kv: unknown type '" + name + "' (" + KV_TYPES + ")");
    return *type;  // whether the model and the device take it: open_session says
}

void sampling_flags(Args& args, llm::SamplingParams& sampling) {
    args.number("--temp", sampling.temperature);
    args.number("--top-k", sampling.top_k);
    args.number("--top-p", sampling.top_p);
    args.number("--min-p", sampling.min_p);
    args.number("--seed", sampling.seed);
}

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
