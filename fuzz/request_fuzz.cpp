// Fuzz target: every API's request parser on arbitrary bytes — parse_body, then OpenAI chat completions
// (through a real ChatTemplate, the ChatML fallback), completions and Responses, Anthropic Messages,
// ollama's chat and generate, and both embeddings shapes, against a scripted session. Anything but a
// parsed Job or an ApiError / TemplateError is a bug.
#include "fake/fake_model.h"
#include "llm/chat_template.h"
#include "server/server_impl.h"

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
    auto expect_refusals_only = [](auto&& parse) {
        try {
            parse();
        } catch (const server::ApiError&) {
        } catch (const llm::TemplateError&) {
        }
    };
    expect_refusals_only([&] { server::parse_chat_request(j, session, render, "fuzz"); });
    expect_refusals_only([&] { server::parse_completion_request(j, session, "fuzz"); });
    expect_refusals_only([&] { server::parse_responses_request(j, session, render, "fuzz"); });
    expect_refusals_only([&] { server::parse_anthropic_request(j, session, render, "fuzz"); });
    expect_refusals_only([&] { server::parse_chat_request(server::anthropic_to_chat(j, true), session, render, "fuzz"); });
    for (bool generate : {false, true}) expect_refusals_only([&] { server::parse_ollama_request(j, session, render, "fuzz", generate); });
    for (bool ollama : {false, true}) expect_refusals_only([&] { server::parse_embeddings_request(j, session, "fuzz", ollama); });
    return 0;
}
