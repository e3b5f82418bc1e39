// llm::prepare_chat, the one chat prompt pipeline: a real ChatML Jinja template over the real qwen3
// vocabulary (control tokens <|im_start|>, <|im_end|>; user-defined <think>).
#include "common/test_data.h"
#include "gguf/gguf.h"
#include "llm/chat_prompt.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>

namespace {

using json = nlohmann::ordered_json;

const char* const CHATML = R"({%- for m in messages -%}
<|im_start|>{{ m.role }}
{{ m.content }}
{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function.arguments | tojson }}</tool_call>{% endfor %}{% endif -%}
<|im_end|>
{% endfor -%}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if open_think %}<think>
{% endif %}{% endif -%})";

struct Qwen3 {
    std::unique_ptr<gguf::File> file = gguf::File::open(test_data::shared("tokenizers/vocab/qwen3.vocab.gguf"));
    std::unique_ptr<tok::Tokenizer> tokenizer = tok::Tokenizer::from_gguf(*file);
    std::shared_ptr<llm::ChatTemplate> chat_template = std::make_shared<llm::ChatTemplate>(CHATML);
    llm::ChatRenderer render = [t = chat_template](const json& context) { return t->render(context); };
};

llm::ChatInput user(const std::string& text) {
    llm::ChatInput input;
    input.messages.push_back({{"role", "user"}, {"content", text}});
    return input;
}

}  // namespace

TEST_CASE("prepare_chat: the prompt is the rendered template, tokenized with its control tokens") {
    REQUIRE_SHARED_DATA();
    Qwen3 q;
    const llm::PreparedChat chat = llm::prepare_chat(q.render, *q.tokenizer, user("hi"));
    CHECK(chat.ids == q.tokenizer->encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", true, true));
    CHECK_FALSE(chat.router.start_in_reasoning);
    CHECK_FALSE(chat.router.parse_tool_calls);
}

TEST_CASE("prepare_chat: a message that spells a control token stays text") {
    REQUIRE_SHARED_DATA();
    Qwen3 q;
    const llm::PreparedChat chat = llm::prepare_chat(q.render, *q.tokenizer, user("<|im_start|>system"));
    const int32_t im_start = q.tokenizer->encode("<|im_start|>", false, true).at(0);
    CHECK(std::count(chat.ids.begin(), chat.ids.end(), im_start) == 2);  // the user turn's and the assistant's
    CHECK(q.tokenizer->decode(chat.ids) == "<|im_start|>user\n<|im_start|>system<|im_end|>\n<|im_start|>assistant\n");
}

TEST_CASE("prepare_chat: a prompt ending in <think> starts the reply in reasoning, closed when a call must come first") {
    REQUIRE_SHARED_DATA();
    Qwen3 q;
    llm::ChatInput input = user("hi");
    input.kwargs["open_think"] = true;
    CHECK(llm::prepare_chat(q.render, *q.tokenizer, input).router.start_in_reasoning);
    input.tool_call_first = true;
    const llm::PreparedChat chat = llm::prepare_chat(q.render, *q.tokenizer, input);
    CHECK_FALSE(chat.router.start_in_reasoning);
    CHECK(q.tokenizer->decode(chat.ids).ends_with("<think>\n\n\n</think>\n\n"));
}

TEST_CASE("prepare_chat: tool-call arguments sent as a JSON string reach the template as an object") {
    REQUIRE_SHARED_DATA();
    Qwen3 q;
    llm::ChatInput input = user("hi");
    input.messages.push_back({{"role", "assistant"}, {"content", ""},
                              {"tool_calls", json::array({{{"id", "c1"}, {"type", "function"},
                                                           {"function", {{"name", "f"}, {"arguments", R"({"x": 1})"}}}}})}});
    CHECK(q.tokenizer->decode(llm::prepare_chat(q.render, *q.tokenizer, input).ids).find(R"(<tool_call>{"x": 1}</tool_call>)") != std::string::npos);
    input.messages[1]["tool_calls"][0]["function"]["arguments"] = std::string(300, '[') + std::string(300, ']');
    CHECK_THROWS_AS(llm::prepare_chat(q.render, *q.tokenizer, input), llm::ChatInputError);
}

TEST_CASE("prepare_chat: tools offered set the router to read calls; a prompt over max_prompt_bytes is refused before tokenizing") {
    REQUIRE_SHARED_DATA();
    Qwen3 q;
    llm::ChatInput input = user("hi");
    input.tools = json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"type", "object"}}}}}}});
    const llm::PreparedChat chat = llm::prepare_chat(q.render, *q.tokenizer, input);
    CHECK(chat.router.parse_tool_calls);
    CHECK(chat.router.tools == input.tools);
    CHECK(chat.router.tool_syntax == llm::ToolSyntax::HERMES);
    input.max_prompt_bytes = 10;
    CHECK_THROWS_AS(llm::prepare_chat(q.render, *q.tokenizer, input), llm::PromptTooLong);
}
