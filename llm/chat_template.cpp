// ChatTemplate: parses a model's Jinja chat template once, renders it per request, turns interpreter
// errors into TemplateError with the template line, and provides the fallback templates.
#include "llm/chat_template.h"

#include "llm/config.h"

namespace llm {

namespace {

std::string location(int line, const std::string& name) {
    std::string where = "[chat_template]";
    if (!name.empty()) where += " " + name;
    if (line > 0) where += (name.empty() ? " line " : ":") + std::to_string(line);
    return where + ": ";
}

static_assert(static_cast<int>(jinja::ErrorKind::RAISED) == static_cast<int>(TemplateError::Kind::RAISED) &&
                  static_cast<int>(jinja::ErrorKind::RUNTIME) == static_cast<int>(TemplateError::Kind::RUNTIME),
              "jinja::ErrorKind and TemplateError::Kind list the same kinds in the same order");

TemplateError convert(const jinja::Error& e, const std::string& name) {
    return TemplateError(static_cast<TemplateError::Kind>(e.kind), e.line, e.message, name);
}

std::tm system_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    return tm;
}

// Shared by the fallback templates: a message's text, whether content is a string or a list of parts.
const char* const CONTENT_MACRO = R"({%- macro text(content) -%}
{%- if content is string -%}{{ content }}
{%- elif content is iterable and content is not mapping -%}
{%- for part in content if part is mapping and part['type'] == 'text' -%}{{ part['text'] }}{%- endfor -%}
{%- endif -%}
{%- endmacro -%}
)";

const char* const CHATML = R"({%- if tools -%}
{{- '<|im_start|>system\n' }}{% if messages[0]['role'] == 'system' %}{{ text(messages[0]['content']) + '\n\n' }}{% endif -%}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' -}}
{%- for tool in tools %}{{ '\n' + tool | tojson }}{% endfor -%}
{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if not (tools and loop.first and message['role'] == 'system') -%}
{{- '<|im_start|>' + message['role'] + '\n' + text(message['content']) -}}
{%- for call in message['tool_calls'] | default([]) -%}
{%- set f = call['function'] if call['function'] is defined else call -%}
{{- '\n<tool_call>\n{"name": "' + f['name'] + '", "arguments": ' + (f['arguments'] if f['arguments'] is string else f['arguments'] | tojson) + '}\n</tool_call>' -}}
{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}
)";

const char* const LLAMA3 = R"({{- bos_token | default('') -}}
{%- for message in messages -%}
{%- set role = 'ipython' if message['role'] == 'tool' else message['role'] -%}
{{- '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + text(message['content']) | trim -}}
{%- for call in message['tool_calls'] | default([]) -%}
{{- '{"name": "' + call['function']['name'] + '", "parameters": ' + (call['function']['arguments'] if call['function']['arguments'] is string else call['function']['arguments'] | tojson) + '}' -}}
{%- endfor -%}
{{- '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif -%}
)";

const char* const LLAMA2 = R"({%- set system = text(messages[0]['content']) if messages and messages[0]['role'] == 'system' else '' -%}
{%- for message in messages if message['role'] != 'system' -%}
{%- if message['role'] == 'assistant' -%}{{ ' ' + text(message['content']) | trim + ' ' + eos_token | default('') }}
{%- else -%}
{{- bos_token | default('') + '[INST] ' -}}
{%- if loop.first and system %}{{ '<<SYS>>\n' + system + '\n<</SYS>>\n\n' }}{% endif -%}
{{- text(message['content']) | trim + ' [/INST]' -}}
{%- endif -%}
{%- endfor -%}
)";

const char* const MISTRAL = R"({{- bos_token | default('') -}}
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}{{ '[SYSTEM_PROMPT]' + text(message['content']) + '[/SYSTEM_PROMPT]' }}
{%- elif message['role'] == 'user' -%}{{ '[INST]' + text(message['content']) + '[/INST]' }}
{%- elif message['role'] == 'tool' -%}{{ '[TOOL_RESULTS]' + text(message['content']) + '[/TOOL_RESULTS]' }}
{%- else -%}{{ text(message['content']) + eos_token | default('') }}
{%- endif -%}
{%- endfor -%}
)";

const char* const DEEPSEEK = R"({{- bos_token | default('') -}}
{%- for message in messages if message['role'] == 'system' -%}{{ text(message['content']) }}{%- endfor -%}
{%- for message in messages -%}
{%- if message['role'] == 'user' -%}{{ '<｜User｜>' + text(message['content']) }}
{%- elif message['role'] == 'assistant' -%}{{ '<｜Assistant｜>' + text(message['content']) + '<｜end▁of▁sentence｜>' }}
{%- elif message['role'] == 'tool' -%}{{ '<｜tool▁output▁begin｜>' + text(message['content']) + '<｜tool▁output▁end｜>' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<｜Assistant｜>' }}{%- endif -%}
)";

const char* const GLM4 = R"({{- '[gMASK]<sop>' -}}
{%- for message in messages -%}
{{- '<|' + ('observation' if message['role'] == 'tool' else message['role']) + '|>\n' + text(message['content']) -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|assistant|>\n' }}{%- endif -%}
)";

const char* const KIMI = R"({%- for message in messages -%}
{%- set role = message['role'] if message['role'] in ['user', 'assistant', 'system'] else 'system' -%}
{{- '<|im_' + role + '|>' + message['role'] + '<|im_middle|>' + text(message['content']) + '<|im_end|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|im_assistant|>assistant<|im_middle|>' }}{%- endif -%}
)";

const char* const HARMONY = R"({%- for message in messages -%}
{%- if message['role'] == 'assistant' -%}{{ '<|start|>assistant<|channel|>final<|message|>' + text(message['content']) + '<|end|>' }}
{%- else -%}{{ '<|start|>' + message['role'] + '<|message|>' + text(message['content']) + '<|end|>' }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<|start|>assistant' }}{%- endif -%}
)";

const char* const GEMMA = R"({{- bos_token | default('') -}}
{%- set system = text(messages[0]['content']) + '\n\n' if messages and messages[0]['role'] == 'system' else '' -%}
{%- for message in messages if message['role'] != 'system' -%}
{{- '<start_of_turn>' + ('model' if message['role'] == 'assistant' else 'user') + '\n' -}}
{{- (system if loop.first else '') + text(message['content']) | trim + '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}
)";

}  // namespace

TemplateError::TemplateError(Kind k, int l, std::string msg, const std::string& template_name)
    : std::runtime_error(location(l, template_name) + msg), kind(k), line(l), message(std::move(msg)) {}

struct ChatTemplate::Impl {
    std::shared_ptr<const jinja::Program> program;
    std::string name;
    jinja::Clock clock = system_now;
    TemplateLimits limits;
};

ChatTemplate::ChatTemplate(const std::string& source, std::string name) : impl_(std::make_unique<Impl>()) {
    impl_->name = std::move(name);
    try {
        impl_->program = jinja::parse(source);
    } catch (const jinja::Error& e) {
        throw convert(e, impl_->name);
    }
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
    try {
        return jinja::render(*impl_->program, context, impl_->clock, impl_->limits);
    } catch (const jinja::Error& e) {
        throw convert(e, impl_->name);
    } catch (const TemplateError&) {
        throw;
    } catch (const std::exception& e) {  // e.g. allocation failure on a runaway template
        throw TemplateError(TemplateError::Kind::RUNTIME, 0, e.what(), impl_->name);
    }
}

void ChatTemplate::set_clock(std::function<std::tm()> now) { impl_->clock = now ? std::move(now) : system_now; }
void ChatTemplate::set_limits(const TemplateLimits& limits) { impl_->limits = limits; }

std::string ChatTemplate::fallback_source(const std::string& pre, const std::string& arch) {
    auto is = [&](std::initializer_list<const char*> names) {
        for (const char* n : names)
            if (pre == n) return true;
        return false;
    };
    const ChatFallback by_arch = chat_fallback_of(arch);
    const char* body = CHATML;
    if (is({"llama3", "llama-v3", "llama-bpe"})) body = LLAMA3;
    else if (is({"deepseek-v3", "deepseek-llm", "deepseek-r1-qwen"})) body = DEEPSEEK;
    else if (is({"glm4", "chatglm-bpe"})) body = GLM4;
    else if (is({"tekken"})) body = MISTRAL;
    else if (is({"kimi-k2"})) body = KIMI;
    else if (by_arch == ChatFallback::HARMONY) body = HARMONY;
    else if (by_arch == ChatFallback::GEMMA) body = GEMMA;
    else if (by_arch == ChatFallback::LLAMA2_WITHOUT_PRE && pre.empty()) body = LLAMA2;
    return std::string(CONTENT_MACRO) + body;
}

void ChatTemplate::prepare_messages(nlohmann::ordered_json& messages, int max_depth) {
    if (!messages.is_array()) return;
    for (size_t i = 0; i < messages.size(); i++) {
        auto& message = messages[i];
        if (!message.is_object()) continue;
        auto calls = message.find("tool_calls");
        if (calls == message.end() || !calls->is_array()) continue;
        for (size_t j = 0; j < calls->size(); j++) {
            auto& call = (*calls)[j];
            if (!call.is_object()) continue;
            auto function = call.find("function");
            if (function == call.end() || !function->is_object()) continue;
            auto arguments = function->find("arguments");
            if (arguments == function->end() || !arguments->is_string()) continue;
            // the depth is checked while parsing, so no deeper value exists for a template to recurse into
            const auto limit_depth = [&](int depth, nlohmann::ordered_json::parse_event_t, nlohmann::ordered_json&) {
                if (depth <= max_depth) return true;
                const std::string param = "messages[" + std::to_string(i) + "].tool_calls[" + std::to_string(j) + "].function.arguments";
                throw ChatInputError(param + " nests deeper than " + std::to_string(max_depth) + " levels (the limit)", param);
            };
            auto parsed = nlohmann::ordered_json::parse(arguments->get_ref<const std::string&>(), limit_depth, false);
            if (parsed.is_object()) *arguments = std::move(parsed);
        }
    }
}

}  // namespace llm
