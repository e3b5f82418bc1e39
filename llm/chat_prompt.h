// The one chat prompt pipeline of every front end (the HTTP APIs, `tinyllm chat`, `tinyllm run --chat`):
// messages, tools and template kwargs in; the prompt's token ids and the stream router's options out.
#pragma once

#include "llm/chat_template.h"  // ChatInputError
#include "llm/stream_router.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace llm {

// Renders a chat into the prompt text: `context` holds messages, tools, add_generation_prompt,
// bos_token, eos_token and the template kwargs (see llm::ChatTemplate::render).
using ChatRenderer = std::function<std::string(const nlohmann::ordered_json& context)>;

struct ChatInput {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // OpenAI-shaped, content as a string
    nlohmann::ordered_json tools = nlohmann::ordered_json::array();     // OpenAI tool list; []: none offered
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();   // more template variables (enable_thinking, …);
                                                                         // not the ones prepare_chat sets
    bool tool_call_first = false;  // tool_choice "required": a think block the prompt opens is closed
    size_t max_prompt_bytes = std::numeric_limits<size_t>::max();  // longer: PromptTooLong, before tokenizing
};

struct PreparedChat {
    std::vector<int32_t> ids;  // the prompt, BOS as the vocabulary says
    RouterOptions router;      // <think> opened by the prompt, tool syntax, the tools offered
};

// The rendered prompt is longer than ChatInput::max_prompt_bytes.
struct PromptTooLong : std::length_error {
    size_t bytes;
    explicit PromptTooLong(size_t bytes);
};

// Tool-call arguments (JSON strings, the OpenAI wire format) become objects for the template; client
// text (message fields, tools) stays text even where it spells a control token; the BOS a template
// writes is dropped when the tokenizer adds its own; a prompt ending in <think> starts the reply in
// reasoning. Throws what the renderer throws (llm::TemplateError), ChatInputError, PromptTooLong.
PreparedChat prepare_chat(const ChatRenderer& render, const tok::Tokenizer& tokenizer, const ChatInput& input);

// How the template writes a tool call back into the history says how the model writes one (from a
// probe rendering; HERMES when the template cannot render it). `tools`: the request's, or [].
ToolSyntax detect_tool_syntax(const ChatRenderer& render, const nlohmann::ordered_json& tools);

}  // namespace llm
