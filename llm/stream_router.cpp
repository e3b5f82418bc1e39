// Routing streamed model text into content, reasoning and tool calls; see stream_router.h.
#include "llm/stream_router.h"

#include <algorithm>

namespace llm {

namespace {

constexpr std::string_view THINK_OPEN = "<think>", THINK_CLOSE = "</think>";
constexpr std::string_view TOOL_OPEN = "<tool_call>", TOOL_CLOSE = "</tool_call>";

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

// The JSON type a tool's parameter is declared with ("" when unknown).
std::string parameter_type(const nlohmann::json& tools, std::string_view function, std::string_view parameter) {
    if (!tools.is_array()) return "";
    for (const auto& tool : tools) {
        const auto* fn = tool.contains("function") ? &tool["function"] : &tool;
        if (!fn->is_object() || fn->value("name", "") != function) continue;
        const auto props = fn->value("/parameters/properties"_json_pointer, nlohmann::json::object());
        if (props.contains(parameter) && props[std::string(parameter)].is_object())
            return props[std::string(parameter)].value("type", "");
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

}  // namespace

void RoutedText::append(RoutedText&& more) {
    content += more.content;
    reasoning += more.reasoning;
    for (auto& call : more.tool_calls) tool_calls.push_back(std::move(call));
}

bool parse_tool_call(std::string_view body, const nlohmann::json& tools, std::string& name, std::string& arguments) {
    body = trim(body);
    if (body.starts_with('{')) return parse_hermes(body, name, arguments);
    return parse_qwen_xml(body, tools, name, arguments);
}

StreamRouter::StreamRouter(RouterOptions options) : options_(std::move(options)) {
    mode_ = options_.start_in_tool_call                          ? Mode::TOOL_CALL
            : options_.parse_reasoning && options_.start_in_reasoning ? Mode::REASONING
            : options_.parse_reasoning                           ? Mode::LEADING
                                                                 : Mode::CONTENT;
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

void StreamRouter::end_tool_call(RoutedText& out, std::string_view body, bool terminated) {
    ToolCall call;
    if (parse_tool_call(body, options_.tools, call.name, call.arguments)) {
        static constexpr char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        call.id = "call_";
        for (int i = 0; i < 24; i++) call.id += ALNUM[rng_() % (sizeof ALNUM - 1)];
        out.tool_calls.push_back(std::move(call));
    } else {  // not a call we understand: the user still sees exactly what the model wrote
        out.content += std::string(TOOL_OPEN) + std::string(body) + (terminated ? std::string(TOOL_CLOSE) : "");
    }
}

// Moves everything that is certain out of pending_; keeps only what may still turn into a tag.
void StreamRouter::route(RoutedText& out, bool at_end) {
    for (;;) {
        switch (mode_) {
        case Mode::LEADING: {  // before any answer text: a <think> may open, after blank space
            std::string_view rest = pending_;
            size_t blank = 0;
            while (blank < rest.size() && is_space(rest[blank])) blank++;
            rest.remove_prefix(blank);
            if (rest.starts_with(THINK_OPEN)) {
                pending_.erase(0, blank + THINK_OPEN.size());
                mode_ = Mode::REASONING;
                continue;
            }
            if (!at_end && THINK_OPEN.starts_with(rest)) return;  // blank, or a piece of "<think>"
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
                size_t open = pending_.find(TOOL_OPEN);
                if (open != std::string::npos) {
                    out.content += pending_.substr(0, open);
                    pending_.erase(0, open + TOOL_OPEN.size());
                    mode_ = Mode::TOOL_CALL;
                    continue;
                }
            }
            size_t hold = at_end || !options_.parse_tool_calls ? 0 : partial_tag_suffix(pending_, TOOL_OPEN);
            out.content += pending_.substr(0, pending_.size() - hold);
            pending_.erase(0, pending_.size() - hold);
            return;
        }
        case Mode::TOOL_CALL: {  // a call is only useful whole: hold it until it closes
            size_t close = pending_.find(TOOL_CLOSE);
            if (close != std::string::npos) {
                end_tool_call(out, std::string_view(pending_).substr(0, close), true);
                pending_.erase(0, close + TOOL_CLOSE.size());
                mode_ = Mode::CONTENT;
                trim_content_start_ = true;  // the blank line between calls is not an answer
                continue;
            }
            if (at_end && !trim(pending_).empty()) end_tool_call(out, pending_, false);
            if (at_end) pending_.clear();
            return;
        }
        }
    }
}

}  // namespace llm
