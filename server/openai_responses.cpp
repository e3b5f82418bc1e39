// OpenAI Responses (/v1/responses), stateless: input items become the shared OpenAI chat body, the
// reply comes back as a response object with output items, or as its stream of typed events
// (https://platform.openai.com/docs/api-reference/responses-streaming).
#include "server/server_impl.h"

namespace server {

namespace {

std::string content_text(const json& content, const std::string& where) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) throw invalid(where, "must be a string or a list of content parts");
    std::string text;
    for (const auto& part : content) {
        const std::string type = string_field(part, "type", where + ".type");
        if ((type != "input_text" && type != "output_text" && type != "text") || !part.contains("text") || !part["text"].is_string())
            throw invalid(where, "may only hold input_text / output_text parts: this server reads text only");
        text += part["text"].get<std::string>();
    }
    return text;
}

// input items → OpenAI chat messages; consecutive function_call items join one assistant message.
json input_messages(const json& body) {
    json messages = json::array();
    if (present(body, "instructions")) {
        if (!body["instructions"].is_string()) throw invalid("instructions", "must be a string");
        messages.push_back({{"role", "system"}, {"content", body["instructions"]}});
    }
    if (!present(body, "input")) throw invalid("input", "is required");
    const json& input = body["input"];
    if (input.is_string()) {
        messages.push_back({{"role", "user"}, {"content", input}});
        return messages;
    }
    if (!input.is_array() || input.empty()) throw invalid("input", "must be a string or a non-empty list of items");
    for (size_t i = 0; i < input.size(); i++) {
        const json& item = input[i];
        const std::string where = "input[" + std::to_string(i) + "]";
        if (!item.is_object()) throw invalid(where, "must be an object");
        const std::string type = string_field(item, "type", where + ".type", "message");
        if (type == "message") {
            std::string role = string_field(item, "role", where + ".role");
            if (role == "developer") role = "system";
            if (role != "system" && role != "user" && role != "assistant") throw invalid(where + ".role", "must be system, developer, user or assistant");
            messages.push_back({{"role", role}, {"content", content_text(item.value("content", json("")), where + ".content")}});
        } else if (type == "function_call") {
            if (!item.contains("name") || !item["name"].is_string()) throw invalid(where + ".name", "must be a string");
            json call = {{"id", string_field(item, "call_id", where + ".call_id")}, {"type", "function"},
                         {"function", {{"name", item["name"]}, {"arguments", string_field(item, "arguments", where + ".arguments", "{}")}}}};
            if (messages.empty() || messages.back()["role"] != "assistant")  // else: the same assistant turn
                messages.push_back({{"role", "assistant"}, {"content", ""}});
            if (!messages.back().contains("tool_calls")) messages.back()["tool_calls"] = json::array();
            messages.back()["tool_calls"].push_back(call);
        } else if (type == "function_call_output") {
            const json& output = item.value("output", json(""));
            messages.push_back({{"role", "tool"}, {"tool_call_id", string_field(item, "call_id", where + ".call_id")},
                                {"content", output.is_string() ? output.get<std::string>() : content_text(output, where + ".output")}});
        } else if (type == "reasoning") {
            // a previous turn's reasoning: templates drop it from history anyway
        } else {
            throw invalid(where + ".type", "'" + type + "' is not supported (message, function_call, function_call_output, reasoning)");
        }
    }
    return messages;
}

json translate_tools(const json& body) {
    json tools = json::array();
    if (!present(body, "tools")) return tools;
    if (!body["tools"].is_array()) throw invalid("tools", "must be a list");
    for (const auto& t : body["tools"]) {
        if (!t.is_object() || string_field(t, "type", "tools.type") != "function" || !t.contains("name") || !t["name"].is_string())
            throw invalid("tools", "entries must be {\"type\": \"function\", \"name\", \"parameters\"} (built-in tools do not run here)");
        json fn = {{"name", t["name"]}, {"parameters", t.value("parameters", json::object())}};
        if (t.contains("description")) fn["description"] = t["description"];
        tools.push_back({{"type", "function"}, {"function", fn}});
    }
    return tools;
}

// text.format as the shared body's response_format: {type: "json_schema", name, schema, strict} keeps
// its fields one level down (json_schema: {…}); json_object and text as they are.
json text_format(const json& text) {
    if (!text.is_object()) throw invalid("text", "must be an object");
    if (!present(text, "format")) return {{"type", "text"}};
    const json& f = text["format"];
    const std::string type = f.is_object() && f.contains("type") && f["type"].is_string() ? f["type"].get<std::string>() : "";
    if (type == "text" || type == "json_object") return {{"type", type}};
    if (type != "json_schema")
        throw invalid("text.format", "must be {\"type\": \"text\" | \"json_object\"} or {\"type\": \"json_schema\", \"name\", \"schema\"}");
    if (!f.contains("schema")) throw invalid("text.format.schema", "is required for json_schema");
    json schema = {{"name", string_field(f, "name", "text.format.name", "response")}, {"schema", f["schema"]}};
    if (f.contains("strict")) schema["strict"] = f["strict"];
    return {{"type", "json_schema"}, {"json_schema", schema}};
}

json to_chat(const json& body) {
    if (present(body, "previous_response_id"))
        throw invalid("previous_response_id", "is not supported: this server keeps no responses; send the whole conversation in 'input'");
    json chat = {{"messages", input_messages(body)}};
    for (const char* key : {"model", "temperature", "top_p", "stream"})
        if (present(body, key)) chat[key] = body[key];
    if (present(body, "max_output_tokens")) chat["max_tokens"] = body["max_output_tokens"];
    json tools = translate_tools(body);
    if (!tools.empty()) chat["tools"] = tools;
    if (present(body, "tool_choice")) {
        const json& c = body["tool_choice"];
        if (string_field(c, "type", "tool_choice.type") == "function" && c.contains("name"))
            chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", c["name"]}}}};
        else chat["tool_choice"] = c;
    }
    if (present(body, "text")) chat["response_format"] = text_format(body["text"]);
    if (present(body, "parallel_tool_calls")) chat["parallel_tool_calls"] = body["parallel_tool_calls"];
    json kwargs = json::object();
    if (present(body, "reasoning") && body["reasoning"].is_object() && present(body["reasoning"], "effort")) {
        const json& effort = body["reasoning"]["effort"];  // templates that take it (gpt-oss) read reasoning_effort
        kwargs["reasoning_effort"] = effort;
        if (effort == "none" || effort == "minimal") kwargs["enable_thinking"] = false;
    }
    if (!kwargs.empty()) chat["chat_template_kwargs"] = kwargs;
    return chat;
}

json usage(const Outcome& o) {
    const auto& r = o.result;
    const int n_out = int(r.ids.size());
    return {{"input_tokens", r.n_prompt}, {"input_tokens_details", {{"cached_tokens", r.n_reused}}}, {"output_tokens", n_out},
            {"output_tokens_details", {{"reasoning_tokens", 0}}}, {"total_tokens", r.n_prompt + n_out}};
}

std::string event(const std::string& type, json data, int& sequence) {
    json e = {{"type", type}, {"sequence_number", sequence++}};
    for (auto& [k, v] : data.items()) e[k] = v;
    return "event: " + type + "\ndata: " + dump(e) + "\n\n";
}

class ResponsesFormat final : public ReplyFormat {
public:
    ResponsesFormat(const Job& job, const json& request) : job_(job) {
        // The request's settings, echoed as the response object carries them.
        for (const char* key : {"instructions", "max_output_tokens", "temperature", "top_p", "tool_choice", "tools", "reasoning", "metadata"})
            echo_[key] = request.contains(key) ? request[key] : json();
        if (echo_["tools"].is_null()) echo_["tools"] = json::array();
        if (echo_["tool_choice"].is_null()) echo_["tool_choice"] = "auto";
        if (echo_["metadata"].is_null()) echo_["metadata"] = json::object();
        if (present(request, "text")) echo_["text"] = {{"format", text_format(request["text"])}};
        if (present(request, "parallel_tool_calls")) echo_["parallel_tool_calls"] = request["parallel_tool_calls"];
    }

    json whole(const Delta& reply, const Outcome& o) override {
        const auto& t = reply.text;
        json output = json::array();
        if (!t.reasoning.empty()) output.push_back(reasoning_item(random_id("rs_"), t.reasoning));
        if (!t.content.empty()) output.push_back(message_item(random_id("msg_"), t.content, "completed"));
        for (const auto& call : t.tool_calls) output.push_back(call_item(call, "completed"));
        return response(o.finish_reason == "length" ? "incomplete" : "completed", output, &o);
    }

    std::string start() override {
        json r = response("in_progress", json::array(), nullptr);
        std::string out = event("response.created", {{"response", r}}, seq_);  // in order: each takes a sequence number
        return out + event("response.in_progress", {{"response", r}}, seq_);
    }

    std::string on_delta(const Delta& d) override {
        std::string out;
        if (!d.text.reasoning.empty()) {
            out += open(Item::REASONING);
            text_ += d.text.reasoning;
            out += event("response.reasoning_text.delta", where(0, {{"delta", d.text.reasoning}}), seq_);
        }
        if (!d.text.content.empty()) {
            out += open(Item::MESSAGE);
            text_ += d.text.content;
            out += event("response.output_text.delta", where(0, {{"delta", d.text.content}, {"logprobs", json::array()}}), seq_);
        }
        for (const auto& call : d.text.tool_calls) {
            out += close();
            const int index = int(output_.size());
            json item = call_item(call, "in_progress");
            item["arguments"] = "";
            out += event("response.output_item.added", {{"output_index", index}, {"item", item}}, seq_);
            const json at = {{"item_id", item["id"]}, {"output_index", index}};
            json delta = at, done = at;
            delta["delta"] = call.arguments;
            done["arguments"] = call.arguments;
            out += event("response.function_call_arguments.delta", delta, seq_);
            out += event("response.function_call_arguments.done", done, seq_);
            output_.push_back(call_item(call, "completed"));
            out += event("response.output_item.done", {{"output_index", index}, {"item", output_.back()}}, seq_);
        }
        return out;
    }

    std::string finish(const Outcome& o) override {
        std::string out = close();
        const bool cut = o.finish_reason == "length";
        return out + event(cut ? "response.incomplete" : "response.completed",
                           {{"response", response(cut ? "incomplete" : "completed", output_, &o)}}, seq_);
    }

    std::string error(const ApiError& e) override {
        return event("error", {{"code", e.code.empty() ? json() : json(e.code)}, {"message", e.what()},
                               {"param", e.param.empty() ? json() : json(e.param)}}, seq_);
    }

private:
    enum class Item { NONE, REASONING, MESSAGE };

    static json reasoning_item(const std::string& id, const std::string& text) {
        return {{"type", "reasoning"}, {"id", id}, {"summary", json::array()},
                {"content", json::array({{{"type", "reasoning_text"}, {"text", text}}})}};
    }
    static json message_item(const std::string& id, const std::string& text, const char* status) {
        json content = json::array();
        if (!text.empty() || std::string_view(status) == "completed")
            content.push_back({{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}});
        return {{"type", "message"}, {"id", id}, {"status", status}, {"role", "assistant"}, {"content", content}};
    }
    static json call_item(const llm::ToolCall& call, const char* status) {
        return {{"type", "function_call"}, {"id", "fc_" + call.id}, {"call_id", call.id}, {"name", call.name},
                {"arguments", call.arguments}, {"status", status}};
    }

    json response(const char* status, const json& output, const Outcome* o) const {
        json r = {{"id", job_.id}, {"object", "response"}, {"created_at", job_.created}, {"status", status}, {"error", nullptr},
                  {"incomplete_details", std::string_view(status) == "incomplete" ? json{{"reason", "max_output_tokens"}} : json()},
                  {"model", job_.model}, {"output", output}, {"parallel_tool_calls", true}, {"previous_response_id", nullptr},
                  {"store", false}, {"text", {{"format", {{"type", "text"}}}}}, {"truncation", "disabled"}};
        for (const auto& [k, v] : echo_.items()) r[k] = v;
        r["usage"] = o ? usage(*o) : json();
        return r;
    }

    json where(int content_index, json more) const {
        json w = {{"item_id", item_id_}, {"output_index", int(output_.size())}, {"content_index", content_index}};
        for (auto& [k, v] : more.items()) w[k] = v;
        return w;
    }

    std::string open(Item kind) {
        if (open_ == kind) return "";
        std::string out = close();
        open_ = kind;
        text_.clear();
        const int index = int(output_.size());
        if (kind == Item::REASONING) {
            item_id_ = random_id("rs_");
            json item = reasoning_item(item_id_, "");
            item["content"] = json::array();
            out += event("response.output_item.added", {{"output_index", index}, {"item", item}}, seq_);
        } else {
            item_id_ = random_id("msg_");
            out += event("response.output_item.added", {{"output_index", index}, {"item", message_item(item_id_, "", "in_progress")}}, seq_);
            out += event("response.content_part.added",
                         where(0, {{"part", {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}}}}), seq_);
        }
        return out;
    }

    std::string close() {
        if (open_ == Item::NONE) return "";
        std::string out;
        json item;
        if (open_ == Item::REASONING) {
            out += event("response.reasoning_text.done", where(0, {{"text", text_}}), seq_);
            item = reasoning_item(item_id_, text_);
        } else {
            out += event("response.output_text.done", where(0, {{"text", text_}, {"logprobs", json::array()}}), seq_);
            item = message_item(item_id_, text_, "completed");
            out += event("response.content_part.done", where(0, {{"part", item["content"][0]}}), seq_);
        }
        out += event("response.output_item.done", {{"output_index", int(output_.size())}, {"item", item}}, seq_);
        output_.push_back(std::move(item));
        open_ = Item::NONE;
        return out;
    }

    const Job& job_;
    json echo_ = json::object();
    json output_ = json::array();  // finished items, in order
    Item open_ = Item::NONE;
    std::string item_id_, text_;  // the open item's id and text so far
    int seq_ = 0;
};

}  // namespace

Job parse_responses_request(const json& body, const llm::Session& session, const ChatRenderer& render_chat,
                            const std::string& model_name) {
    Job job;
    try {
        job = parse_chat_request(to_chat(body), session, render_chat, model_name);
    } catch (ApiError& e) {  // a bad schema is the client's text.format, not the shared body's name for it
        if (e.param.starts_with("response_format")) e.param = "text.format" + e.param.substr(std::string_view("response_format").size());
        if (e.param == "text.format.json_schema.schema") e.param = "text.format.schema";
        throw;
    }
    job.id = random_id("resp_");
    return job;
}

std::unique_ptr<ReplyFormat> responses_format(const Job& job, const json& request) {
    return std::make_unique<ResponsesFormat>(job, request);
}

}  // namespace server
