// Chat templates: a model's Jinja template rendered by our interpreter (jinja/) with Hugging Face's
// settings (trim_blocks, lstrip_blocks, tojson without HTML escaping), and the fallback templates.
// (Interface agreed between modules; the template module owns and may extend it.)
#pragma once

#include "jinja/jinja.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace llm {

// A template failed to parse or render; the message carries the template line.
struct TemplateError : std::runtime_error {
    using std::runtime_error::runtime_error;

    // Which Python/Jinja exception the reference implementation raises in the same situation.
    enum class Kind { SYNTAX, UNDEFINED, TYPE, VALUE, SECURITY, RAISED, RUNTIME };
    TemplateError(Kind kind, int line, std::string message, const std::string& template_name);

    Kind kind = Kind::RUNTIME;
    int line = 0;         // 1-based line in the template source; 0 when unknown
    std::string message;  // without the location; for RAISED exactly the template's raise_exception(msg)
};

// What one render may use (jinja/jinja.h); exceeding any is a TemplateError (RUNTIME) naming the limit.
using TemplateLimits = jinja::TemplateLimits;

// A chat's messages cannot be prepared (tool-call arguments nest too deep); `param` names the field
// (messages[2].tool_calls[0].function.arguments).
struct ChatInputError : std::invalid_argument {
    std::string param;
    ChatInputError(const std::string& message, std::string param_) : std::invalid_argument(message), param(std::move(param_)) {}
};

class ChatTemplate {
public:
    // Parses; throws TemplateError. `name` (e.g. the file) only appears in error messages.
    explicit ChatTemplate(const std::string& source, std::string name = "");
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;

    // `context` holds exactly the variables the template sees: messages, tools, add_generation_prompt,
    // bos_token, eos_token, extra variables (enable_thinking, ...). Key order is preserved.
    // Thread-safe: one template may render from several threads at once. A render on a thread with a
    // tok::CancelScope stops (TemplateError) once the scope says so.
    std::string render(const nlohmann::ordered_json& context) const;

    // Where strftime_now() takes "now" (local time); the system clock by default. Tests pin it.
    void set_clock(std::function<std::tm()> now);
    // The budget of each render (TemplateLimits' defaults unless set).
    void set_limits(const TemplateLimits& limits);

    // The template a model without tokenizer.chat_template gets, by tokenizer.ggml.pre / architecture:
    //   llama3, llama-v3, llama-bpe                  -> Llama 3 headers (<|start_header_id|>...<|eot_id|>)
    //   deepseek-v3, deepseek-llm, deepseek-r1-qwen  -> DeepSeek (<｜User｜>...<｜Assistant｜>)
    //   glm4, chatglm-bpe                            -> GLM-4 ([gMASK]<sop><|user|>...)
    //   tekken                                       -> Mistral ([INST]...[/INST])
    //   kimi-k2                                      -> Kimi (<|im_user|>user<|im_middle|>...<|im_end|>)
    //   architecture gpt-oss                         -> Harmony (<|start|>role<|message|>...<|end|>)
    //   architecture gemma, gemma2, gemma3           -> Gemma (<start_of_turn>user ... <end_of_turn>)
    //   architecture llama without a BPE preset      -> Llama 2 ([INST] <<SYS>> ... [/INST])
    //   anything else (qwen2, qwen35, olmo, ...)     -> ChatML (<|im_start|>role ... <|im_end|>)
    static std::string fallback_source(const std::string& pre, const std::string& arch);

    // Prepares an OpenAI `messages` array in place for templates: tool-call `arguments` sent as JSON
    // strings (the OpenAI wire format) become objects, as templates expect. Invalid JSON stays a string;
    // arguments nesting deeper than `max_depth` throw ChatInputError.
    static void prepare_messages(nlohmann::ordered_json& messages, int max_depth = 256);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace llm
