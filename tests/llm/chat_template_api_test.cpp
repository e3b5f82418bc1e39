// ChatTemplate beyond the language (tests/jinja has the language): errors that say where, the pinned clock, key order, OpenAI message preparation, the
// fallback templates (checked against the real templates they stand in for) and concurrent renders.
#include "common/test_data.h"
#include "llm/chat_template.h"

#include <fstream>
#include <thread>

namespace {

using Json = nlohmann::ordered_json;

std::tm day(int year, int month, int mday, int wday) {
    std::tm tm{};
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = mday;
    tm.tm_wday = wday;
    return tm;
}

// The golden case (template, scenario) of ../shared/golden/templates/cases.jsonl.
Json golden_case(const std::string& template_name, const std::string& scenario) {
    static const std::vector<Json> cases = [] {
        std::vector<Json> all;
        std::ifstream f(test_data::shared("golden/templates/cases.jsonl"));
        for (std::string line; std::getline(f, line);)
            if (!line.empty()) all.push_back(Json::parse(line));
        return all;
    }();
    for (const Json& c : cases)
        if (c["template"] == template_name && c["scenario"] == scenario) return c;
    FAIL("no golden case " << template_name << " / " << scenario);
    return {};
}

const char* const CONVERSATION = R"({"messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "calc", "arguments": {"expr": "2+2"}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "4"},
    {"role": "assistant", "content": "4."},
    {"role": "user", "content": "Thanks"}],
  "tools": [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}],
  "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})";

}  // namespace

TEST_CASE("a TemplateError keeps the interpreter's kind, line and message, and says which template") {
    try {
        llm::ChatTemplate t("{%- if true %}\n  ok\n  {{- raise_exception('System role not supported') }}\n{% endif %}", "t.jinja");
        t.render(Json::object());
        FAIL("rendered");
    } catch (const llm::TemplateError& e) {
        CHECK(e.kind == llm::TemplateError::Kind::RAISED);
        CHECK(e.message == "System role not supported");
        CHECK(e.line == 3);
        CHECK(std::string(e.what()) == "[chat_template] t.jinja:3: System role not supported");
    }
    try {
        llm::ChatTemplate("{{ 'x' ~ }}");
        FAIL("parsed");
    } catch (const llm::TemplateError& e) {
        CHECK(e.kind == llm::TemplateError::Kind::SYNTAX);
        CHECK(std::string(e.what()).rfind("[chat_template] line 1: ", 0) == 0);
    }
}

TEST_CASE("strftime_now reads the settable clock, formatting in the C locale") {
    llm::ChatTemplate t("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%B %d, %Y') }}|{{ strftime_now('%Y-%m-%d %A') }}");
    t.set_clock([] { return day(2026, 1, 15, 4); });
    CHECK(t.render(Json::object()) == "15 Jan 2026|January 15, 2026|2026-01-15 Thursday");
    t.set_clock(nullptr);  // back to the system clock: "DD Mon YYYY|..." of today
    std::string today = t.render(Json::object());
    REQUIRE(today.size() > 12);
    auto digit = [&](size_t i) { return today[i] >= '0' && today[i] <= '9'; };
    CHECK((digit(0) && digit(1) && today[2] == ' ' && today[6] == ' ' && digit(7) && digit(10) && today[11] == '|'));
}

TEST_CASE("dicts keep the context's key order in tojson, items and for loops") {
    Json context = Json::parse(R"({"schema": {"zeta": 1, "alpha": {"y": 2, "b": 3}}})");
    llm::ChatTemplate t("{{ schema | tojson }}|{% for k, v in schema.alpha.items() %}{{ k }}{% endfor %}|{% for k in schema %}{{ k }}{% endfor %}");
    CHECK(t.render(context) == R"({"zeta": 1, "alpha": {"y": 2, "b": 3}}|yb|zetaalpha)");
}

TEST_CASE("prepare_messages turns tool-call arguments sent as JSON strings into objects") {
    Json messages = Json::parse(R"([
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [true]}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "not json"}},
            {"id": "c", "type": "function", "function": {"name": "h", "arguments": "5"}},
            {"id": "d", "type": "function", "function": {"name": "i", "arguments": {"k": "v"}}}]},
        {"role": "user", "content": "hi"}])");
    llm::ChatTemplate::prepare_messages(messages);
    const Json& calls = messages[0]["tool_calls"];
    CHECK(calls[0]["function"]["arguments"].dump() == R"({"z":1,"a":[true]})");
    CHECK(calls[1]["function"]["arguments"] == "not json");  // left for the template to handle
    CHECK(calls[2]["function"]["arguments"] == "5");
    CHECK(calls[3]["function"]["arguments"]["k"] == "v");
    CHECK(messages[1]["content"] == "hi");
}

TEST_CASE("prepared messages render as the goldens with dict arguments do") {
    REQUIRE_SHARED_DATA();
    // e3 sends arguments as a JSON string; prepared, it must render exactly as e_tools (dict arguments).
    Json as_string = golden_case("Qwen-Qwen3-0.6B.jinja", "e3_tools_args_string");
    Json as_dict = golden_case("Qwen-Qwen3-0.6B.jinja", "e_tools");
    llm::ChatTemplate t(test_data::read_text(test_data::shared("golden/templates/templates/Qwen-Qwen3-0.6B.jinja")));
    Json context = as_string["context"];
    llm::ChatTemplate::prepare_messages(context["messages"]);
    CHECK(t.render(context) == as_dict["expected"].get<std::string>());
}

TEST_CASE("fallback templates reproduce the real templates they stand in for") {
    REQUIRE_SHARED_DATA();
    struct Check {
        const char* pre;
        const char* arch;
        const char* golden_template;
        std::vector<const char*> scenarios;
    };
    const Check checks[] = {
        {"llama-bpe", "llama", "vocab-llama3.jinja", {"a_single_user", "b_system_user", "f_reasoning_history", "h_unicode"}},
        {"qwen2", "qwen2", "Qwen-Qwen2.5-7B-Instruct.jinja", {"d_multi_turn_no_gen", "h_unicode", "f_reasoning_history"}},
        {"", "gemma3", "vocab-gemma3.jinja", {"a_single_user", "b_system_user", "c_multi_turn", "h_unicode"}},
    };
    for (const Check& check : checks) {
        llm::ChatTemplate t(llm::ChatTemplate::fallback_source(check.pre, check.arch));
        for (const char* scenario : check.scenarios) {
            INFO(check.golden_template << " / " << scenario);
            Json c = golden_case(check.golden_template, scenario);
            CHECK(t.render(c["context"]) == c["expected"].get<std::string>());
        }
    }
}

TEST_CASE("every fallback template renders a full tool conversation and ends with its generation prompt") {
    const std::pair<const char*, const char*> presets[] = {
        {"qwen2", "qwen2"},  {"llama3", "llama"}, {"deepseek-v3", "deepseek2"}, {"glm4", "glm4"}, {"tekken", "llama"},
        {"kimi-k2", "deepseek2"}, {"gpt-4o", "gpt-oss"}, {"", "gemma3"}, {"", "llama"}, {"olmo", "olmoe"},
    };
    const std::string expected_ends[] = {
        "<|im_start|>assistant\n", "<|start_header_id|>assistant<|end_header_id|>\n\n", "<｜Assistant｜>", "<|assistant|>\n",
        "Thanks[/INST]", "<|im_assistant|>assistant<|im_middle|>", "<|start|>assistant", "<start_of_turn>model\n",
        "Thanks [/INST]", "<|im_start|>assistant\n",
    };
    Json context = Json::parse(CONVERSATION);
    for (size_t i = 0; i < std::size(presets); i++) {
        INFO("pre '" << presets[i].first << "', arch " << presets[i].second);
        llm::ChatTemplate t(llm::ChatTemplate::fallback_source(presets[i].first, presets[i].second));
        std::string out = t.render(context);
        CHECK(out.find("What is 2+2?") != std::string::npos);
        CHECK(out.find("Thanks") != std::string::npos);
        CHECK(out.size() >= expected_ends[i].size());
        CHECK(out.substr(out.size() - std::min(out.size(), expected_ends[i].size())) == expected_ends[i]);
    }
}

TEST_CASE("one template renders from several threads at once") {
    llm::ChatTemplate t(llm::ChatTemplate::fallback_source("qwen2", "qwen2"));
    Json context = Json::parse(CONVERSATION);
    const std::string expected = t.render(context);
    std::vector<std::thread> threads;
    std::vector<int> mismatches(4, 0);
    for (int k = 0; k < 4; k++)
        threads.emplace_back([&, k] {
            for (int i = 0; i < 200; i++) mismatches[k] += t.render(context) != expected;
        });
    for (auto& th : threads) th.join();
    CHECK(mismatches == std::vector<int>(4, 0));
}
