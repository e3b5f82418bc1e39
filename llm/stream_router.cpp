// Routing streamed model text into content, reasoning and tool calls; see stream_router.h.
#include "llm/stream_router.h"

#include <algorithm>

namespace llm {

namespace {

constexpr std::string_view THINK_OPEN = "<think>", THINK_CLOSE = "</think>";

// Each syntax's call markers. A call with no closer runs to the end of the reply (the model ends its
// turn after calling). `visible`: an unparsable call shows its opener (text the model wrote), rather
// than dropping it (a control token the client must not see).
struct CallTags {
    std::string_view open, close;
    bool visible;
};
CallTags call_tags(ToolSyntax syntax) {
    switch (syntax) {
    case ToolSyntax::HERMES:
    case ToolSyntax::QWEN_XML: return {"<tool_call>", "</tool_call>", true};
    case ToolSyntax::LLAMA3_JSON: return {"<|python_tag|>", "", false};
    case ToolSyntax::MISTRAL_JSON:
    case ToolSyntax::MISTRAL_ARGS: return {"[TOOL_CALLS]", "", false};
    case ToolSyntax::HARMONY: break;  // channels: route_harmony
    }
    return {"", "", false};
}

// harmony (https://cookbook.openai.com/articles/openai-harmony): a message is a header up to
// <|message|>, then its text up to <|end|>, <|call|> or <|return|> (the last two end the reply; they
// arrive as text only in vocabularies that lack them as tokens).
constexpr std::string_view H_START = "<|start|>", H_CHANNEL = "<|channel|>", H_MESSAGE = "<|message|>", H_CONSTRAIN = "<|constrain|>";
constexpr std::string_view H_ENDS[] = {"<|end|>", "<|call|>", "<|return|>"};

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// Length of the longest suffix of `text` that is a proper prefix of `tag`: text that may still become
// the tag once the next piece arrives.
size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
    for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; n--)
        if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
    return 0;
}

// The JSON type a tool's parameter is declared with: its "type", the first besides "null" of a list
// of types ("" when unknown).
std::string parameter_type(const nlohmann::json& tools, std::string_view function, std::string_view parameter) {
    if (!tools.is_array()) return "";
    for (const auto& tool : tools) {
        const auto* fn = tool.is_object() && tool.contains("function") ? &tool["function"] : &tool;
        if (!fn->is_object() || !fn->contains("name") || (*fn)["name"] != std::string(function)) continue;
        const auto props = fn->value("/parameters/properties"_json_pointer, nlohmann::json::object());
        if (!props.is_object() || !props.contains(parameter) || !props[std::string(parameter)].is_object()) return "";
        const auto& type = props[std::string(parameter)].value("type", nlohmann::json());
        if (type.is_string()) return type.get<std::string>();
        if (type.is_array())
            for (const auto& t : type)
                if (t.is_string() && t != "null") return t.get<std::string>();
        return "";
    }
    return "";
}

bool parse_hermes(std::string_view body, std::string& name, std::string& arguments) {
    auto call = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return false;
    name = call["name"].get<std::string>();
    const auto& args = call.contains("arguments") ? call["arguments"] : call.value("parameters", nlohmann::json::object());
    if (args.is_string()) {  // already serialized: keep it, but only if it is a JSON object
        auto parsed = nlohmann::json::parse(args.get<std::string>(), nullptr, false);
        if (!parsed.is_object()) return false;
        arguments = args.get<std::string>();
    } else if (args.is_object()) {
        arguments = args.dump();
    } else {
        return false;
    }
    return !name.empty();
}

// <function=NAME>\n<parameter=K>\nV\n</parameter>\n…</function>
bool parse_qwen_xml(std::string_view body, const nlohmann::json& tools, std::string& name, std::string& arguments) {
    constexpr std::string_view FN = "<function=", PARAM = "<parameter=", PARAM_END = "</parameter>", FN_END = "</function>";
    if (!body.starts_with(FN)) return false;
    size_t gt = body.find('>');
    if (gt == std::string_view::npos) return false;
    name = std::string(trim(body.substr(FN.size(), gt - FN.size())));
    std::string_view rest = trim(body.substr(gt + 1));
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    while (rest.starts_with(PARAM)) {
        size_t key_end = rest.find('>');
        size_t value_end = rest.find(PARAM_END);
        if (key_end == std::string_view::npos || value_end == std::string_view::npos || value_end < key_end) return false;
        std::string key(trim(rest.substr(PARAM.size(), key_end - PARAM.size())));
        std::string_view value = rest.substr(key_end + 1, value_end - key_end - 1);
        if (value.starts_with('\n')) value.remove_prefix(1);  // the template's own line breaks
        if (value.ends_with('\n')) value.remove_suffix(1);
        // Values are bare text: typed by the tool's schema, else JSON when it parses, else a string.
        auto typed = parameter_type(tools, name, key) == "string"
                         ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded)
                         : nlohmann::ordered_json::parse(value, nullptr, false);
        args[key] = typed.is_discarded() ? nlohmann::ordered_json(std::string(value)) : typed;
        rest = trim(rest.substr(value_end + PARAM_END.size()));
    }
    if (rest != FN_END || name.empty()) return false;
    arguments = args.dump();
    return true;
}

// The end of the JSON object or list that `s` starts with (npos when it does not close).
size_t json_value_end(std::string_view s) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < s.size(); i++) {
        const char c = s[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return i + 1;
        }
    }
    return std::string_view::npos;
}

// Mistral's N[CALL_ID]ID[ARGS]{…}
bool parse_mistral_args(std::string_view call, std::string& name, std::string& arguments) {
    constexpr std::string_view ARGS = "[ARGS]", CALL_ID = "[CALL_ID]";
    const size_t args = call.find(ARGS);
    if (args == std::string_view::npos) return false;
    std::string_view head = call.substr(0, args);
    if (size_t id = head.find(CALL_ID); id != std::string_view::npos) head = head.substr(0, id);
    name = std::string(trim(head));
    auto parsed = nlohmann::json::parse(trim(call.substr(args + ARGS.size())), nullptr, false);
    if (!parsed.is_object() || name.empty() || name.find_first_of("{[\"") != std::string::npos) return false;
    arguments = parsed.dump();
    return true;
}

}  // namespace

bool parse_call_list(std::string_view body, std::vector<std::pair<std::string, std::string>>& calls) {
    calls.clear();
    body = trim(body);
    std::string name, arguments;
    if (body.starts_with('[')) {  // [{…}, {…}]
        auto list = nlohmann::json::parse(body, nullptr, false);
        if (!list.is_array() || list.empty()) return false;
        for (const auto& item : list) {
            if (!parse_hermes(item.dump(), name, arguments)) return calls.clear(), false;
            calls.push_back({name, arguments});
        }
        return true;
    }
    if (body.starts_with('{')) {  // {…}; {…}
        while (!body.empty()) {
            const size_t end = json_value_end(body);
            if (end == std::string_view::npos || !parse_hermes(body.substr(0, end), name, arguments)) return calls.clear(), false;
            calls.push_back({name, arguments});
            body = trim(body.substr(end));
            if (body.starts_with(';') || body.starts_with(',')) body = trim(body.substr(1));
        }
        return true;
    }
    constexpr std::string_view NEXT = "[TOOL_CALLS]";  // N[ARGS]{…}[TOOL_CALLS]N2[ARGS]{…}
    while (!body.empty()) {
        const size_t next = body.find(NEXT);
        if (!parse_mistral_args(body.substr(0, next), name, arguments)) return calls.clear(), false;
        calls.push_back({name, arguments});
        body = next == std::string_view::npos ? std::string_view() : trim(body.substr(next + NEXT.size()));
    }
    return !calls.empty();
}

void RoutedText::append(RoutedText&& more) {
    content += more.content;
    reasoning += more.reasoning;
    for (auto& call : more.tool_calls) tool_calls.push_back(std::move(call));
}

std::string_view tool_call_opener(ToolSyntax syntax) { return call_tags(syntax).open; }

bool parse_tool_call(std::string_view body, const nlohmann::json& tools, std::string& name, std::string& arguments) {
    body = trim(body);
    if (body.starts_with('{')) return parse_hermes(body, name, arguments);
    return parse_qwen_xml(body, tools, name, arguments);
}

StreamRouter::StreamRouter(RouterOptions options) : options_(std::move(options)) {
    const bool whole_reply_calls = options_.parse_tool_calls && options_.tool_syntax == ToolSyntax::LLAMA3_JSON;
    mode_ = options_.tool_syntax == ToolSyntax::HARMONY                 ? Mode::HEADER
            : options_.parse_reasoning && options_.start_in_reasoning ? Mode::REASONING
            : options_.parse_reasoning || whole_reply_calls          ? Mode::LEADING
                                                                       : Mode::CONTENT;
}

bool StreamRouter::reads_marker(std::string_view token_text) const {
    if (options_.tool_syntax == ToolSyntax::HARMONY)
        return token_text == H_START || token_text == H_CHANNEL || token_text == H_MESSAGE || token_text == H_CONSTRAIN ||
               token_text == H_ENDS[0];
    if (!options_.parse_tool_calls) return false;
    const CallTags tags = call_tags(options_.tool_syntax);
    return token_text == tags.open || (!tags.close.empty() && token_text == tags.close) ||
           (options_.tool_syntax == ToolSyntax::MISTRAL_ARGS && (token_text == "[ARGS]" || token_text == "[CALL_ID]"));
}

RoutedText StreamRouter::push(std::string_view text) {
    pending_ += text;
    RoutedText out;
    route(out, false);
    return out;
}

RoutedText StreamRouter::finish() {
    RoutedText out;
    route(out, true);
    return out;
}

void StreamRouter::add_call(RoutedText& out, std::string name, std::string arguments) {
    static constexpr char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    ToolCall call{.id = "call_", .name = std::move(name), .arguments = std::move(arguments)};
    int n = 24;
    // Mistral's templates refuse any id but 9 letters and digits when the call comes back in the history
    if (options_.tool_syntax == ToolSyntax::MISTRAL_JSON || options_.tool_syntax == ToolSyntax::MISTRAL_ARGS) call.id.clear(), n = 9;
    for (int i = 0; i < n; i++) call.id += ALNUM[rng_() % (sizeof ALNUM - 1)];
    out.tool_calls.push_back(std::move(call));
}

void StreamRouter::end_tool_call(RoutedText& out, std::string_view body, bool terminated) {
    const CallTags tags = call_tags(options_.tool_syntax);
    std::string name, arguments;
    if (!tags.close.empty()) {  // one call per <tool_call> block
        if (parse_tool_call(body, options_.tools, name, arguments)) return add_call(out, std::move(name), std::move(arguments));
    } else if (std::vector<std::pair<std::string, std::string>> calls; parse_call_list(body, calls)) {
        // a reply that only looks like a call (Llama 3.x's bare JSON) must name an offered tool
        const bool known = !whole_reply_call_ || std::all_of(calls.begin(), calls.end(), [&](const auto& c) {
            return std::any_of(options_.tools.begin(), options_.tools.end(),
                               [&](const auto& t) { return t.value("/function/name"_json_pointer, nlohmann::json()) == c.first; });
        });
        if (known) {
            for (auto& [n, a] : calls) add_call(out, std::move(n), std::move(a));
            return;
        }
    }
    // not a call we understand: the user sees what the model wrote, control tokens aside
    if (!whole_reply_call_ && tags.visible) out.content += tags.open;
    out.content += body;
    if (terminated) out.content += tags.close;
}

// Moves everything that is certain out of pending_; keeps only what may still turn into a tag.
void StreamRouter::route(RoutedText& out, bool at_end) {
    const CallTags tags = call_tags(options_.tool_syntax);
    for (;;) {
        switch (mode_) {
        case Mode::LEADING: {  // before any answer text: a <think> may open, after blank space
            std::string_view rest = pending_;
            size_t blank = 0;
            while (blank < rest.size() && is_space(rest[blank])) blank++;
            rest.remove_prefix(blank);
            if (options_.parse_reasoning && rest.starts_with(THINK_OPEN)) {
                pending_.erase(0, blank + THINK_OPEN.size());
                mode_ = Mode::REASONING;
                continue;
            }
            if (options_.parse_tool_calls && options_.tool_syntax == ToolSyntax::LLAMA3_JSON && rest.starts_with('{')) {
                pending_.erase(0, blank);  // Llama 3.x writes a call as the whole reply
                whole_reply_call_ = true;
                mode_ = Mode::TOOL_CALL;
                continue;
            }
            if (!at_end && (rest.empty() || (options_.parse_reasoning && THINK_OPEN.starts_with(rest)))) return;
            mode_ = Mode::CONTENT;
            continue;
        }
        case Mode::REASONING: {
            size_t close = pending_.find(THINK_CLOSE);
            if (close != std::string::npos) {
                out.reasoning += pending_.substr(0, close);
                pending_.erase(0, close + THINK_CLOSE.size());
                mode_ = Mode::CONTENT;
                trim_content_start_ = true;
                continue;
            }
            size_t hold = at_end ? 0 : partial_tag_suffix(pending_, THINK_CLOSE);
            out.reasoning += pending_.substr(0, pending_.size() - hold);
            pending_.erase(0, pending_.size() - hold);
            return;
        }
        case Mode::CONTENT: {
            if (trim_content_start_) {
                size_t blank = 0;
                while (blank < pending_.size() && is_space(pending_[blank])) blank++;
                pending_.erase(0, blank);
                if (pending_.empty()) return;
                trim_content_start_ = false;
            }
            if (options_.parse_tool_calls) {
                size_t open = pending_.find(tags.open);
                if (open != std::string::npos) {
                    out.content += pending_.substr(0, open);
                    pending_.erase(0, open + tags.open.size());
                    mode_ = Mode::TOOL_CALL;
                    continue;
                }
            }
            size_t hold = at_end || !options_.parse_tool_calls ? 0 : partial_tag_suffix(pending_, tags.open);
            out.content += pending_.substr(0, pending_.size() - hold);
            pending_.erase(0, pending_.size() - hold);
            return;
        }
        case Mode::TOOL_CALL: {  // a call is only useful whole: hold it until it closes
            size_t close = tags.close.empty() ? std::string::npos : pending_.find(tags.close);
            if (close != std::string::npos) {
                end_tool_call(out, std::string_view(pending_).substr(0, close), true);
                pending_.erase(0, close + tags.close.size());
                mode_ = Mode::CONTENT;
                trim_content_start_ = true;  // the blank line between calls is not an answer
                continue;
            }
            // without a closer the calls run to the end of the reply
            if (at_end && !trim(pending_).empty()) end_tool_call(out, pending_, false);
            if (at_end) pending_.clear();
            return;
        }
        case Mode::HEADER:
        case Mode::MESSAGE:
            if (!route_harmony(out, at_end)) return;
            continue;
        }
    }
}

namespace {

// The word after `key` in a harmony header ("" when absent): up to a space or the next marker.
std::string header_word(std::string_view header, std::string_view key) {
    size_t at = header.find(key);
    if (at == std::string_view::npos) return "";
    std::string_view rest = header.substr(at + key.size());
    return std::string(rest.substr(0, rest.find_first_of(" \n<")));
}

}  // namespace

bool StreamRouter::route_harmony(RoutedText& out, bool at_end) {
    if (mode_ == Mode::HEADER) {
        // a header: "<|start|>assistant", "<|channel|>C", or " to=R" right after the prompt's "<|start|>assistant"
        constexpr std::string_view OPENERS[] = {H_START, H_CHANNEL, " to=", "to="};
        const std::string_view rest = pending_;
        bool header = false, maybe = false;
        for (std::string_view o : OPENERS) header = header || rest.starts_with(o), maybe = maybe || o.starts_with(rest);
        if (!header) {
            if (!at_end && maybe) return false;
            // text outside any message (a model that skips the markup) is content, up to the next header
            const size_t next = std::min(pending_.find(H_START, 1), pending_.find(H_CHANNEL, 1));
            size_t take = next;
            if (next == std::string::npos)
                take = pending_.size() - (at_end ? 0 : std::max(partial_tag_suffix(pending_, H_START), partial_tag_suffix(pending_, H_CHANNEL)));
            out.content += pending_.substr(0, take);
            pending_.erase(0, take);
            return next != std::string::npos;
        }
        const size_t message = pending_.find(H_MESSAGE);
        if (message == std::string::npos) {
            if (at_end) pending_.clear();  // a header without a message says nothing
            return false;
        }
        const std::string_view header_text = std::string_view(pending_).substr(0, message);
        channel_ = header_word(header_text, H_CHANNEL);
        recipient_ = header_word(header_text, "to=");
        pending_.erase(0, message + H_MESSAGE.size());
        mode_ = Mode::MESSAGE;
        return true;
    }
    size_t end = std::string::npos, end_len = 0;
    for (std::string_view tag : H_ENDS)
        if (size_t at = pending_.find(tag); at < end) end = at, end_len = tag.size();
    const bool call = recipient_.starts_with("functions.");
    std::string& sink = channel_ == "analysis" && options_.parse_reasoning ? out.reasoning : out.content;
    if (call && (end != std::string::npos || at_end)) {  // a call message is only useful whole
        const std::string_view body = trim(std::string_view(pending_).substr(0, end));
        auto args = nlohmann::json::parse(body, nullptr, false);
        if (args.is_string()) args = nlohmann::json::parse(args.get<std::string>(), nullptr, false);  // arguments as a JSON string
        if (options_.parse_tool_calls && args.is_object()) add_call(out, recipient_.substr(10), args.dump());
        else out.content += body;
    } else if (!call) {
        size_t take = end;
        if (end == std::string::npos) {
            size_t hold = 0;
            for (std::string_view tag : H_ENDS) hold = std::max(hold, at_end ? 0 : partial_tag_suffix(pending_, tag));
            take = pending_.size() - hold;
        }
        sink += pending_.substr(0, take);
        pending_.erase(0, take);
        if (end == std::string::npos) return false;
        pending_.erase(0, end_len);
        mode_ = Mode::HEADER;
        return true;
    }
    if (end == std::string::npos) {
        if (at_end) pending_.clear();
        return false;
    }
    pending_.erase(0, end + end_len);
    mode_ = Mode::HEADER;
    return true;
}

}  // namespace llm
