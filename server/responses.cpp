// Response bodies in OpenAI's shapes: whole responses, streamed chunks, usage and logprobs.
#include "server/server_impl.h"

namespace server {

namespace {

const char* object_name(const Job& job, bool chunk) {
    if (job.endpoint == Endpoint::COMPLETION) return "text_completion";
    return chunk ? "chat.completion.chunk" : "chat.completion";
}


json token_json(const std::string& token, float logprob) {
    json bytes = json::array();
    for (unsigned char c : token) bytes.push_back(int(c));
    return {{"token", token}, {"logprob", logprob}, {"bytes", bytes}};
}

// The chat form: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
json chat_logprobs(const std::vector<TokenLogprob>& entries) {
    json content = json::array();
    for (const TokenLogprob& e : entries) {
        json entry = token_json(e.token, e.logprob);
        entry["top_logprobs"] = json::array();
        for (const auto& [token, logprob] : e.top) entry["top_logprobs"].push_back(token_json(token, logprob));
        content.push_back(std::move(entry));
    }
    return {{"content", std::move(content)}};
}

// The legacy completions form: parallel lists tokens, token_logprobs, top_logprobs, text_offset.
json completion_logprobs(const std::vector<TokenLogprob>& entries, size_t& text_offset) {
    json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    for (const TokenLogprob& e : entries) {
        out["tokens"].push_back(e.token);
        out["token_logprobs"].push_back(e.logprob);
        json top = json::object();
        for (const auto& [token, logprob] : e.top) top[token] = logprob;
        out["top_logprobs"].push_back(top);
        out["text_offset"].push_back(text_offset);
        text_offset += e.token.size();
    }
    return out;
}

json tool_calls_json(const std::vector<llm::ToolCall>& calls) {
    json out = json::array();
    for (const auto& call : calls)
        out.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    return out;
}

}  // namespace

json envelope(const Job& job, bool chunk) {
    return {{"id", job.id}, {"object", object_name(job, chunk)}, {"created", job.created}, {"model", job.model},
            {"system_fingerprint", "tinyllm"}};
}

json usage_json(const Outcome& outcome) {
    const auto& r = outcome.result;
    const int n_completion = int(r.ids.size());
    return {{"prompt_tokens", r.n_prompt}, {"completion_tokens", n_completion}, {"total_tokens", r.n_prompt + n_completion},
            {"prompt_tokens_details", {{"cached_tokens", r.n_reused}}}};
}

json timings_json(const Outcome& outcome) {
    const auto& r = outcome.result;
    const int n_prompt = r.n_prompt - r.n_reused, n_predicted = int(r.ids.size());
    auto per_token = [](double ms, int n) { return n > 0 ? ms / n : 0.0; };
    auto per_second = [](double ms, int n) { return ms > 0 ? n * 1000.0 / ms : 0.0; };
    return {{"cache_n", r.n_reused}, {"prompt_n", n_prompt}, {"prompt_ms", r.t_prefill_ms},
            {"prompt_per_token_ms", per_token(r.t_prefill_ms, n_prompt)}, {"prompt_per_second", per_second(r.t_prefill_ms, n_prompt)},
            {"predicted_n", n_predicted}, {"predicted_ms", r.t_decode_ms},
            {"predicted_per_token_ms", per_token(r.t_decode_ms, n_predicted)},
            {"predicted_per_second", per_second(r.t_decode_ms, n_predicted)}};
}

json StreamFormatter::chunk(json delta_or_text, json logprobs, json finish_reason) const {
    json c = envelope(job_, true);
    json choice = {{"index", job_.choice_index}};
    choice[job_.endpoint == Endpoint::CHAT ? "delta" : "text"] = std::move(delta_or_text);
    choice["logprobs"] = std::move(logprobs);
    choice["finish_reason"] = std::move(finish_reason);
    c["choices"] = json::array({choice});
    return c;
}

std::vector<json> StreamFormatter::start() {
    if (job_.endpoint != Endpoint::CHAT) return {};
    return {chunk({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr)};
}

std::vector<json> StreamFormatter::on_delta(const Delta& d) {
    std::vector<json> out;
    json logprobs = nullptr;
    if (job_.logprobs && !d.logprobs.empty())
        logprobs = job_.endpoint == Endpoint::CHAT ? chat_logprobs(d.logprobs) : completion_logprobs(d.logprobs, text_offset_);
    if (job_.endpoint == Endpoint::COMPLETION) {
        if (!d.text.content.empty() || !logprobs.is_null()) out.push_back(chunk(d.text.content, logprobs, nullptr));
        return out;
    }
    json delta = json::object();
    if (!d.text.reasoning.empty()) delta["reasoning_content"] = d.text.reasoning;
    if (!d.text.content.empty()) delta["content"] = d.text.content;
    if (!delta.empty() || !logprobs.is_null()) out.push_back(chunk(delta, logprobs, nullptr));
    for (const auto& call : d.text.tool_calls) {
        const int index = n_tool_calls_++;
        out.push_back(chunk({{"tool_calls", json::array({{{"index", index}, {"id", call.id}, {"type", "function"},
                                                          {"function", {{"name", call.name}, {"arguments", ""}}}}})}},
                            nullptr, nullptr));
        out.push_back(chunk({{"tool_calls", json::array({{{"index", index}, {"function", {{"arguments", call.arguments}}}}})}},
                            nullptr, nullptr));
    }
    return out;
}

std::vector<json> StreamFormatter::finish(const Outcome& outcome) {
    std::vector<json> out;
    out.push_back(chunk(job_.endpoint == Endpoint::CHAT ? json::object() : json(""), nullptr, outcome.finish_reason));
    out.back()["timings"] = timings_json(outcome);
    if (job_.include_usage) {
        json u = envelope(job_, true);
        u["choices"] = json::array();
        u["usage"] = usage_json(outcome);
        out.push_back(std::move(u));
    }
    return out;
}

json whole_response(const Job& job, const Delta& reply, const Outcome& outcome) {
    json r = envelope(job, false);
    json choice = {{"index", job.choice_index}};
    size_t text_offset = 0;
    json logprobs = nullptr;
    if (job.logprobs)
        logprobs = job.endpoint == Endpoint::CHAT ? chat_logprobs(reply.logprobs) : completion_logprobs(reply.logprobs, text_offset);
    if (job.endpoint == Endpoint::CHAT) {
        const auto& t = reply.text;
        json message = {{"role", "assistant"}};
        message["content"] = t.content.empty() && !t.tool_calls.empty() ? json() : json(t.content);
        if (!t.reasoning.empty()) message["reasoning_content"] = t.reasoning;
        if (!t.tool_calls.empty()) message["tool_calls"] = tool_calls_json(t.tool_calls);
        choice["message"] = message;
    } else {
        choice["text"] = reply.text.content;
    }
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = outcome.finish_reason;
    r["choices"] = json::array({choice});
    r["usage"] = usage_json(outcome);
    r["timings"] = timings_json(outcome);
    return r;
}

namespace {

// OpenAI streams: `data: {chunk}` events, then `data: [DONE]`.
class OpenAiFormat final : public ReplyFormat {
public:
    explicit OpenAiFormat(const Job& job) : job_(job), stream_(job) {}
    json whole(const Delta& reply, const Outcome& outcome) override { return whole_response(job_, reply, outcome); }
    std::string start() override { return events(stream_.start()); }
    std::string on_delta(const Delta& delta) override { return events(stream_.on_delta(delta)); }
    std::string finish(const Outcome& outcome) override { return events(stream_.finish(outcome)) + "data: [DONE]\n\n"; }
    std::string error(const ApiError& error) override { return events({error_json(error)}); }
    std::string end_after_error() override { return "data: [DONE]\n\n"; }
    // llama-server's prompt-progress chunk: no choices, a prompt_progress object
    std::string progress(const Progress& p) override {
        json c = {{"id", job_.id}, {"object", object_name(job_, true)}, {"created", job_.created}, {"model", job_.model},
                  {"choices", json::array()},
                  {"prompt_progress", {{"total", p.n_total}, {"cache", p.n_cache}, {"processed", p.n_processed}, {"time_ms", p.ms}}}};
        return events({c});
    }

private:
    static std::string events(const std::vector<json>& chunks) {
        std::string out;
        for (const json& c : chunks) out += "data: " + dump(c) + "\n\n";
        return out;
    }
    const Job& job_;
    StreamFormatter stream_;
};

}  // namespace

std::unique_ptr<ReplyFormat> openai_format(const Job& job) { return std::make_unique<OpenAiFormat>(job); }

}  // namespace server
