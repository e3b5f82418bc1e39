// Template errors: each carries the template line and the kind of error Jinja would raise, and no
// input — malformed, hostile or runaway — crashes the interpreter.
#include "jinja/jinja_test_util.h"

#include <catch2/catch.hpp>

#include <random>

namespace {

using Kind = jinja::ErrorKind;

jinja::Error error_of(const std::string& source, const std::string& context = "{}") {
    try {
        jinja_test::Template t(source);
        std::string out = t.render(nlohmann::ordered_json::parse(context));
        FAIL("no error; rendered: " << out);
    } catch (const jinja::Error& e) {
        return e;
    }
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("raise_exception fails with exactly the template's message and its line") {
    auto e = error_of("{%- if true %}\n  ok\n  {{- raise_exception('System role not supported') }}\n{% endif %}");
    CHECK(e.kind == Kind::RAISED);
    CHECK(e.message == "System role not supported");
    CHECK(e.line == 3);
}

TEST_CASE("an error inside a macro reports the line inside the macro") {
    auto e = error_of("{% macro m(x) %}\n{{ x + 1 }}\n{% endmacro %}\n{{ m('a') }}");
    CHECK(e.kind == Kind::TYPE);
    CHECK(e.line == 2);
    CHECK(e.message == "can only concatenate str (not \"int\") to str");
}

TEST_CASE("syntax errors name the problem and the line") {
    auto e = error_of("{% if x %}\n\n{% endfor %}");
    CHECK(e.kind == Kind::SYNTAX);
    CHECK(e.line == 3);
    CHECK(error_of("{{ x ").kind == Kind::SYNTAX);
    CHECK(error_of("{% frobnicate %}").message == "Encountered unknown tag 'frobnicate'.");
    CHECK(error_of("{% for x of y %}{% endfor %}").kind == Kind::SYNTAX);
    CHECK(error_of("{{ (1 + 2 }}").kind == Kind::SYNTAX);
    CHECK(error_of("{{ 'unterminated }}").kind == Kind::SYNTAX);
    CHECK(error_of("a {# no end").kind == Kind::SYNTAX);
    CHECK(error_of("{% if true %}never closed").kind == Kind::SYNTAX);
    CHECK(error_of("{% macro m(a=1, b) %}{% endmacro %}").kind == Kind::SYNTAX);
}

TEST_CASE("an unknown filter fails only when it is reached, as in Jinja 3") {
    jinja_test::Template t("{% if args is string %}{{ args | from_json }}{% else %}{{ args | tojson }}{% endif %}");
    CHECK(t.render({{"args", {{"a", 1}}}}) == "{\"a\": 1}");
    try {
        t.render({{"args", "{}"}});
        FAIL("rendered");
    } catch (const jinja::Error& e) {
        CHECK(e.kind == Kind::RUNTIME);
        CHECK(e.message == "No filter named 'from_json' found.");
    }
}

TEST_CASE("Python's type errors: str + list, iterating None, calling a string") {
    CHECK(error_of("{{ 'a' + m }}", R"({"m": [1]})").message == "can only concatenate str (not \"list\") to str");
    CHECK(error_of("{% for x in n %}{% endfor %}", R"({"n": null})").message == "'NoneType' object is not iterable");
    CHECK(error_of("{{ 'a'() }}").kind == Kind::TYPE);
    CHECK(error_of("{{ 1 / 0 }}").kind == Kind::VALUE);
    CHECK(error_of("{% set a, b = [1] %}").kind == Kind::VALUE);
}

TEST_CASE("runaway templates stop with an error instead of exhausting memory or the stack") {
    CHECK(error_of("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}").kind == Kind::RUNTIME);
    CHECK(error_of("{% for i in range(1000000) %}{% endfor %}").kind == Kind::RUNTIME);
    CHECK(error_of("{{ 'a' * 1000000000000 }}").kind == Kind::VALUE);
    CHECK(error_of("{{ 9223372036854775807 + 1 }}").kind == Kind::VALUE);
    CHECK(error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").kind == Kind::SYNTAX);
    std::string deep_ifs;
    for (int i = 0; i < 3000; i++) deep_ifs += "{% if true %}";
    CHECK(error_of(deep_ifs).kind == Kind::SYNTAX);
    std::string deep_json = std::string(600, '[') + std::string(600, ']');
    CHECK(error_of("{{ x | tojson }}", "{\"x\": " + deep_json + "}").kind == Kind::VALUE);
}

TEST_CASE("mangled templates never crash: only jinja::Error or output") {
    const std::string source =
        "{%- set ns = namespace(a=[]) -%}{% macro m(x, y=2) %}{{ x ~ y }}{% endmacro %}\n"
        "{%- for message in messages if message.role != 'x' %}{{- '<|' + message['role'] + '|>\\n' }}"
        "{%- if message.content is string %}{{ message.content | trim }}{% else %}{{ message.content | tojson(indent=2) }}{% endif %}"
        "{{ m(loop.index, y=messages[1:][::-1] | length) }}{%- endfor %}{{ (tools or []) | map(attribute='name') | join(', ') }}";
    const auto context = nlohmann::ordered_json::parse(R"({"messages": [{"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "yo"}]}], "tools": [{"name": "f"}]})");
    REQUIRE_NOTHROW(jinja_test::Template(source).render(context));
    std::mt19937 rng(1234);
    const std::string alphabet = "{}%#-+()[]|.,:'\"~=!<>* \n\\abcx019_";
    int n_errors = 0;
    for (int i = 0; i < 3000; i++) {
        std::string s = source;
        for (int k = 0, n = 1 + static_cast<int>(rng() % 4); k < n; k++) {
            size_t at = rng() % s.size();
            switch (rng() % 3) {
            case 0: s.erase(at, 1 + rng() % 8); break;
            case 1: s.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
            default: s[at] = static_cast<char>(rng() % 256); break;
            }
        }
        try {
            jinja_test::Template(s).render(context);
        } catch (const jinja::Error&) {
            n_errors++;
        }
    }
    CHECK(n_errors > 100);  // the mutations do break most templates; none crashed
}
