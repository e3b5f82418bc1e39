// The Jinja subset chat templates use, one behaviour per case. Every expected string is what Jinja 3.1
// (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, transformers' tojson) renders.
#include "jinja/jinja_test_util.h"

#include <catch2/catch.hpp>

namespace {

std::string render(const std::string& source, const std::string& context = "{}") {
    return jinja_test::Template(source).render(nlohmann::ordered_json::parse(context));
}

const char* const CHAT = R"({"messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello", "tool_calls": [{"id": "call1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2, "metric": true}}}]}]})";

}  // namespace

TEST_CASE("trim_blocks and lstrip_blocks remove a block's own line, as Hugging Face renders") {
    CHECK(render("  {% if true %}\n  x\n  {% endif %}\n") == "  x\n");
    CHECK(render("{% for i in [1, 2] %}\n{{ i }}\n{% endfor %}") == "1\n2\n");
    CHECK(render("{{ 1 }}  {% if true %}x{% endif %}") == "1  x");  // not at a line start: kept
    CHECK(render("{# comment #}\nx") == "x");
}

TEST_CASE("whitespace markers: - strips all whitespace on its side, + keeps the line's indentation") {
    CHECK(render("a  \n {{- 'b' -}} \n  c") == "abc");
    CHECK(render("{%- if true -%}\n  a  \n{%- endif -%}  \n b") == "ab");
    CHECK(render("a\n  {%+ if true %}b{% endif %}\n") == "a\n  b");
    CHECK(render("{{ 'x' }}\n") == "x");  // one trailing newline of the source is dropped
    CHECK(render("{{ 'x' }}\n\n") == "x\n");
}

TEST_CASE("raw blocks print their content verbatim") {
    CHECK(render("{% raw %}{{ x }}{% endraw %}") == "{{ x }}");
}

TEST_CASE("values print as Python prints them") {
    CHECK(render("{{ none }} {{ true }} {{ false }} {{ missing }}|") == "None True False |");
    CHECK(render("{{ [none, true, 1.0, 'it\\'s', \"q\\\"\"] }}") == "[None, True, 1.0, \"it's\", 'q\"']");
    CHECK(render("{{ {'a': 1, 'b': [1, {'c': none}]} }} {{ ('a',) }}") == "{'a': 1, 'b': [1, {'c': None}]} ('a',)");
    CHECK(render("{{ 1e20 }} {{ 1e16 }} {{ 1234567890123456.0 }} {{ 1e-5 }} {{ 0.0001 }} {{ 0.1 + 0.2 }}") ==
          "1e+20 1e+16 1234567890123456.0 1e-05 0.0001 0.30000000000000004");
    CHECK(render("{{ ['\\u200dx', '\\xa0', 'tab\\t', '\\U0001F600', '\\x00'] }}") ==
          "['\\u200dx', '\\xa0', 'tab\\t', '\U0001F600', '\\x00']");
}

TEST_CASE("operator precedence follows Jinja: filters and tests bind tightest") {
    CHECK(render("{{ 'a' + m['content'] | trim + 'b' }}", R"({"m": {"content": "  x  "}})") == "axb");
    CHECK(render("{{ messages | length - 1 }}", R"({"messages": [1, 2, 3]})") == "2");
    CHECK(render("{{ not tools is none }}", R"({"tools": null})") == "False");
    CHECK(render("{{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 1 + 2 * 3 }}") == "4 64 7");
    CHECK(render("{{ 'x' ~ 1 ~ none ~ [1] }}") == "x1None[1]");
    CHECK_THROWS_AS(render("{{ 'x' ~ 1 + 2 }}"), jinja::Error);  // ('x' ~ 1) + 2
}

TEST_CASE("arithmetic and comparisons have Python's semantics") {
    CHECK(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** -1 }} {{ true + 1 }}") == "3 -4 2 3.5 0.5 2");
    CHECK(render("{{ 'ab' * 2 }} {{ [1] + [2] }} {{ 1 == 1.0 }} {{ 1 < 2 < 3 }} {{ [1, 2] < [1, 3] }}") ==
          "abab [1, 2] True True True");
    CHECK(render("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' or [] }} {{ 'yes' if 0 }}|") == "x y [] |");
    CHECK(render("{{ 'b' in 'abc' }} {{ 1 in [1] }} {{ 'k' in {'k': 1} }} {{ 'x' not in missing }}") == "True True True True");
}

TEST_CASE("indexing and slicing work as in Python, by code point") {
    CHECK(render("{{ [1, 2, 3][-1] }} {{ [1, 2, 3][::-1] }} {{ [1, 2, 3, 4, 5][4:1:-2] }} {{ [1, 2][5] }}|") == "3 [3, 2, 1] [5, 3] |");
    CHECK(render("{{ 'héllo'[1:4] }} {{ 'héllo'|length }} {{ 'héllo'[::-1] }} {{ 'abc'[-1] }}") == "éll 5 olléh c");
    CHECK(render("{{ messages[1:] | map(attribute='role') | join(',') }}", CHAT) == "user,assistant");
}

TEST_CASE("x.key on a dict tries the attribute (a dict method) first, then the item") {
    CHECK(render("{{ m.role }} {{ m.get('role') }} {{ m.get('x', 0) }} {{ m.items() | list }}", R"({"m": {"role": "user"}})") ==
          "user user 0 [('role', 'user')]");
    CHECK(render("{% set d = {'items': 5} %}{{ d['items'] }} {{ d.items is defined }}") == "5 True");
}

TEST_CASE("set in a for body is local to the iteration; namespace() carries state out") {
    CHECK(render("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }};{% endfor %}{{ x }}") == "111;111;1");
    CHECK(render("{% set ns = namespace(n=0) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}") == "6");
    CHECK(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}") == "5");
}

TEST_CASE("macros: defaults, keywords, varargs, caller, recursion, and late binding of globals") {
    CHECK(render("{% macro m(a, b=2, c='z') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(1, c='q') }} {{ m() }}|") ==
          "12z 13z 12q 2z|");
    CHECK(render("{% macro m() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, x=3) }}") == "(1, 2){'x': 3}");
    CHECK(render("{% macro m() %}[{{ caller(5) }}]{% endmacro %}{% call(x) m() %}got {{ x }}{% endcall %}") == "[got 5]");
    CHECK(render("{% macro m(x) %}{% if x > 0 %}{{ x }}{{ m(x - 1) }}{% endif %}{% endmacro %}{{ m(3) }}") == "321");
    CHECK(render("{% set x = 5 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 6 %}{% for i in [1] %}{% set x = 7 %}{{ m() }}{% endfor %}") == "6");
    CHECK_THROWS_AS(render("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), jinja::Error);
}

TEST_CASE("loop variables, loop filters, else, break and continue") {
    CHECK(render("{% for i in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}|{% endfor %}") ==
          "10TrueFalse33|21FalseFalse32|32FalseTrue31|");
    CHECK(render("{% for i in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}") == "-2|1-3|2-|");
    CHECK(render("{% for i in [1, 2, 3] if i != 2 %}{{ i }}{{ loop.index }}{{ loop.last }}{% endfor %}") == "11False32True");
    CHECK(render("{% for i in [] %}x{% else %}empty{% endfor %}") == "empty");
    CHECK(render("{% for i in [1, 2, 3, 4] %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}") == "13");
    CHECK(render("{% for k, v in {'a': 1, 'b': 2} | items %}{{ k }}={{ v }};{% endfor %}") == "a=1;b=2;");
    CHECK(render("{% for i in [1, 2] %}{{ loop.cycle('x', 'y') }}{% endfor %}") == "xy");
}

TEST_CASE("block set, filter blocks and with") {
    CHECK(render("{% set x %}  block {{ 1 }} {% endset %}[{{ x }}]") == "[  block 1 ]");
    CHECK(render("{% set x | upper %}abc{% endset %}{{ x }}{% filter trim %}  y  {% endfilter %}") == "ABCy");
    CHECK(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}|") == "3|");
}

TEST_CASE("string methods strip and split Python's whitespace, U+3000 and NBSP included") {
    CHECK(render("{{ '\\u3000x\\xa0' | trim }}|{{ ' a\\u3000b '.split() }}|{{ 'xxhixx'.strip('x') }}") == "x|['a', 'b']|hi");
    CHECK(render("{{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b c '.split(none, 1) }}") ==
          "['a', 'b c'] ['a,b', 'c'] ['a', 'b c ']");
    CHECK(render("{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'ab'.replace('', '-') }} {{ 'aaa'.replace('a', 'b', 2) }}") ==
          "True True -a-b- bba");
    CHECK(render("{{ 'ß straße'|upper }} {{ 'hello world'.title() }} {{ '{} and {n}'.format(1, n='b') }} {{ '%s-%d' % ('a', 3) }}") ==
          "SS STRASSE Hello World 1 and b a-3");
}

TEST_CASE("filters: selectattr, map, join, dictsort, unique, sort, default, items") {
    CHECK(render("{{ messages | selectattr('role', 'equalto', 'user') | list | length }}", CHAT) == "1");
    CHECK(render("{{ [{'a': 1}, {'b': 2}] | selectattr('a', 'defined') | list }} {{ [1, 2, 3] | reject('even') | list }}") ==
          "[{'a': 1}] [1, 3]");
    CHECK(render("{{ [{'a': 1}, {'b': 2}] | map(attribute='a', default=0) | list }} {{ ['a', 'b'] | map('upper') | join('+') }}") == "[1, 0] A+B");
    CHECK(render("{{ {'b': 1, 'A': 2} | dictsort }} {{ ['b', 'A', 'a'] | unique | list }} {{ [{'n': 2}, {'n': 1}] | sort(attribute='n') }}") ==
          "[('A', 2), ('b', 1)] ['b', 'A'] [{'n': 1}, {'n': 2}]");
    CHECK(render("{{ x | default('d') }} {{ '' | default('d', true) }} {{ none | default('d') }} {{ x | items | list }}") == "d d None []");
    CHECK_THROWS_WITH(render("{% for k, v in 'str' | items %}{% endfor %}"), Catch::Contains("Can only get item pairs from a mapping."));
}

TEST_CASE("tojson is Python's json.dumps: spaces after separators, no ASCII escaping, insertion order") {
    CHECK(render("{{ messages[2].tool_calls[0].function.arguments | tojson }}", CHAT) == R"({"city": "Paris", "days": 2, "metric": true})");
    CHECK(render("{{ {'a': [1, {}], 'b': []} | tojson(indent=2) }}") == "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
    CHECK(render("{{ 'é😀' | tojson }} {{ 'é😀' | tojson(ensure_ascii=true) }}") == "\"é😀\" \"\\u00e9\\ud83d\\ude00\"");
    CHECK(render("{{ [1, 2] | tojson(separators=(',', ':')) }} {{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}") == "[1,2] {\"a\": 2, \"b\": 1}");
    CHECK(render("{{ '\\u0001\\x7f\\t\\b\\f/<>&\\'' | tojson }} {{ 1.0 | tojson }} {{ {1: 2, none: 3, false: 4, 2.5: 5} | tojson }}") ==
          "\"\\u0001\x7f\\t\\b\\f/<>&'\" 1.0 {\"1\": 2, \"null\": 3, \"false\": 4, \"2.5\": 5}");
}

TEST_CASE("tests: string, mapping, iterable, sequence, none, defined, false, boolean") {
    CHECK(render("{{ 'x' is string }} {{ {} is mapping }} {{ [] is mapping }} {{ 'x' is iterable }} {{ 5 is iterable }} {{ {} is sequence }}") ==
          "True True False True False True");
    CHECK(render("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ false is false }} {{ 0 is false }} {{ 1 is boolean }}") ==
          "False True True True False False");
    CHECK(render("{{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 1 is eq 1 }} {{ 'ab' is lower }} {{ x is iterable }}") == "True True True True True");
}

TEST_CASE("undefined prints as nothing and iterates as empty, but other uses raise") {
    CHECK(render("[{{ x }}]{% for i in x %}{{ i }}{% endfor %}{{ x | length }}{{ not x }}") == "[]0True");
    CHECK(render("{{ none.x }}|{{ {'a': 1}.b }}|{{ [1][5] }}|") == "|||");
    for (const char* bad : {"{{ x.y }}", "{{ x['y'] }}", "{{ x + 1 }}", "{{ 'a' + x }}", "{{ x() }}", "{{ {'a': 1}.b.c }}"}) {
        INFO(bad);
        try {
            render(bad);
            FAIL("rendered");
        } catch (const jinja::Error& e) {
            CHECK(e.kind == jinja::ErrorKind::UNDEFINED);
        }
    }
}

TEST_CASE("the sandbox is immutable: list.append and dict.pop raise SecurityError") {
    for (const char* bad : {"{% set l = [1] %}{{ l.append(2) }}", "{{ {'a': 1}.pop('a') }}", "{{ [1].pop() }}"}) {
        INFO(bad);
        try {
            render(bad);
            FAIL("rendered");
        } catch (const jinja::Error& e) {
            CHECK(e.kind == jinja::ErrorKind::SECURITY);
            CHECK_THAT(e.message, Catch::Contains("is unsafe"));
        }
    }
}

TEST_CASE("Markup from |safe escapes the plain operand of +, as markupsafe does") {
    CHECK(render("{{ 'x' | safe + '<' }} {{ ('<' | safe) ~ '<' }} {{ '<b>' | e }}") == "x&lt; << &lt;b&gt;");
}

TEST_CASE("string literals: both quotes, Python escapes, adjacent literals, raw newlines") {
    CHECK(render("{{ 'it\\'s' }} {{ \"dq\\\"\" }} {{ 'a' 'b' }} {{ '\\x41\\u00e9\\101' }} {{ 'bad\\d' }} {{ 'l1\nl2' }}") ==
          "it's dq\" ab AéA bad\\d l1\nl2");
    CHECK(render("{{ 0x1F }} {{ 0b101 }} {{ 1_000 }} {{ 1.5e3 }} {{ [1, 2, ] }}") == "31 5 1000 1500.0 [1, 2]");
}
