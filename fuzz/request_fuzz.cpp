// Fuzz target: the OpenAI request parsers on arbitrary bytes — parse_body, then chat completions
// (through a real ChatTemplate, the ChatML fallback) and completions against a scripted session.
// Anything but a parsed Job or an ApiError / TemplateError is a bug.
#include "fake/fake_model.h"
#include "llm/chat_template.h"
#include "server/request.h"

#include <cstddef>
#include <cstdint>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fake::ScriptedSession session(4096);
    static const auto chat_template = std::make_shared<llm::ChatTemplate>(llm::ChatTemplate::fallback_source("qwen2", "qwen2"));
    static const server::ChatRenderer render = [](const nlohmann::ordered_json& context) {
        return chat_template->render(context);
    };
    std::string body(reinterpret_cast<const char*>(data), size);
    server::json j;
    try {
        j = server::parse_body(body);
    } catch (const server::ApiError&) {
        return 0;
    }
    try {
        server::parse_chat_request(j, session, render, "fuzz");
    } catch (const server::ApiError&) {
    } catch (const llm::TemplateError&) {
    }
    try {
        server::parse_completion_request(j, session, "fuzz");
    } catch (const server::ApiError&) {
    }
    return 0;
}
