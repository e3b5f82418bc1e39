// ollama's API (https://github.com/ollama/ollama/blob/main/docs/api.md): /api/chat and /api/generate
// become the shared OpenAI chat (or raw completion) body; replies stream as NDJSON objects by default,
// the last with done_reason and the *_count / *_duration (nanoseconds) fields. Also the model listings.
#include "server/server_impl.h"

#include <chrono>
#include <ctime>
#include <filesystem>

namespace server {

namespace {

// options → the shared body's sampling fields (num_ctx is applied after the prompt is known).
void translate_options(const json& body, json& chat) {
    if (!present(body, "options")) return;
    const json& o = body["options"];
    if (!o.is_object()) throw invalid("options", "must be an object");
    for (const char* key : {"temperature", "top_k", "top_p", "min_p", "seed", "stop", "presence_penalty", "frequency_penalty"})
        if (present(o, key)) chat[key] = o[key];
    if (present(o, "num_predict")) {  // -1: until the end, -2: until the context is full
        const int64_t n = integer(o, "num_predict", -2, INT32_MAX, -1);
        if (n > 0) chat["max_tokens"] = n;
        else if (n == 0) throw invalid("options.num_predict", "must not be 0");
    }
}

json chat_messages(const json& body) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
        throw invalid("messages", "must be a non-empty list of messages");
    json out = json::array();
    int n_calls = 0;
    for (size_t i = 0; i < body["messages"].size(); i++) {
        const json& m = body["messages"][i];
        const std::string where = "messages[" + std::to_string(i) + "]";
        if (!m.is_object()) throw invalid(where, "must be an object");
        if (present(m, "images") && !m["images"].empty()) throw invalid(where + ".images", "cannot be read: this server reads text only");
        json msg = {{"role", string_field(m, "role", where + ".role")}, {"content", m.value("content", json(""))}};
        if (present(m, "thinking")) msg["reasoning_content"] = m["thinking"];
        if (present(m, "tool_name")) msg["name"] = m["tool_name"];
        if (present(m, "tool_calls")) {
            if (!m["tool_calls"].is_array()) throw invalid(where + ".tool_calls", "must be a list");
            json calls = json::array();
            for (const auto& c : m["tool_calls"]) {
                if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
                    throw invalid(where + ".tool_calls", "entries must be {\"function\": {\"name\", \"arguments\"}}");
                calls.push_back({{"id", "call_" + std::to_string(n_calls++)}, {"type", "function"}, {"function", c["function"]}});
            }
            msg["tool_calls"] = calls;
        }
        out.push_back(std::move(msg));
    }
    return out;
}

json to_body(const json& body, bool generate) {
    json chat = json::object();
    if (present(body, "model")) chat["model"] = body["model"];
    chat["stream"] = body.contains("stream") ? body["stream"] : json(true);  // ollama streams unless told not to
    translate_options(body, chat);
    if (present(body, "format") && body["format"] != "") {  // "json" or a JSON schema: the shared response_format
        const json& format = body["format"];
        if (format == "json") chat["response_format"] = {{"type", "json_object"}};
        else if (format.is_object()) chat["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", format}}}};
        else throw invalid("format", "must be \"json\" or a JSON Schema object");
    }
    if (present(body, "think")) {
        const json& think = body["think"];  // true/false, or an effort (gpt-oss: low, medium, high)
        chat["chat_template_kwargs"] = think.is_boolean() ? json{{"enable_thinking", think}}
                                                          : json{{"enable_thinking", true}, {"reasoning_effort", think}};
    }
    if (!generate) {
        chat["messages"] = chat_messages(body);
        if (present(body, "tools")) chat["tools"] = body["tools"];
        return chat;
    }
    if (!present(body, "prompt") || !body["prompt"].is_string()) throw invalid("prompt", "must be a string");
    if (present(body, "suffix") && body["suffix"] != "") throw invalid("suffix", "is not supported (no fill-in-the-middle)");
    if (present(body, "images") && !body["images"].empty()) throw invalid("images", "cannot be read: this server reads text only");
    if (present(body, "template") && body["template"] != "") throw invalid("template", "is not supported: the model's own chat template is used");
    if (boolean(body, "raw", false)) {
        chat["prompt"] = body["prompt"];
        return chat;
    }
    json messages = json::array();
    if (present(body, "system")) messages.push_back({{"role", "system"}, {"content", body["system"]}});
    messages.push_back({{"role", "user"}, {"content", body["prompt"]}});
    chat["messages"] = messages;
    return chat;
}

std::string iso_time(std::chrono::system_clock::time_point now) {
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    const long nanos = long(std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() % 1000000000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                  tm.tm_min, tm.tm_sec, nanos);
    return buf;
}

int64_t ns(double ms) { return int64_t(ms * 1e6); }

class OllamaFormat final : public ReplyFormat {
public:
    OllamaFormat(const Job& job, bool generate) : job_(job), generate_(generate) {}
    const char* stream_type() const override { return "application/x-ndjson"; }

    json whole(const Delta& reply, const Outcome& o) override {
        json r = piece(reply.text, false);
        add_stats(r, o);
        return r;
    }
    std::string start() override { return ""; }
    std::string on_delta(const Delta& d) override { return dump(piece(d.text, false)) + "\n"; }
    std::string finish(const Outcome& o) override {
        json r = piece({}, true);
        add_stats(r, o);
        return dump(r) + "\n";
    }
    std::string error(const ApiError& e) override { return dump(error_json(e, ErrorShape::OLLAMA)) + "\n"; }
    std::string keep_alive() override { return ""; }  // NDJSON has no comments

private:
    json piece(const llm::RoutedText& t, bool done) const {
        json r = {{"model", job_.model}, {"created_at", iso_time_now()}};
        if (generate_) {
            r["response"] = t.content;
            if (!t.reasoning.empty()) r["thinking"] = t.reasoning;
        } else {
            json message = {{"role", "assistant"}, {"content", t.content}};
            if (!t.reasoning.empty()) message["thinking"] = t.reasoning;
            if (!t.tool_calls.empty()) {
                json calls = json::array();
                for (const auto& call : t.tool_calls) {
                    json args = json::parse(call.arguments, nullptr, false);
                    calls.push_back({{"function", {{"name", call.name}, {"arguments", args.is_discarded() ? json::object() : args}}}});
                }
                message["tool_calls"] = calls;
            }
            r["message"] = message;
        }
        r["done"] = done;
        return r;
    }
    static void add_stats(json& r, const Outcome& o) {
        const auto& g = o.result;
        r["done"] = true;
        r["done_reason"] = o.finish_reason == "length" ? "length" : "stop";
        r["total_duration"] = ns(g.t_prefill_ms + g.t_decode_ms);
        r["load_duration"] = 0;
        r["prompt_eval_count"] = g.n_prompt;
        r["prompt_eval_duration"] = ns(g.t_prefill_ms);
        r["eval_count"] = int(g.ids.size());
        r["eval_duration"] = ns(g.t_decode_ms);
    }

    const Job& job_;
    bool generate_;
};

json details(const ModelFacts& m) {
    const std::string& arch = m.info->architecture;
    return {{"parent_model", ""}, {"format", "gguf"}, {"family", arch}, {"families", json::array({arch})},
            {"parameter_size", ""}, {"quantization_level", ""}};
}

}  // namespace

std::string iso_time_now() { return iso_time(std::chrono::system_clock::now()); }

Job parse_ollama_request(const json& body, const llm::Session& session, const ChatRenderer& render_chat,
                         const std::string& model_name, bool generate) {
    const json chat = to_body(body, generate);
    Job job;
    try {
        job = chat.contains("prompt") ? parse_completion_request(chat, session, model_name)
                                      : parse_chat_request(chat, session, render_chat, model_name);
    } catch (ApiError& e) {  // a bad schema is the client's `format`, not the shared body's name for it
        if (e.param.starts_with("response_format")) e.param = "format";
        throw;
    }
    if (present(body, "options") && present(body["options"], "num_ctx")) {
        // The session's context is fixed when it loads; num_ctx can only narrow what this request uses.
        const int64_t n_ctx = integer(body["options"], "num_ctx", 1, INT32_MAX, 0);
        if (int64_t(job.prompt.size()) >= n_ctx)
            throw ApiError(400, "[server] the prompt is " + std::to_string(job.prompt.size()) + " tokens, more than options.num_ctx " +
                                    std::to_string(n_ctx), "options.num_ctx", "context_length_exceeded");
        job.generate.max_tokens = int(std::min<int64_t>(job.generate.max_tokens, n_ctx - int64_t(job.prompt.size())));
    }
    return job;
}

std::unique_ptr<ReplyFormat> ollama_format(const Job& job, bool generate) { return std::make_unique<OllamaFormat>(job, generate); }

json capabilities_json(const ModelFacts& m, bool ollama_names) {
    json caps = json::array({"completion"});
    if (!ollama_names) caps.push_back("chat");
    const std::string& tmpl = m.chat_template;
    if (tmpl.find("tools") != std::string::npos) caps.push_back("tools");
    if (tmpl.find("<think>") != std::string::npos || tmpl.find("reasoning_content") != std::string::npos) caps.push_back("thinking");
    if (m.pooling != llm::Pooling::NONE) caps.push_back(ollama_names ? "embedding" : "embeddings");
    return caps;
}

json ollama_model_entry(const ModelFacts& m, bool running) {
    std::error_code size_error, time_error;
    const auto size = std::filesystem::file_size(m.info->path, size_error);
    const auto written = std::filesystem::last_write_time(m.info->path, time_error);
    const std::string modified = time_error ? iso_time_now() : iso_time(std::chrono::file_clock::to_sys(written));
    json e = {{"name", m.name}, {"model", m.name}, {"modified_at", modified}, {"size", size_error ? 0 : int64_t(size)},
              {"digest", ""}, {"details", details(m)}};
    if (running) {
        e["expires_at"] = "9999-12-31T23:59:59Z";  // the server keeps its model loaded until it exits
        e["size_vram"] = 0;
        e["context_length"] = m.info->n_ctx;
    }
    return e;
}

json ollama_show(const ModelFacts& m) {
    const llm::ModelInfo& info = *m.info;
    json model_info = {{"general.architecture", info.architecture}, {"general.name", info.name},
                       {info.architecture + ".context_length", info.n_ctx}, {info.architecture + ".embedding_length", info.n_embd},
                       {"tokenizer.ggml.pre", info.tokenizer_pre}};
    return {{"modelfile", ""}, {"parameters", ""}, {"template", m.chat_template}, {"details", details(m)},
            {"model_info", model_info}, {"capabilities", capabilities_json(m, true)},
            {"modified_at", ollama_model_entry(m, false)["modified_at"]}};
}

}  // namespace server
