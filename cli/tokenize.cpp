// tinyllm tokenize: shows how a model's own tokenizer splits a text, one "id<TAB>piece" line per token
// (the vocabulary entry, escaped) or {"ids":[...],"pieces":[...]} with --json. By default nothing is
// added and special tokens written in the text are parsed: the semantics of the conformance files.
#include "cli/cli.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace cli {

namespace {

const char USAGE[] =
    "usage: tinyllm tokenize [--model M] [--add-special] [--no-parse-special] [--json] (TEXT | --file PATH)\n"
    "  --model M            GGUF model whose tokenizer to use (default: the built-in stories260K)\n"
    "  --add-special        add BOS/EOS as the model's add_bos_token/add_eos_token say\n"
    "  --no-parse-special   keep control tokens written in the text as plain text\n"
    "  --json               print {\"ids\":[...],\"pieces\":[...]}\n"
    "  --file PATH          tokenize the bytes of PATH exactly ('-' reads standard input)\n";

std::string read_all(const std::string& path) {
    if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("tinyllm tokenize: cannot read " + path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The piece readable on one line: backslash, control bytes and DEL escaped.
std::string escape(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\\') out += "\\\\";
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c < 0x20 || c == 0x7f) {
            char hex[5];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        } else out.push_back(char(c));
    }
    return out;
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& argv) {
    Args args(argv, "tokenize");
    if (args.flag("--help") || args.flag("-h")) {
        std::fputs(USAGE, stdout);
        return 0;
    }
    std::string model = builtin_model_path(), file;
    if (args.value("--model", "-m", model)) model = resolve_model(model);
    const bool has_file = args.value("--file", file);
    const bool add_special = args.flag("--add-special");
    const bool parse_special = !args.flag("--no-parse-special");
    const bool json = args.flag("--json");
    const auto texts = args.positionals();
    if (has_file == !texts.empty()) args.usage_error("give either TEXT or --file PATH");
    if (texts.size() > 1) args.usage_error("give the text as one argument (quote it)");
    const std::string text = has_file ? read_all(file) : texts[0];

    const auto gguf = gguf::File::open(model);
    const auto tokenizer = tok::Tokenizer::from_gguf(*gguf);
    const std::vector<int32_t> ids = tokenizer->encode(text, add_special, parse_special);

    if (json) {
        nlohmann::json out{{"ids", ids}, {"pieces", nlohmann::json::array()}};
        for (int32_t id : ids) out["pieces"].push_back(tokenizer->piece(id));
        std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        return 0;
    }
    for (int32_t id : ids) std::printf("%d\t%s\n", id, escape(tokenizer->piece(id)).c_str());
    return 0;
}

}  // namespace cli
