// The OpenAI schema: validating chat/completion requests into Jobs (rendering and tokenizing the
// prompt) and shaping responses, streamed chunks and errors the way OpenAI's clients parse them.
#include "server/server_impl.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>
#include <unordered_map>

namespace server {

std::string random_id(const char* prefix) {
    static constexpr char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id = prefix;
    for (int i = 0; i < 24; i++) id += ALNUM[rng() % (sizeof ALNUM - 1)];
    return id;
}

ApiError invalid(const std::string& param, const std::string& what) {
    return ApiError(400, "[server] '" + param + "' " + what, param);
}

// Lists whose length drives work per request (template rendering, sampling, stop matching).
constexpr size_t MAX_MESSAGES = 4096, MAX_PARTS = 4096, MAX_TOOLS = 256, MAX_TOOL_CALLS = 256, MAX_LOGIT_BIAS = 1024,
                 MAX_STOP = 16, MAX_STOP_BYTES = 1024;

void check_length(const json& list, size_t max, const std::string& param) {
    if (list.size() > max) throw ApiError(400, "[server] '" + param + "' has " + std::to_string(list.size()) + " entries; the limit is " + std::to_string(max), param);
}

bool present(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

double number(const json& body, const char* key, double lo, double hi, double fallback) {
    if (!present(body, key)) return fallback;
    const json& v = body[key];
    if (!v.is_number()) throw invalid(key, "must be a number");
    double x = v.get<double>();
    if (!(x >= lo && x <= hi)) throw invalid(key, "must be between " + json(lo).dump() + " and " + json(hi).dump());
    return x;
}

int64_t integer(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback) {
    if (!present(body, key)) return fallback;
    const json& v = body[key];
    int64_t x = 0;
    if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(INT64_MAX)) x = int64_t(v.get<uint64_t>());
    else if (v.is_number_integer() && !v.is_number_unsigned()) x = v.get<int64_t>();
    else if (double d = v.is_number_float() ? v.get<double>() : 0.5; std::floor(d) == d && std::abs(d) < 9.0e18) x = int64_t(d);
    else throw invalid(key, "must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi));
    if (x < lo || x > hi) throw invalid(key, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    return x;
}

bool boolean(const json& body, const char* key, bool fallback, const std::string& param) {
    if (!body.is_object() || !present(body, key)) return fallback;
    if (!body[key].is_boolean()) throw invalid(param.empty() ? key : param, "must be true or false");
    return body[key].get<bool>();
}

std::string string_field(const json& obj, const char* key, const std::string& param, const std::string& fallback) {
    if (!obj.is_object() || !present(obj, key)) return fallback;
    if (!obj[key].is_string()) throw invalid(param, "must be a string");
    return obj[key].get<std::string>();
}

namespace {

constexpr int MAX_CHOICES = 16;

// Fields every generation request shares: stream, sampling, stop, max_tokens.
void parse_common(const json& body, const llm::Session& session, Job& job) {
    job.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (present(body, "model") && !body["model"].is_string()) throw invalid("model", "must be a string");
    if (present(body, "model")) job.model = body["model"].get<std::string>();
    job.n_choices = int(integer(body, "n", 1, MAX_CHOICES, 1));
    job.stream = boolean(body, "stream", false);
    job.return_progress = boolean(body, "return_progress", false);
    if (present(body, "stream_options")) {
        if (!body["stream_options"].is_object()) throw invalid("stream_options", "must be an object");
        job.include_usage = boolean(body["stream_options"], "include_usage", false);
    }

    llm::SamplingParams& s = job.generate.sampling;
    const llm::SamplingParams d = llm::default_sampling();
    s.temperature = float(number(body, "temperature", 0.0, 2.0, d.temperature));
    s.top_p = float(number(body, "top_p", 0.0, 1.0, d.top_p));
    s.top_k = int(integer(body, "top_k", 0, 1 << 30, d.top_k));
    s.min_p = float(number(body, "min_p", 0.0, 1.0, d.min_p));
    s.presence_penalty = float(number(body, "presence_penalty", -2.0, 2.0, 0.0));
    s.frequency_penalty = float(number(body, "frequency_penalty", -2.0, 2.0, 0.0));
    int64_t seed = integer(body, "seed", INT64_MIN, INT64_MAX, -1);
    s.seed = seed >= 0 ? uint64_t(seed) : std::random_device{}();
    if (present(body, "logit_bias")) {
        if (!body["logit_bias"].is_object()) throw invalid("logit_bias", "must be an object of token id -> bias");
        check_length(body["logit_bias"], MAX_LOGIT_BIAS, "logit_bias");
        const int n_vocab = session.tokenizer().n_vocab();
        for (const auto& [key, value] : body["logit_bias"].items()) {
            size_t used = 0;
            long id = -1;
            try { id = std::stol(key, &used); } catch (const std::exception&) {}
            if (used != key.size() || id < 0 || id >= n_vocab)
                throw invalid("logit_bias", "has '" + key + "', not a token id below " + std::to_string(n_vocab));
            if (!value.is_number() || std::abs(value.get<double>()) > 100.0)
                throw invalid("logit_bias", "values must be numbers between -100 and 100");
            s.logit_bias[int32_t(id)] = value.get<float>();
        }
    }

    if (present(body, "stop")) {
        const json& stop = body["stop"];
        if (stop.is_string()) job.stop.push_back(stop.get<std::string>());
        else if (stop.is_array() && stop.size() <= MAX_STOP) {
            for (const auto& s1 : stop) {
                if (!s1.is_string()) throw invalid("stop", "must be a string or a list of strings");
                job.stop.push_back(s1.get<std::string>());
            }
        } else throw invalid("stop", "must be a string or a list of up to " + std::to_string(MAX_STOP) + " strings");
        for (const std::string& s1 : job.stop)
            if (s1.size() > MAX_STOP_BYTES) throw invalid("stop", "strings must be at most " + std::to_string(MAX_STOP_BYTES) + " bytes");
    }
}

// After the prompt is known: it must leave room for at least one token; max_tokens caps the rest.
void fit_context(const json& body, const llm::Session& session, Job& job, const char* prompt_param) {
    const int n_ctx = session.info().n_ctx;
    const int n_prompt = int(job.prompt.size());
    if (n_prompt >= n_ctx)
        throw ApiError(400, "[server] the prompt is " + std::to_string(n_prompt) + " tokens, but the context holds " +
                                std::to_string(n_ctx) + " (prompt and reply together)",
                       prompt_param, "context_length_exceeded");
    const char* key = present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    int64_t max_tokens = integer(body, key, -1, INT32_MAX, -1);
    if (max_tokens == 0) throw invalid(key, "must be at least 1");
    job.generate.max_tokens = int(max_tokens < 0 ? n_ctx - n_prompt : std::min<int64_t>(max_tokens, n_ctx - n_prompt));
}

// A message's content as the template sees it: a string (text parts joined).
json message_content(const json& content, size_t i) {
    const std::string param = "messages[" + std::to_string(i) + "].content";
    if (content.is_null()) return "";
    if (content.is_string()) return content;
    if (!content.is_array()) throw invalid(param, "must be a string or a list of text parts");
    check_length(content, MAX_PARTS, param);
    std::string text;
    for (const auto& part : content) {
        if (!part.is_object() || string_field(part, "type", param + ".type") != "text" || !part.contains("text") || !part["text"].is_string())
            throw invalid(param, "may only hold parts {\"type\": \"text\", \"text\": …}: this server reads text only");
        text += part["text"].get<std::string>();
    }
    return text;
}

json normalize_messages(const json& body) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
        throw invalid("messages", "must be a non-empty list of messages");
    json messages = json::array();
    const json& in = body["messages"];
    check_length(in, MAX_MESSAGES, "messages");
    for (size_t i = 0; i < in.size(); i++) {
        const std::string where = "messages[" + std::to_string(i) + "]";
        const json& m = in[i];
        if (!m.is_object()) throw invalid(where, "must be an object");
        std::string role = m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : "";
        if (role == "developer") role = "system";  // the newer name; templates know "system"
        if (role != "system" && role != "user" && role != "assistant" && role != "tool")
            throw invalid(where + ".role", "must be one of system, developer, user, assistant, tool");
        json out = {{"role", role}, {"content", message_content(m.value("content", json()), i)}};
        if (m.contains("reasoning_content") && m["reasoning_content"].is_string()) out["reasoning_content"] = m["reasoning_content"];
        if (present(m, "tool_calls")) {
            if (!m["tool_calls"].is_array()) throw invalid(where + ".tool_calls", "must be a list");
            check_length(m["tool_calls"], MAX_TOOL_CALLS, where + ".tool_calls");
            json calls = json::array();
            for (const auto& call : m["tool_calls"]) {
                if (!call.is_object() || !call.contains("function") || !call["function"].is_object() ||
                    !call["function"].contains("name") || !call["function"]["name"].is_string())
                    throw invalid(where + ".tool_calls", "entries must be {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
                calls.push_back({{"id", string_field(call, "id", where + ".tool_calls.id")}, {"type", "function"}, {"function", call["function"]}});
            }
            out["tool_calls"] = calls;
        }
        for (const char* key : {"tool_call_id", "name"})
            if (m.contains(key) && m[key].is_string()) out[key] = m[key];
        messages.push_back(std::move(out));
    }
    return messages;
}

// tools + tool_choice: which tools the template sees, whether the reply must start with a call, and
// whether tools were offered but calls forbidden ("none").
json parse_tools(const json& body, bool& required, bool& forbidden) {
    json tools = json::array();
    if (present(body, "tools")) {
        if (!body["tools"].is_array()) throw invalid("tools", "must be a list");
        check_length(body["tools"], MAX_TOOLS, "tools");
        for (const auto& tool : body["tools"]) {
            if (!tool.is_object() || string_field(tool, "type", "tools.type", "function") != "function" || !tool.contains("function") ||
                !tool["function"].is_object() || !tool["function"].contains("name") || !tool["function"]["name"].is_string())
                throw invalid("tools", "entries must be {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}");
            tools.push_back(tool);
        }
    }
    std::string choice = tools.empty() ? "none" : "auto";
    if (present(body, "tool_choice")) {
        const json& c = body["tool_choice"];
        if (c.is_string()) choice = c.get<std::string>();
        else if (c.is_object() && c.contains("function") && c["function"].is_object() && c["function"].contains("name")) {
            json only = json::array();  // a named function: offer only that one, and require a call
            for (const auto& tool : tools)
                if (tool["function"]["name"] == c["function"]["name"]) only.push_back(tool);
            if (only.empty()) throw invalid("tool_choice", "names a function that is not in 'tools'");
            tools = only;
            choice = "required";
        } else throw invalid("tool_choice", "must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\"}}");
        if (choice != "none" && choice != "auto" && choice != "required") throw invalid("tool_choice", "must be none, auto or required");
        if (choice != "none" && tools.empty()) throw invalid("tool_choice", "needs 'tools'");
    }
    forbidden = choice == "none" && !tools.empty();
    if (choice == "none") tools = json::array();
    required = choice == "required";
    return tools;
}

}  // namespace

ApiError::ApiError(int status_, const std::string& message, std::string param_, std::string code_)
    : std::runtime_error(message), status(status_), param(std::move(param_)), code(std::move(code_)) {
    type = status == 401 ? "authentication_error"
           : status == 404 ? "not_found_error"
           : status >= 500 ? "server_error"
                           : "invalid_request_error";
}

json error_json(const ApiError& e, ErrorShape shape) {
    if (shape == ErrorShape::OLLAMA) return {{"error", e.what()}};
    if (shape == ErrorShape::ANTHROPIC) {
        // https://docs.anthropic.com/en/api/errors: one type per status
        const char* type = e.status == 400 ? "invalid_request_error" : e.status == 401 ? "authentication_error"
                         : e.status == 403 ? "permission_error" : e.status == 404 ? "not_found_error"
                         : e.status == 413 ? "request_too_large" : e.status == 429 ? "rate_limit_error"
                         : e.status == 503 || e.status == 529 ? "overloaded_error"
                         : e.status >= 500 ? "api_error" : "invalid_request_error";
        return {{"type", "error"}, {"error", {{"type", type}, {"message", e.what()}}}};
    }
    return {{"error", {{"message", e.what()}, {"type", e.type},
                       {"param", e.param.empty() ? json() : json(e.param)},
                       {"code", e.code.empty() ? json() : json(e.code)}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_json(std::string_view text, const std::string& what) {
    // The depth is checked while parsing, so no deeper value exists for later code to recurse into.
    const json::parser_callback_t limit_depth = [&](int depth, json::parse_event_t, json&) {
        if (depth > JSON_MAX_DEPTH)
            throw ApiError(400, "[server] " + what + " nests deeper than " + std::to_string(JSON_MAX_DEPTH) + " levels (the limit)", "",
                           "json_too_deep");
        return true;
    };
    return json::parse(text, limit_depth, false);
}

json parse_body(const std::string& body) {
    json j = parse_json(body, "the request body");
    if (j.is_discarded()) throw ApiError(400, "[server] the request body is not valid JSON");
    if (!j.is_object()) throw ApiError(400, "[server] the request body must be a JSON object");
    return j;
}

// The most bytes one token stands for: a prompt longer than n_ctx times this cannot fit the context,
// whatever its tokens, so it is refused before tokenizing (which can cost ~200 bytes of RAM a byte).
static size_t max_token_bytes(const tok::Tokenizer& tokenizer) {
    static std::mutex mutex;
    static std::unordered_map<const tok::Tokenizer*, std::pair<int32_t, size_t>> cache;  // -> (n_vocab, bytes)
    std::lock_guard lock(mutex);
    auto& entry = cache[&tokenizer];
    if (entry.first != tokenizer.n_vocab() || entry.second == 0) {
        size_t longest = 1;
        for (int32_t id = 0; id < tokenizer.n_vocab(); id++) longest = std::max(longest, tokenizer.piece(id).size());
        entry = {tokenizer.n_vocab(), longest};
    }
    return entry.second;
}

// The longest prompt check_prompt_bytes lets through.
static size_t max_prompt_bytes(const llm::Session& session) {
    return size_t(session.info().n_ctx) * max_token_bytes(session.tokenizer()) - 1;
}

void check_prompt_bytes(size_t bytes, const llm::Session& session, const char* param) {
    const size_t n_ctx = size_t(session.info().n_ctx), per_token = max_token_bytes(session.tokenizer());
    if (bytes / per_token >= n_ctx)
        throw ApiError(400, "[server] the prompt is " + std::to_string(bytes) + " bytes; at most " + std::to_string(per_token) +
                                " bytes a token, it cannot fit the context of " + std::to_string(n_ctx) + " tokens",
                       param, "context_length_exceeded");
}

Job parse_chat_request(const json& body, const llm::Session& session, const ChatRenderer& render_chat, const std::string& model_name) {
    Job job;
    job.endpoint = Endpoint::CHAT;
    job.id = random_id("chatcmpl-");
    job.model = model_name;
    parse_common(body, session, job);
    const tok::Tokenizer& tokenizer = session.tokenizer();

    bool required = false, forbidden = false;
    llm::ChatInput input;
    input.messages = normalize_messages(body);
    size_t content_bytes = 0;
    for (const json& m : input.messages) content_bytes += m["content"].get_ref<const std::string&>().size();
    check_prompt_bytes(content_bytes, session, "messages");
    input.tools = parse_tools(body, required, forbidden);
    if (present(body, "chat_template_kwargs")) {
        if (!body["chat_template_kwargs"].is_object()) throw invalid("chat_template_kwargs", "must be an object");
        for (const auto& [key, value] : body["chat_template_kwargs"].items()) {
            // What the server validated or the vocabulary defines is not the client's to replace.
            for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "unk_token", "pad_token"})
                if (key == reserved) throw invalid("chat_template_kwargs", "may not set '" + key + "' (the server sets it)");
            input.kwargs[key] = value;
        }
    }
    input.tool_call_first = required;
    input.max_prompt_bytes = max_prompt_bytes(session);
    llm::PreparedChat chat;
    try {
        chat = llm::prepare_chat(render_chat, tokenizer, input);
    } catch (const llm::ChatInputError& e) {
        throw ApiError(400, std::string("[server] ") + e.what(), e.param, "json_too_deep");
    } catch (const llm::PromptTooLong& e) {
        check_prompt_bytes(e.bytes, session, "messages");  // throws the 400 naming the context
        throw;
    }
    job.prompt = std::move(chat.ids);
    job.router = std::move(chat.router);

    job.generate.grammar = parse_output_grammar(body, tokenizer);
    const bool parallel = boolean(body, "parallel_tool_calls", true);
    if (required && job.generate.grammar.grammar)
        throw invalid("tool_choice", "cannot require a tool call together with 'response_format', 'grammar' or 'json_schema'");
    if (forbidden) {  // "none": the opener token is never sampled, and the router reads no calls
        for (int32_t id : tool_opener_tokens(job.router.tool_syntax, tokenizer))
            job.generate.sampling.logit_bias[id] = -std::numeric_limits<float>::infinity();
        if (job.router.tool_syntax == ToolSyntax::HARMONY && !job.generate.grammar.grammar) job.generate.grammar = harmony_no_call_grammar(tokenizer);
    }
    // the reply (required) or whatever follows the opener (auto) is a call in the template's syntax
    if (!input.tools.empty() && !job.generate.grammar.grammar)
        job.generate.grammar = tool_call_grammar(input.tools, required, parallel, tokenizer, job.router.tool_syntax);
    fit_context(body, session, job, "messages");

    if (present(body, "logprobs") && !body["logprobs"].is_boolean()) throw invalid("logprobs", "must be true or false");
    job.logprobs = boolean(body, "logprobs", false);
    job.generate.n_top_logprobs = int(integer(body, "top_logprobs", 0, 20, 0));
    if (job.generate.n_top_logprobs > 0 && !job.logprobs) throw invalid("top_logprobs", "needs 'logprobs': true");
    return job;
}

Job parse_completion_request(const json& body, const llm::Session& session, const std::string& model_name) {
    Job job;
    job.endpoint = Endpoint::COMPLETION;
    job.id = random_id("cmpl-");
    job.model = model_name;
    parse_common(body, session, job);
    job.router.parse_reasoning = false;  // a raw completion is text, whatever it contains
    const tok::Tokenizer& tokenizer = session.tokenizer();

    if (!body.contains("prompt")) throw invalid("prompt", "is required");
    json prompt = body["prompt"];
    if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) prompt = prompt[0];
    if (prompt.is_string()) {
        check_prompt_bytes(prompt.get_ref<const std::string&>().size(), session, "prompt");
        job.prompt = tokenizer.encode(prompt.get<std::string>(), true, true);
    } else if (prompt.is_array() && !prompt.empty()) {
        if (prompt.size() >= size_t(session.info().n_ctx))
            throw ApiError(400, "[server] the prompt is " + std::to_string(prompt.size()) + " tokens, but the context holds " +
                                    std::to_string(session.info().n_ctx), "prompt", "context_length_exceeded");
        for (const auto& id : prompt) {
            if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= tokenizer.n_vocab())
                throw invalid("prompt", "must be a string or a list of token ids below " + std::to_string(tokenizer.n_vocab()));
            job.prompt.push_back(id.get<int32_t>());
        }
    } else {
        throw invalid("prompt", "must be a string or a non-empty list of token ids (one prompt per request)");
    }
    if (job.prompt.empty()) throw invalid("prompt", "is empty and the model adds no BOS token");
    fit_context(body, session, job, "prompt");
    job.generate.grammar = parse_output_grammar(body, tokenizer);

    // Legacy completions: logprobs is the number of alternatives per token.
    if (present(body, "logprobs")) {
        job.logprobs = true;
        job.generate.n_top_logprobs = body["logprobs"].is_boolean() ? 0 : int(integer(body, "logprobs", 0, 20, 0));
    }
    return job;
}

}  // namespace server
