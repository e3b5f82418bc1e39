// The stream router: splits a model's streamed text into answer content, reasoning (a leading
// <think>…</think>, or everything up to </think> when the prompt already opened it; gpt-oss's analysis
// channel) and tool calls in the model's syntax (ToolSyntax). Partial tags are held back across
// pushes, never leaked.
#pragma once

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace llm {

struct ToolCall {
    std::string id;         // call_…
    std::string name;
    std::string arguments;  // a JSON object, serialized
};

// What one push (or finish) produced; empty parts mean "nothing new".
struct RoutedText {
    std::string content;
    std::string reasoning;
    std::vector<ToolCall> tool_calls;
    bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
    void append(RoutedText&& more);
};

// How a model writes tool calls: what its chat template writes for a call in the history.
enum class ToolSyntax {
    HERMES,        // <tool_call>{"name": N, "arguments": {…}}</tool_call>
    QWEN_XML,      // <tool_call><function=N><parameter=K>V</parameter>…</function></tool_call> (Qwen3-Coder)
    LLAMA3_JSON,   // {"name": N, "parameters": {…}} as the whole reply, or after <|python_tag|> (Llama 3.x)
    MISTRAL_JSON,  // [TOOL_CALLS][{"name": N, "arguments": {…}, "id": ID}, …] (Mistral Nemo)
    MISTRAL_ARGS,  // [TOOL_CALLS]N[ARGS]{…}, [CALL_ID]ID before [ARGS] in some templates (Mistral Small 3.2+)
    HARMONY,       // gpt-oss: messages <|channel|>C<|message|>…<|end|>; a call is a commentary message
                   // to=functions.N ending in <|call|>; analysis is reasoning, final is the answer
};

struct RouterOptions {
    bool parse_reasoning = true;
    bool start_in_reasoning = false;  // the prompt ends with <think>
    bool parse_tool_calls = false;    // the request offered tools (and did not say tool_choice "none")
    ToolSyntax tool_syntax = ToolSyntax::HERMES;  // HARMONY also routes channels without tools
    nlohmann::json tools = nlohmann::json::array();  // OpenAI tool list: parameter types for Qwen XML values
};

class StreamRouter {
public:
    explicit StreamRouter(RouterOptions options);
    RoutedText push(std::string_view text);
    RoutedText finish();  // end of stream: whatever is held back, an unterminated block included
    // Whether the router reads this control token's text (a tool-call or channel marker of its
    // syntax): the reply stream passes such tokens on instead of dropping them.
    bool reads_marker(std::string_view token_text) const;

private:
    enum class Mode { LEADING, REASONING, CONTENT, TOOL_CALL, HEADER, MESSAGE };
    void route(RoutedText& out, bool at_end);
    bool route_harmony(RoutedText& out, bool at_end);  // HEADER and MESSAGE; false: wait for more text
    void end_tool_call(RoutedText& out, std::string_view body, bool terminated);
    void add_call(RoutedText& out, std::string name, std::string arguments);

    RouterOptions options_;
    Mode mode_;
    std::string pending_;
    bool trim_content_start_ = false;  // drop the blank lines between </think> and the answer
    bool whole_reply_call_ = false;    // Llama 3.x: the reply began with '{', so it may be one call
    std::string channel_, recipient_;  // harmony: the open message's header
    std::mt19937_64 rng_{std::random_device{}()};
};

// The text that opens a call in `syntax` ("<tool_call>", "<|python_tag|>", "[TOOL_CALLS]"; "" for
// harmony, where the recipient in a message header makes a call).
std::string_view tool_call_opener(ToolSyntax syntax);

// Parses one <tool_call> body (without the tags): Hermes JSON {"name":…, "arguments":{…}} or Qwen XML
// <function=NAME><parameter=K>V</parameter>…</function>. Returns false when it is neither.
bool parse_tool_call(std::string_view body, const nlohmann::json& tools, std::string& name, std::string& arguments);
// Parses the calls after a [TOOL_CALLS] / <|python_tag|> opener, or a Llama 3.x reply: a JSON list or
// JSON objects ({"name", "arguments" | "parameters"}), or Mistral's N[CALL_ID]ID[ARGS]{…}.
// Returns false (and no calls) unless all of the body is calls.
bool parse_call_list(std::string_view body, std::vector<std::pair<std::string, std::string>>& calls);

}  // namespace llm
