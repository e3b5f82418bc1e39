// Structured output in requests: response_format (json_object / json_schema), llama-server's
// `grammar` and `json_schema`, and the tool-call grammar behind tool_choice, compiled into the
// job's llm::GrammarSpec. A bad grammar or schema is a 400 naming the rule or keyword, before any
// generation.
#include "llm/grammar.h"
#include "server/server_impl.h"

namespace server {

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

// A tag as the grammar writes it: the special token when the vocabulary has it as one, else text.
std::string tag(const std::string& text, const tok::Tokenizer& tokenizer) {
    std::vector<int32_t> ids = tokenizer.encode(text, false, true);
    if (ids.size() == 1 && tokenizer.is_special(ids[0])) return text;  // "<tool_call>": a token reference
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

// Hermes/Qwen calls as their templates write them: <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>,
// the arguments following the function's `parameters` schema.
llm::GrammarSpec tool_call_grammar(const json& tools, bool required, bool parallel, const tok::Tokenizer& tokenizer) {
    std::vector<std::pair<std::string, nlohmann::ordered_json>> schemas;
    std::string calls;
    for (size_t i = 0; i < tools.size(); i++) {
        const json& fn = tools[i]["function"];
        json params = fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : json{{"type", "object"}};
        const std::string args = "args-" + std::to_string(i);
        schemas.push_back({args, params});
        const std::string head = "{\"name\": " + json(fn["name"]).dump() + ", \"arguments\": ";
        calls += (i ? " | " : "") + llm::gbnf_literal(head) + " " + args;
    }
    std::string gbnf = "root ::= call" + std::string(parallel ? " (\"\\n\" call)*" : "") + "\n";
    gbnf += "call ::= " + tag("<tool_call>", tokenizer) + " \"\\n\" (" + calls + ") \"}\\n\" " + tag("</tool_call>", tokenizer) + "\n";
    try {
        gbnf += llm::json_schema_rules(schemas);
    } catch (const llm::GrammarError& e) {
        throw ApiError(400, e.what(), "tools");
    }
    llm::GrammarSpec spec;
    spec.grammar = compile(gbnf, tokenizer, "tools");
    if (!required) {  // "auto": free text until the model opens a call
        spec.trigger_words = {"<tool_call>"};
        std::vector<int32_t> ids = tokenizer.encode("<tool_call>", false, true);
        if (ids.size() == 1 && tokenizer.is_special(ids[0])) spec.trigger_tokens = ids;
    }
    return spec;
}

}  // namespace server
