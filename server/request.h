// One generation request (Job), as every API makes it: the OpenAI parsers (openai.cpp), its structured
// output and tool-call grammars (structured_output.cpp), and running it on a session (generation.cpp).
// The other APIs (server_impl.h) translate their bodies into the same Job.
#pragma once

#include "llm/reply_stream.h"
#include "server/server.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace server {

using json = nlohmann::ordered_json;

// A request the server refuses, OpenAI-shaped: {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::runtime_error {
    int status;
    std::string type, param, code;
    ApiError(int status, const std::string& message, std::string param = "", std::string code = "");
};

enum class Endpoint { CHAT, COMPLETION };

// One generation request, validated and tokenized.
struct Job {
    Endpoint endpoint = Endpoint::CHAT;
    std::string id;          // chatcmpl-… / cmpl-…, the same on every chunk
    int64_t created = 0;
    std::string model;       // echoed
    bool stream = false;
    bool include_usage = false;
    std::vector<int32_t> prompt;
    llm::GenerateOptions generate;  // max_tokens, sampling, n_top_logprobs
    bool logprobs = false;
    std::vector<std::string> stop;
    llm::RouterOptions router;
    bool return_progress = false;  // llama-server's prompt-progress chunks while the prompt is prefilled
    int n_choices = 1;             // OpenAI's n: that many replies to the one prompt
    int choice_index = 0;          // which of them this Job makes (choices[].index)
};

constexpr int JSON_MAX_DEPTH = 256;
// JSON from a client: discarded when invalid; throws ApiError 400 when it nests deeper than
// JSON_MAX_DEPTH (`what` names it in the message).
json parse_json(std::string_view text, const std::string& what);
json parse_body(const std::string& body);  // throws ApiError 400 on invalid JSON, a non-object or too deep
// A prompt of `bytes` that could not fit the context even at the vocabulary's longest token is
// refused (ApiError 400 context_length_exceeded) before anyone tokenizes it.
void check_prompt_bytes(size_t bytes, const llm::Session& session, const char* param);
Job parse_chat_request(const json& body, const llm::Session& session, const ChatRenderer& render_chat,
                       const std::string& model_name);
Job parse_completion_request(const json& body, const llm::Session& session, const std::string& model_name);

// Structured output (structured_output.cpp), for job.generate.grammar: the grammar of `grammar`,
// `json_schema` or `response_format` (none: an unconstrained spec), and the grammar of calls to `tools`
// (OpenAI tool list) in the model's `syntax`: required from the start, else lazy from the opener;
// parallel: one call or several. Throw ApiError 400 naming the rule or keyword.
llm::GrammarSpec parse_output_grammar(const json& body, const tok::Tokenizer& tokenizer);
using llm::ToolSyntax;
using llm::detect_tool_syntax;
llm::GrammarSpec tool_call_grammar(const json& tools, bool required, bool parallel, const tok::Tokenizer& tokenizer,
                                   ToolSyntax syntax = ToolSyntax::HERMES);
// tool_choice "none": the syntax's call-opener token (none when the vocabulary writes it as text), for
// the sampler to ban; for harmony, a grammar whose messages name no recipient (empty when the
// vocabulary lacks harmony's tokens).
std::vector<int32_t> tool_opener_tokens(ToolSyntax syntax, const tok::Tokenizer& tokenizer);
llm::GrammarSpec harmony_no_call_grammar(const tok::Tokenizer& tokenizer);
int32_t special_token(const std::string& text, const tok::Tokenizer& tokenizer);  // its id when one special token, else -1

// One generated token with logprobs: its text (the id decoded alone), its log-probability and the most
// likely alternatives. The reply formats write it as JSON (chat: {token, logprob, bytes, top_logprobs}).
struct TokenLogprob {
    std::string token;
    float logprob = 0.0f;
    std::vector<std::pair<std::string, float>> top;  // (token text, logprob), most likely first
};

// What one step of a reply added: routed text and the logprobs of the tokens behind it.
struct Delta {
    llm::RoutedText text;
    std::vector<TokenLogprob> logprobs;
    bool empty() const { return text.empty() && logprobs.empty(); }
};

struct Outcome {
    llm::GenerateResult result;
    std::string finish_reason;  // stop, length, tool_calls ("" when the client went away)
    std::string stop_string;    // the stop string that ended the reply, when one did
    bool client_gone = false;
    bool interrupted = false;   // cut short by interrupted() (server shutdown): finish_reason length
    double ttft_ms = -1;                // from the request's turn to its first token (-1: none)
    std::vector<float> token_gaps_ms;  // between consecutive tokens
};

// How far the prompt's prefill is (llama-server's prompt_progress).
struct Progress {
    int n_total = 0, n_cache = 0, n_processed = 0;  // prompt tokens; reused from the cache; done (cache included)
    double ms = 0;                                   // since the prefill began
};

// Runs `job` on the session, calling on_delta as text arrives (it returns false once the client is
// gone). Stops within one token of client_gone() or interrupted() turning true; an interrupted reply
// still ends normally, as one cut short by max_tokens. on_prefill (optional) hears the prefill's progress.
Outcome generate_reply(llm::Session& session, const Job& job, const std::function<bool(Delta&&)>& on_delta,
                       const std::function<bool()>& client_gone, const std::function<bool()>& interrupted = {},
                       const std::function<void(const Progress&)>& on_prefill = {});

}  // namespace server
