// Chat templates: our interpreter for the Jinja subset real chat templates use, rendered with
// Hugging Face's settings (trim_blocks, lstrip_blocks, tojson without HTML escaping).
// (Interface agreed between modules; the template module owns and may extend it.)
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <stdexcept>
#include <string>

namespace llm {

// A template failed to parse or render; the message carries the template line.
struct TemplateError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class ChatTemplate {
public:
    explicit ChatTemplate(const std::string& source);  // parses; throws TemplateError
    ~ChatTemplate();
    ChatTemplate(ChatTemplate&&) noexcept;
    ChatTemplate& operator=(ChatTemplate&&) noexcept;

    // `context` holds exactly the variables the template sees: messages, tools, add_generation_prompt,
    // bos_token, eos_token, extra variables (enable_thinking, ...). Key order is preserved.
    std::string render(const nlohmann::ordered_json& context) const;

    // The template a model without tokenizer.chat_template gets, by tokenizer.ggml.pre / architecture.
    static std::string fallback_source(const std::string& pre, const std::string& arch);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace llm
