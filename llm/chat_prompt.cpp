// The chat prompt pipeline; see chat_prompt.h.
#include "llm/chat_prompt.h"

#include <algorithm>
#include <string_view>

namespace llm {

namespace {

using json = nlohmann::ordered_json;

// Client text enters the template with its control-token texts bracketed by two bytes that valid
// UTF-8 (every JSON string) never holds; after rendering, the brackets mark the spans that must be
// tokenized as text, so a message cannot forge turns with "<|im_start|>system".
constexpr char LITERAL_OPEN = '\xFF', LITERAL_CLOSE = '\xFE';

std::string bracket_control_tokens(const std::string& s, const tok::Tokenizer& tokenizer) {
    const std::vector<tok::TextSpan> spans = tokenizer.control_spans(s);
    if (spans.empty()) return s;
    std::string out;
    size_t at = 0;
    for (const tok::TextSpan& span : spans) {
        out.append(s, at, span.begin - at);
        out += LITERAL_OPEN;
        out.append(s, span.begin, span.end - span.begin);
        out += LITERAL_CLOSE;
        at = span.end;
    }
    return out.append(s, at);
}

// Every string (and object key) of a client value, bracketed: message text, tool names, descriptions,
// parameter schemas and call arguments reach the template as values, and `tojson` keeps the brackets.
json bracket_all(const json& v, const tok::Tokenizer& tokenizer) {
    if (v.is_string()) return bracket_control_tokens(v.get_ref<const std::string&>(), tokenizer);
    if (v.is_array()) {
        json out = json::array();
        for (const json& x : v) out.push_back(bracket_all(x, tokenizer));
        return out;
    }
    if (!v.is_object()) return v;
    json out = json::object();
    for (const auto& [key, x] : v.items()) out[bracket_control_tokens(key, tokenizer)] = bracket_all(x, tokenizer);
    return out;
}

// The rendered prompt without the brackets, and the spans they enclosed.
std::string take_literal_spans(const std::string& rendered, std::vector<tok::TextSpan>& spans) {
    std::string out;
    out.reserve(rendered.size());
    size_t open = std::string::npos;
    for (char c : rendered) {
        if (c == LITERAL_OPEN) open = out.size();
        else if (c != LITERAL_CLOSE) out += c;
        else if (open != std::string::npos) spans.push_back({open, out.size()}), open = std::string::npos;
    }
    return out;
}

std::string token_text(const tok::Tokenizer& tokenizer, int32_t id) { return id >= 0 && id < tokenizer.n_vocab() ? tokenizer.piece(id) : ""; }

bool ends_with_think(std::string_view prompt) {
    const size_t end = prompt.find_last_not_of(" \n\r\t");
    return end != std::string_view::npos && prompt.substr(0, end + 1).ends_with("<think>");
}

}  // namespace

PromptTooLong::PromptTooLong(size_t bytes_)
    : std::length_error("the prompt is " + std::to_string(bytes_) + " bytes, more than can fit the context"), bytes(bytes_) {}

PreparedChat prepare_chat(const ChatRenderer& render, const tok::Tokenizer& tokenizer, const ChatInput& input) {
    json messages = input.messages;
    ChatTemplate::prepare_messages(messages);  // before bracketing: the arguments' strings are client text too
    json context = {{"messages", bracket_all(messages, tokenizer)}};
    if (!input.tools.empty()) context["tools"] = bracket_all(input.tools, tokenizer);  // the router takes them as sent
    context["add_generation_prompt"] = true;
    context["bos_token"] = token_text(tokenizer, tokenizer.bos());
    context["eos_token"] = token_text(tokenizer, tokenizer.eos());
    for (const auto& [key, value] : input.kwargs.items()) context[key] = value;

    std::vector<tok::TextSpan> literal;
    std::string prompt = take_literal_spans(render(context), literal);
    // The tokenizer adds BOS itself; a template that writes it too would double it.
    const std::string bos = context["bos_token"].get<std::string>();
    if (tokenizer.add_bos() && !bos.empty() && prompt.starts_with(bos)) {
        prompt.erase(0, bos.size());
        for (tok::TextSpan& span : literal) span = {span.begin - std::min(span.begin, bos.size()), span.end - std::min(span.end, bos.size())};
    }

    PreparedChat chat;
    chat.router.start_in_reasoning = ends_with_think(prompt);
    chat.router.tool_syntax = detect_tool_syntax(render, input.tools);  // also routes a reply without tools (gpt-oss's channels)
    chat.router.parse_tool_calls = !input.tools.empty();
    chat.router.tools = input.tools;
    if (input.tool_call_first && chat.router.start_in_reasoning) {  // the call comes first: close the open think block
        prompt += "\n\n</think>\n\n";
        chat.router.start_in_reasoning = false;
    }
    if (prompt.size() > input.max_prompt_bytes) throw PromptTooLong(prompt.size());
    chat.ids = tokenizer.encode_literal(prompt, true, literal);
    return chat;
}

ToolSyntax detect_tool_syntax(const ChatRenderer& render, const json& tools) {
    // how the template writes a call back into the history says how the model writes one (the id has
    // the 9 letters and digits Mistral's templates insist on; a tool list, when the request has none,
    // names another function, so its definition cannot pass for the call; gpt-oss's template needs a
    // description, Mistral's the special-token variables)
    const json probe_tools = !tools.empty() ? tools : json::array({{{"type", "function"}, {"function", {{"name", "probe_def"}, {"description", "probe"}, {"parameters", {{"type", "object"}}}}}}});
    json probe = {{"messages", json::array({{{"role", "user"}, {"content", "x"}},
                                            {{"role", "assistant"}, {"content", ""},
                                             {"tool_calls", json::array({{{"id", "call00001"}, {"type", "function"},
                                                                          {"function", {{"name", "probe_fn"}, {"arguments", {{"probe_arg", 1}}}}}}})}}})},
                  {"tools", probe_tools}, {"add_generation_prompt", false}, {"bos_token", ""}, {"eos_token", ""}};
    std::string text;
    try {
        text = render(probe);
    } catch (const std::exception&) {
        return ToolSyntax::HERMES;  // a template that cannot render the probe: the default syntax
    }
    auto has = [&](std::string_view s) { return text.find(s) != std::string::npos; };
    if (has("to=functions.probe_fn")) return ToolSyntax::HARMONY;
    if (has("<function=probe_fn>")) return ToolSyntax::QWEN_XML;
    if (has("[TOOL_CALLS]")) return has("[ARGS]") ? ToolSyntax::MISTRAL_ARGS : ToolSyntax::MISTRAL_JSON;
    if (!has("<tool_call>") && has(R"({"name": "probe_fn", "parameters")")) return ToolSyntax::LLAMA3_JSON;
    return ToolSyntax::HERMES;
}

}  // namespace llm
