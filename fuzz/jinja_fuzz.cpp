// Fuzz target: our Jinja lexer, parser and renderer. The input is the template; it renders against a
// small chat context under a tight budget, so that runaway templates end quickly as TemplateError.
#include "llm/chat_template.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi <b>"},
                     {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                      "function": {"name": "f", "arguments": {"x": [1, 2.5, null, true]}}}]},
                     {"role": "tool", "content": "42"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})");
    llm::TemplateLimits limits;
    limits.max_steps = 200'000;
    limits.max_output_bytes = 1 << 20;
    limits.max_alloc_bytes = 16 << 20;
    try {
        llm::ChatTemplate t(std::string(reinterpret_cast<const char*>(data), size), "fuzz.jinja");
        t.set_limits(limits);
        t.set_clock([] { return std::tm{}; });
        t.render(context);
    } catch (const llm::TemplateError&) {
    }
    return 0;
}
