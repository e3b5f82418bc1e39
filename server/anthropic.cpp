// Anthropic Messages (/v1/messages, /v1/messages/count_tokens): the request becomes the OpenAI chat body
// every API shares (so one parser and one generation path), the reply comes back as a message object
// or as Anthropic's stream of events (https://docs.anthropic.com/en/api/messages-streaming).
#include "server/server_impl.h"

namespace server {

namespace {

// Claude Code starts its system prompt with a line that changes on every request
// ("x-anthropic-billing-header: cc_version=…; cch=…;"); it means nothing to the model and would defeat
// prefix reuse, so such lines are dropped.
constexpr std::string_view BILLING_HEADER = "x-anthropic-billing-header:";

std::string strip_billing_header(const std::string& text) {
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        end = end == std::string::npos ? text.size() : end + 1;
        std::string_view line(text.data() + pos, end - pos);
        if (!line.starts_with(BILLING_HEADER)) out += line;
        pos = end;
    }
    return out;
}

// Text blocks joined; any other block type is refused (this server reads text only).
std::string block_text(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw invalid(where, "must be a string or a list of content blocks");
    std::string text;
    for (const auto& b : content) {
        if (!b.is_object() || string_field(b, "type", where + ".type") != "text" || !b.contains("text") || !b["text"].is_string())
            throw invalid(where, "may only hold {\"type\": \"text\", \"text\": …} blocks here: this server reads text only");
        text += b["text"].get<std::string>();
    }
    return text;
}

std::string system_text(const json& system) {
    if (system.is_string()) return strip_billing_header(system.get<std::string>());
    if (!system.is_array()) throw invalid("system", "must be a string or a list of text blocks");
    std::string text;
    for (const auto& b : system) {
        std::string part = strip_billing_header(block_text(json::array({b}), "system"));
        if (part.empty()) continue;
        if (!text.empty()) text += "\n\n";
        text += part;
    }
    return text;
}

// One Anthropic message as OpenAI chat messages: tool_result blocks become "tool" messages (before
// the user's text), tool_use blocks an assistant's tool_calls, thinking blocks its reasoning_content.
void add_message(const json& m, size_t i, json& out) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw invalid(where, "must be an object");
    const std::string role = string_field(m, "role", where + ".role");
    if (role != "user" && role != "assistant") throw invalid(where + ".role", "must be user or assistant");
    if (!m.contains("content")) throw invalid(where + ".content", "is required");
    const json& content = m["content"];
    if (content.is_string()) {
        out.push_back({{"role", role}, {"content", content}});
        return;
    }
    if (!content.is_array()) throw invalid(where + ".content", "must be a string or a list of content blocks");
    std::string text, reasoning;
    json tool_calls = json::array();
    for (size_t k = 0; k < content.size(); k++) {
        const json& b = content[k];
        const std::string at = where + ".content[" + std::to_string(k) + "]";
        const std::string type = string_field(b, "type", at + ".type");
        if (type == "text" && b.contains("text") && b["text"].is_string()) {
            text += b["text"].get<std::string>();
        } else if (type == "thinking" && role == "assistant") {
            reasoning += string_field(b, "thinking", at + ".thinking");
        } else if (type == "redacted_thinking") {
            // encrypted by Anthropic's servers: nothing a local model can read
        } else if (type == "tool_use" && role == "assistant") {
            if (!b.contains("name") || !b["name"].is_string()) throw invalid(at + ".name", "must be a string");
            json input = b.contains("input") ? b["input"] : json::object();
            tool_calls.push_back({{"id", string_field(b, "id", at + ".id")}, {"type", "function"}, {"function", {{"name", b["name"]}, {"arguments", input}}}});
        } else if (type == "tool_result" && role == "user") {
            std::string result = b.contains("content") ? block_text(b["content"], at + ".content") : "";
            if (boolean(b, "is_error", false, at + ".is_error")) result = "Error: " + result;
            out.push_back({{"role", "tool"}, {"tool_call_id", string_field(b, "tool_use_id", at + ".tool_use_id")}, {"content", result}});
        } else {
            throw invalid(at, "has type '" + type + "', which a " + role + " message cannot hold here (text, " +
                                  (role == "user" ? "tool_result" : "tool_use, thinking") + "; this server reads text only)");
        }
    }
    if (role == "user" && text.empty() && !out.empty() && out.back()["role"] == "tool") return;  // only tool results
    json msg = {{"role", role}, {"content", text}};
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!tool_calls.empty()) msg["tool_calls"] = tool_calls;
    out.push_back(std::move(msg));
}

void translate_tools(const json& body, json& chat) {
    json tools = json::array();
    if (!present(body, "tools")) return;
    if (!body["tools"].is_array()) throw invalid("tools", "must be a list");
    for (const auto& t : body["tools"]) {
        if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("input_schema"))
            throw invalid("tools", "entries must be client tools {\"name\", \"description\", \"input_schema\"} "
                                   "(Anthropic's server tools do not run here)");
        json fn = {{"name", t["name"]}, {"parameters", t["input_schema"]}};
        if (t.contains("description")) fn["description"] = t["description"];
        tools.push_back({{"type", "function"}, {"function", fn}});
    }
    chat["tools"] = tools;
}

// any / tool become "required" / a named function: the shared parser then constrains the reply to a
// call whose input matches the tool's input_schema; disable_parallel_tool_use allows only one call.
void translate_tool_choice(const json& body, json& chat) {
    if (!present(body, "tool_choice")) return;
    const json& c = body["tool_choice"];
    const std::string type = string_field(c, "type", "tool_choice.type");
    if (type == "auto") chat["tool_choice"] = "auto";
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "none") chat["tool_choice"] = "none";
    else if (type == "tool" && c.contains("name") && c["name"].is_string())
        chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", c["name"]}}}};
    else throw invalid("tool_choice", "must be {\"type\": \"auto\" | \"any\" | \"none\"} or {\"type\": \"tool\", \"name\"}");
    if (present(c, "disable_parallel_tool_use")) {
        if (!c["disable_parallel_tool_use"].is_boolean()) throw invalid("tool_choice.disable_parallel_tool_use", "must be true or false");
        chat["parallel_tool_calls"] = !c["disable_parallel_tool_use"].get<bool>();
    }
}

std::string stop_reason(const Outcome& o) {
    if (o.finish_reason == "length") return "max_tokens";
    if (o.finish_reason == "tool_calls") return "tool_use";
    return o.stop_string.empty() ? "end_turn" : "stop_sequence";
}

json usage(const Outcome& o) {
    const auto& r = o.result;
    // Anthropic counts cached prompt tokens apart: input_tokens are the ones computed anew.
    return {{"input_tokens", r.n_prompt - r.n_reused}, {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", r.n_reused}, {"output_tokens", int(r.ids.size())}};
}

json tool_use_block(const llm::ToolCall& call) {
    json input = json::parse(call.arguments, nullptr, false);
    if (input.is_discarded() || !input.is_object()) input = json::object();
    return {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", input}};
}

std::string event(const char* name, const json& data) { return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n"; }

class AnthropicFormat final : public ReplyFormat {
public:
    explicit AnthropicFormat(const Job& job) : job_(job) {}

    json whole(const Delta& reply, const Outcome& o) override {
        json content = json::array();
        const auto& t = reply.text;
        if (!t.reasoning.empty()) content.push_back({{"type", "thinking"}, {"thinking", t.reasoning}, {"signature", ""}});
        if (!t.content.empty()) content.push_back({{"type", "text"}, {"text", t.content}});
        for (const auto& call : t.tool_calls) content.push_back(tool_use_block(call));
        json m = message(content, stop_reason(o), o);
        m["usage"] = usage(o);
        return m;
    }

    std::string start() override {
        json m = message(json::array(), nullptr, Outcome{});
        m["usage"] = {{"input_tokens", job_.prompt.size()}, {"output_tokens", 0}};
        return event("message_start", {{"type", "message_start"}, {"message", m}}) + event("ping", {{"type", "ping"}});
    }

    std::string on_delta(const Delta& d) override {
        std::string out;  // one statement per piece: open() moves the index the deltas carry
        if (!d.text.reasoning.empty()) {
            out += open(Block::THINKING, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
            out += delta({{"type", "thinking_delta"}, {"thinking", d.text.reasoning}});
        }
        if (!d.text.content.empty()) {
            out += open(Block::TEXT, {{"type", "text"}, {"text", ""}});
            out += delta({{"type", "text_delta"}, {"text", d.text.content}});
        }
        for (const auto& call : d.text.tool_calls) {
            json block = tool_use_block(call);
            const std::string input = dump(block["input"]);
            block["input"] = json::object();
            out += open(Block::TOOL_USE, block);
            out += delta({{"type", "input_json_delta"}, {"partial_json", input}});
            out += close();
        }
        return out;
    }

    std::string finish(const Outcome& o) override {
        json u = usage(o);
        std::string out = close();
        return out +
               event("message_delta", {{"type", "message_delta"},
                                       {"delta", {{"stop_reason", stop_reason(o)}, {"stop_sequence", stop_sequence(o)}}},
                                       {"usage", u}}) +
               event("message_stop", {{"type", "message_stop"}});
    }

    std::string error(const ApiError& e) override { return event("error", error_json(e, ErrorShape::ANTHROPIC)); }
    std::string keep_alive() override { return event("ping", {{"type", "ping"}}); }

private:
    enum class Block { NONE, THINKING, TEXT, TOOL_USE };

    static json stop_sequence(const Outcome& o) { return o.stop_string.empty() ? json() : json(o.stop_string); }

    json message(json content, json stop, const Outcome& o) const {
        json sequence = stop.is_null() ? json() : stop_sequence(o);
        return {{"id", job_.id}, {"type", "message"}, {"role", "assistant"}, {"model", job_.model}, {"content", std::move(content)},
                {"stop_reason", std::move(stop)}, {"stop_sequence", std::move(sequence)}};
    }
    std::string open(Block kind, const json& block) {
        if (open_ == kind && kind != Block::TOOL_USE) return "";
        std::string out = close();
        open_ = kind;
        out += event("content_block_start", {{"type", "content_block_start"}, {"index", ++index_}, {"content_block", block}});
        return out;
    }
    std::string delta(const json& d) const {
        return event("content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", d}});
    }
    std::string close() {
        if (open_ == Block::NONE) return "";
        open_ = Block::NONE;
        return event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
    }

    const Job& job_;
    Block open_ = Block::NONE;
    int index_ = -1;
};

}  // namespace

json anthropic_to_chat(const json& body, bool count_only) {
    json chat = json::object();
    if (present(body, "model")) chat["model"] = body["model"];
    if (!count_only) {
        if (!present(body, "max_tokens")) throw invalid("max_tokens", "is required");
        chat["max_tokens"] = body["max_tokens"];
        for (const char* key : {"temperature", "top_p", "top_k", "stream"})
            if (present(body, key)) chat[key] = body[key];
        if (present(body, "stop_sequences")) chat["stop"] = body["stop_sequences"];
        if (present(body, "metadata") && !body["metadata"].is_object()) throw invalid("metadata", "must be an object");
    }
    json messages = json::array();
    if (present(body, "system")) {
        std::string system = system_text(body["system"]);
        if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    }
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
        throw invalid("messages", "must be a non-empty list of messages");
    for (size_t i = 0; i < body["messages"].size(); i++) add_message(body["messages"][i], i, messages);
    chat["messages"] = messages;
    translate_tools(body, chat);
    translate_tool_choice(body, chat);
    if (present(body, "thinking")) {  // {"type": "enabled", "budget_tokens": N} or {"type": "disabled"}
        const json& t = body["thinking"];
        if (!t.is_object() || !t.contains("type")) throw invalid("thinking", "must be {\"type\": \"enabled\" | \"disabled\"}");
        chat["chat_template_kwargs"] = {{"enable_thinking", t["type"] != "disabled"}};
    }
    return chat;
}

Job parse_anthropic_request(const json& body, const llm::Session& session, const ChatRenderer& render_chat,
                            const std::string& model_name) {
    Job job = parse_chat_request(anthropic_to_chat(body, false), session, render_chat, model_name);
    job.id = random_id("msg_");
    return job;
}

std::unique_ptr<ReplyFormat> anthropic_format(const Job& job) { return std::make_unique<AnthropicFormat>(job); }

}  // namespace server
