// The stream router: splits a model's streamed text into answer content, reasoning (a leading
// <think>…</think>, or everything up to </think> when the prompt already opened it) and tool calls
// (<tool_call> blocks in Hermes JSON or Qwen XML). Partial tags are held back across pushes, never leaked.
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

struct RouterOptions {
    bool parse_reasoning = true;
    bool start_in_reasoning = false;  // the prompt ends with <think>
    bool parse_tool_calls = false;    // the request offered tools
    bool start_in_tool_call = false;  // the prompt ends with <tool_call> (tool_choice "required")
    nlohmann::json tools = nlohmann::json::array();  // OpenAI tool list: parameter types for Qwen XML values
};

class StreamRouter {
public:
    explicit StreamRouter(RouterOptions options);
    RoutedText push(std::string_view text);
    RoutedText finish();  // end of stream: whatever is held back, an unterminated block included

private:
    enum class Mode { LEADING, REASONING, CONTENT, TOOL_CALL };
    void route(RoutedText& out, bool at_end);
    void end_tool_call(RoutedText& out, std::string_view body, bool terminated);

    RouterOptions options_;
    Mode mode_;
    std::string pending_;
    bool trim_content_start_ = false;  // drop the blank lines between </think> and the answer
    std::mt19937_64 rng_{std::random_device{}()};
};

// Parses one <tool_call> body (without the tags): Hermes JSON {"name":…, "arguments":{…}} or Qwen XML
// <function=NAME><parameter=K>V</parameter>…</function>. Returns false when it is neither.
bool parse_tool_call(std::string_view body, const nlohmann::json& tools, std::string& name, std::string& arguments);

}  // namespace llm
