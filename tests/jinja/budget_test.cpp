// The render budget: hostile templates (a GGUF carries its own) each end in a jinja::Error within a
// second and half a gigabyte, measured in a child process; real templates stay far below every limit.
#include "common/child_process.h"
#include "common/test_data.h"
#include "jinja/jinja_test_util.h"

#include <fstream>
#include <map>
#include <sstream>

namespace {

constexpr int TEMPLATE_ERROR = 10, RENDERED = 11;

void check_hostile(const std::string& name, const std::string& source, const std::string& expected_in_message) {
    INFO("case: " << name);
    test_child::Result o = test_child::run([&](int& code) {
        try {
            jinja_test::Template t(source);
            t.render(nlohmann::ordered_json::object());
            code = RENDERED;
            return std::string("rendered");
        } catch (const jinja::Error& e) {
            code = TEMPLATE_ERROR;
            return std::string(e.what());
        }
    });
    INFO("exit " << o.code << ", " << o.seconds << " s (CPU " << o.cpu_seconds << " s), peak RSS " << o.peak_rss_kb / 1024
                  << " MB: " << o.message);
    CHECK(o.code == TEMPLATE_ERROR);
    CHECK(o.message.find(expected_in_message) != std::string::npos);
    // CPU time, not wall time: the test machine may be shared; wall time only guards against a hang.
    CHECK(o.cpu_seconds < 1.0 * test_child::SLOWDOWN);
    CHECK(o.seconds < 10.0 * test_child::SLOWDOWN);
    CHECK(o.peak_rss_kb < 512 * 1024 + test_child::RSS_SLACK_KB);
}

}  // namespace

TEST_CASE("nested range(100000) loops stop at the step limit") {
    check_hostile("nested loops", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                  "max_steps");
}

TEST_CASE("a loop testing membership in a large list stops at the step limit") {
    check_hostile("quadratic membership",
                  "{% set xs = range(100000) | list %}{% for i in range(100000) %}{% if -1 in xs %}{% endif %}{% endfor %}",
                  "max_steps");
}

TEST_CASE("a string growing by a constant each iteration (quadratic copying) stops at the allocation cap") {
    check_hostile("quadratic string",
                  "{% set ns = namespace(s='') %}{% for i in range(100000) %}"
                  "{% set ns.s = ns.s + 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' %}{% endfor %}",
                  "max_alloc_bytes");
}

TEST_CASE("a string doubling each iteration stops at the allocation cap") {
    check_hostile("exponential string",
                  "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                  "max_alloc_bytes");
}

TEST_CASE("a list doubling each iteration stops at the allocation cap") {
    check_hostile("exponential list",
                  "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                  "max_alloc_bytes");
}

TEST_CASE("printing a list that repeats one large string many times stops at the allocation cap") {
    check_hostile("amplified repr", "{% set s = 'x' * 100000000 %}{{ [s, s, s, s, s, s, s, s] }}", "max_alloc_bytes");
}

TEST_CASE("joining one large string many times stops at the allocation cap") {
    check_hostile("amplified join", "{% set s = 'x' * 10000000 %}{{ ([s] * 1000) | join(',') }}", "max_alloc_bytes");
    check_hostile("amplified str.join", "{% set s = 'x' * 10000000 %}{{ ','.join([s] * 1000) }}", "max_alloc_bytes");
}

TEST_CASE("output in a loop stops at the output cap") {
    check_hostile("output flood", "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}",
                  "max_output_bytes");
}

TEST_CASE("a captured block that grows without bound stops at the output cap") {
    check_hostile("captured flood",
                  "{% set s = 'x' * 1000000 %}{% set big %}{% for i in range(100000) %}{{ s }}{% endfor %}{% endset %}",
                  "max_output_bytes");
}

TEST_CASE("unbounded macro recursion stops at the recursion limit") {
    check_hostile("macro recursion", "{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}",
                  "maximum recursion depth exceeded");
}

TEST_CASE("a namespace that contains itself, printed, stops before the stack overflows") {
    check_hostile("self-referencing namespace", "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}",
                  "nested too deeply");
}

TEST_CASE("a namespace holding a list holding the namespace, printed, stops before the stack overflows") {
    check_hostile("namespace cycle through a list",
                  "{% set ns = namespace(l=[]) %}{% set ns.l = [ns, ns] %}{{ ns }}", "nested too deeply");
}

TEST_CASE("macro recursion through a 480-deep expression stops at the native stack limit") {
    std::string deep_not;
    for (int i = 0; i < 480; i++) deep_not += "not ";
    check_hostile("deep expression recursion",
                  "{% macro m(n) %}{{ " + deep_not + "m(n + 1) }}{% endmacro %}{{ m(0) }}",
                  "max_stack_bytes");
}

TEST_CASE("a huge template source is refused before parsing") {
    check_hostile("huge literal", "{{ '" + std::string(8 << 20, 'x') + "' }}", "exceeds the limit");
}

TEST_CASE("a large list literal printed in a loop stops at a limit") {
    std::string literal = "[";
    for (int i = 0; i < 50000; i++) literal += "1,";
    literal += "1]";
    check_hostile("list literal in a loop", "{% for i in range(100000) %}{{ " + literal + " }}{% endfor %}", "template budget exceeded");
}

TEST_CASE("sorting a large list in a loop stops at the step limit") {
    check_hostile("repeated sort", "{% set xs = range(100000) | list %}{% for i in range(100000) %}{% set ys = xs | sort %}{% endfor %}",
                  "template budget exceeded");
}

TEST_CASE("a tight limit names itself, and the same template renders under the defaults") {
    jinja_test::Template t("{% for i in range(1000) %}{{ i }}{% endfor %}");
    const auto empty = nlohmann::ordered_json::object();
    REQUIRE_NOTHROW(t.render(empty));
    jinja::TemplateLimits tight;
    tight.max_steps = 100;
    t.set_limits(tight);
    try {
        t.render(empty);
        FAIL("rendered");
    } catch (const jinja::Error& e) {
        CHECK(e.kind == jinja::ErrorKind::RUNTIME);
        CHECK(std::string(e.what()).find("TemplateLimits::max_steps = 100") != std::string::npos);
    }
}

TEST_CASE("every golden template renders under a hundredth of each default limit") {
    REQUIRE_SHARED_DATA();
    const std::string dir = test_data::shared("golden/templates/");
    jinja::TemplateLimits defaults, small;
    small.max_steps = defaults.max_steps / 100;
    small.max_output_bytes = defaults.max_output_bytes / 100;
    small.max_alloc_bytes = defaults.max_alloc_bytes / 100;
    small.max_stack_bytes = defaults.max_stack_bytes / 10;  // a tenth: frames are large in sanitizer builds
    std::map<std::string, jinja_test::Template> templates;
    std::ifstream cases(dir + "cases.jsonl");
    REQUIRE(cases.good());
    int n_rendered = 0;
    for (std::string line; std::getline(cases, line);) {
        if (line.empty()) continue;
        auto c = nlohmann::ordered_json::parse(line);
        if (!c.contains("expected")) continue;
        std::string name = c["template"];
        INFO("template " << name << ", scenario " << c["scenario"].get<std::string>());
        auto it = templates.find(name);
        if (it == templates.end()) {
            std::ifstream f(dir + "templates/" + name, std::ios::binary);
            std::stringstream ss;
            ss << f.rdbuf();
            it = templates.emplace(name, jinja_test::Template(ss.str())).first;
            it->second.set_limits(small);
        }
        CHECK_NOTHROW(it->second.render(c["context"]));
        n_rendered++;
    }
    CHECK(n_rendered > 200);
}
