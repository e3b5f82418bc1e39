// Structured output in requests: response_format (json_object / json_schema), llama-server's
// `grammar` and `json_schema`, and the tool-call grammar behind tool_choice, compiled into the
// job's llm::GrammarSpec. A bad grammar or schema is a 400 naming the rule or keyword, before any
// generation.
#include "llm/grammar.h"
#include "server/server_impl.h"

#include <algorithm>

namespace server {

int32_t special_token(const std::string& text, const tok::Tokenizer& tokenizer) {
    std::vector<int32_t> ids = tokenizer.encode(text, false, true);
    return ids.size() == 1 && tokenizer.is_special(ids[0]) ? ids[0] : -1;
}

namespace {

std::shared_ptr<const llm::Grammar> compile(const std::string& gbnf, const tok::Tokenizer& tokenizer, const std::string& param) {
    try {
        auto grammar = llm::parse_gbnf(gbnf);
        llm::resolve_grammar_tokens(*grammar, tokenizer);  // names of special tokens must exist
        return grammar;
    } catch (const llm::GrammarError& e) {
        throw ApiError(400, e.what(), param);
    }
}

std::string schema_gbnf(const json& schema, const std::string& param) {
    if (!schema.is_object() && !schema.is_boolean()) throw ApiError(400, "[server] '" + param + "' must be a JSON Schema object", param);
    try {
        return llm::json_schema_to_gbnf(schema);
    } catch (const llm::GrammarError& e) {
        throw ApiError(400, e.what(), param);
    }
}

// A marker as the grammar writes it: a reference to the special token when the vocabulary has it as
// one, else its text.
std::string tag(const std::string& text, const tok::Tokenizer& tokenizer) {
    if (int32_t id = special_token(text, tokenizer); id >= 0) return "<[" + std::to_string(id) + "]>";
    return llm::gbnf_literal(text);
}

}  // namespace

llm::GrammarSpec parse_output_grammar(const json& body, const tok::Tokenizer& tokenizer) {
    int n = 0;
    std::string gbnf, param;
    if (present(body, "grammar")) {
        if (!body["grammar"].is_string()) throw ApiError(400, "[server] 'grammar' must be a GBNF string", "grammar");
        gbnf = body["grammar"].get<std::string>(), param = "grammar", n++;
    }
    if (present(body, "json_schema")) gbnf = schema_gbnf(body["json_schema"], "json_schema"), param = "json_schema", n++;
    if (present(body, "response_format")) {
        const json& rf = body["response_format"];
        const std::string type = rf.is_object() && rf.contains("type") && rf["type"].is_string() ? rf["type"].get<std::string>() : "";
        if (type == "json_object") {
            // any object, or llama-server's response_format.schema
            json schema = rf.contains("schema") ? rf["schema"] : json{{"type", "object"}, {"additionalProperties", true}};
            gbnf = schema_gbnf(schema, "response_format.schema"), param = "response_format", n++;
        } else if (type == "json_schema") {
            if (!rf.contains("json_schema") || !rf["json_schema"].is_object() || !rf["json_schema"].contains("schema"))
                throw ApiError(400, "[server] 'response_format' of type json_schema needs json_schema: {name, schema}", "response_format");
            gbnf = schema_gbnf(rf["json_schema"]["schema"], "response_format.json_schema.schema"), param = "response_format", n++;
        } else if (type != "text") {
            throw ApiError(400, "[server] 'response_format' must be {\"type\": \"text\" | \"json_object\" | \"json_schema\"}", "response_format");
        }
    }
    if (n > 1) throw ApiError(400, "[server] give only one of 'grammar', 'json_schema' and 'response_format'", param);
    llm::GrammarSpec spec;
    if (n == 1) spec.grammar = compile(gbnf, tokenizer, param);
    return spec;
}

namespace {

// A Qwen3-Coder parameter value: strings raw (the router keeps them as text, so no '<' and no control
// character inside), anything else as the JSON of its schema.
std::string xml_value(const json& schema, const std::string& rule, std::vector<std::pair<std::string, nlohmann::ordered_json>>& schemas) {
    if (schema.is_object() && schema.value("type", json()) == "string") {
        for (const char* key : {"pattern", "format"})
            if (schema.contains(key))
                throw ApiError(400, std::string("[server] '") + key + "' on a string parameter is not supported in Qwen3-Coder XML calls", "tools");
        auto length = [&](const char* key) -> std::string {  // the bounds the JSON Schema converter accepts
            if (!schema.contains(key)) return "";
            const json& v = schema[key];
            if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0) || v.get<uint64_t>() > 10000)
                throw ApiError(400, std::string("[server] '") + key + "' of a string parameter must be an integer from 0 to 10000", "tools");
            return std::to_string(v.get<uint64_t>());
        };
        const std::string lo = length("minLength"), hi = length("maxLength");
        if (!lo.empty() && !hi.empty() && std::stoull(hi) < std::stoull(lo))
            throw ApiError(400, "[server] 'maxLength' of a string parameter is below its 'minLength'", "tools");
        return "[^<\\x00-\\x1F]{" + (lo.empty() ? "0" : lo) + "," + hi + "}";
    }
    schemas.push_back({rule, schema});
    return rule;
}

// One call of function `name` in `syntax`; `args` is the rule of its arguments (added to `schemas`).
std::string one_call(ToolSyntax syntax, const std::string& name, const json& params, const std::string& args,
                     std::vector<std::pair<std::string, nlohmann::ordered_json>>& schemas, const tok::Tokenizer& tokenizer) {
    using llm::gbnf_literal;
    const std::string quoted = json(name).dump();
    if (syntax != ToolSyntax::QWEN_XML) schemas.push_back({args, params});
    switch (syntax) {
    case ToolSyntax::HERMES: return gbnf_literal("{\"name\": " + quoted + ", \"arguments\": ") + " " + args + " \"}\"";
    case ToolSyntax::LLAMA3_JSON: return gbnf_literal("{\"name\": " + quoted + ", \"parameters\": ") + " " + args + " \"}\"";
    case ToolSyntax::MISTRAL_JSON:
        return gbnf_literal("{\"name\": " + quoted + ", \"arguments\": ") + " " + args + " " + gbnf_literal(", \"id\": \"") +
               " [a-zA-Z0-9]{9} " + gbnf_literal("\"}");
    case ToolSyntax::MISTRAL_ARGS:
        return gbnf_literal(name) + " (" + tag("[CALL_ID]", tokenizer) + " [a-zA-Z0-9]{9})? " + tag("[ARGS]", tokenizer) + " " + args;
    case ToolSyntax::HARMONY:  // the header as the template writes it, or as gpt-oss often does
        return gbnf_literal(name) + " (" + tag("<|channel|>", tokenizer) + " \"commentary\" \" json\"? | \" \" " +
               tag("<|constrain|>", tokenizer) + " \"json\")? " + tag("<|message|>", tokenizer) + " " + args + " " + tag("<|call|>", tokenizer);
    case ToolSyntax::QWEN_XML: break;
    }
    // <function=NAME>\n<parameter=K>\nV\n</parameter>\n…</function>
    if (!params.is_object() || (params.contains("properties") && !params["properties"].is_object()))
        throw ApiError(400, "[server] the parameters of '" + name + "' must be an object schema with 'properties' an object", "tools");
    const json props = params.value("properties", json::object());
    const json req = params.value("required", json::array());
    std::string call = gbnf_literal("<function=" + name + ">\n");
    size_t k = 0;
    for (const auto& [key, sub] : props.items()) {
        std::string p = gbnf_literal("<parameter=" + key + ">\n") + " " + xml_value(sub, args + "-" + std::to_string(k++), schemas) + " " +
                        gbnf_literal("\n</parameter>\n");
        const bool is_req = std::find(req.begin(), req.end(), key) != req.end();
        call += " " + (is_req ? p : "(" + p + ")?");
    }
    return call + " " + gbnf_literal("</function>");
}

}  // namespace

llm::GrammarSpec tool_call_grammar(const json& tools, bool required, bool parallel, const tok::Tokenizer& tokenizer, ToolSyntax syntax) {
    std::vector<std::pair<std::string, nlohmann::ordered_json>> schemas;
    std::string calls;
    for (size_t i = 0; i < tools.size(); i++) {
        const json& fn = tools[i]["function"];
        json params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : json{{"type", "object"}};
        calls += (i ? " | " : "") + one_call(syntax, fn["name"].get<std::string>(), params, "args-" + std::to_string(i), schemas, tokenizer);
    }
    // How the calls of one reply follow each other, and the opener a lazy grammar waits for. Llama 3.x
    // and harmony write one call per reply (the model's turn ends with it).
    std::string root, opener;
    switch (syntax) {
    case ToolSyntax::HERMES:
    case ToolSyntax::QWEN_XML:
        opener = "<tool_call>";
        root = "call" + std::string(parallel ? " (\"\\n\" call)*" : "") + "\ncall ::= " + tag(opener, tokenizer) + " \"\\n\" (" + calls +
               ") \"\\n\" " + tag("</tool_call>", tokenizer);
        break;
    case ToolSyntax::LLAMA3_JSON:
        opener = "{\"name\"";  // at the start of the reply (trigger_at_start)
        root = "call\ncall ::= " + calls;
        break;
    case ToolSyntax::MISTRAL_JSON:
        opener = "[TOOL_CALLS]";
        root = tag(opener, tokenizer) + " \"[\" call" + std::string(parallel ? " (\", \" call)*" : "") + " \"]\"\ncall ::= " + calls;
        break;
    case ToolSyntax::MISTRAL_ARGS:
        opener = "[TOOL_CALLS]";
        root = "call" + std::string(parallel ? " call*" : "") + "\ncall ::= " + tag(opener, tokenizer) + " (" + calls + ")";
        break;
    case ToolSyntax::HARMONY:  // after the prompt's "<|start|>assistant"; lazily from the recipient on
        opener = "to=functions.";
        root = (required ? "\" \" " : "") + llm::gbnf_literal(opener) + " (" + calls + ")";
        break;
    }
    std::string gbnf = "root ::= " + root + "\n";
    try {
        gbnf += llm::json_schema_rules(schemas);
    } catch (const llm::GrammarError& e) {
        throw ApiError(400, e.what(), "tools");
    }
    llm::GrammarSpec spec;
    spec.grammar = compile(gbnf, tokenizer, "tools");
    if (!required) {  // "auto": free text until the model opens a call
        spec.trigger_words = {opener};
        spec.trigger_at_start = syntax == ToolSyntax::LLAMA3_JSON;
        if (int32_t id = special_token(opener, tokenizer); id >= 0) spec.trigger_tokens = {id};
        if (int32_t id = special_token("<|python_tag|>", tokenizer); id >= 0 && syntax == ToolSyntax::LLAMA3_JSON) spec.trigger_tokens = {id};
    }
    return spec;
}

std::vector<int32_t> tool_opener_tokens(ToolSyntax syntax, const tok::Tokenizer& tokenizer) {
    const int32_t id = special_token(std::string(llm::tool_call_opener(syntax)), tokenizer);
    return id >= 0 ? std::vector<int32_t>{id} : std::vector<int32_t>{};
}

llm::GrammarSpec harmony_no_call_grammar(const tok::Tokenizer& tokenizer) {
    llm::GrammarSpec spec;
    for (const char* t : {"<|start|>", "<|channel|>", "<|message|>", "<|end|>"})
        if (special_token(t, tokenizer) < 0) return spec;  // markers as text: the router alone keeps calls out
    // analysis messages, then the answer; no header names a recipient
    spec.grammar = compile("root ::= (<|channel|> \"analysis\" <|message|> text <|end|> <|start|> \"assistant\")* "
                           "<|channel|> (\"final\" | \"commentary\") <|message|> text\n"
                           "text ::= !<|end|>*\n",
                           tokenizer, "tool_choice");
    return spec;
}

}  // namespace server
