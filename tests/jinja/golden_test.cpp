// The golden chat-template renderings (../shared/golden/templates): every case renders byte for byte
// as Jinja did, or fails where Jinja failed (raise_exception cases with exactly the same message).
#include "common/test_data.h"
#include "jinja/jinja_test_util.h"

#include <fstream>
#include <map>

namespace {

// The goldens fix "now" to 2026-01-15 00:00:00 (a Thursday).
std::tm golden_now() {
    std::tm tm{};
    tm.tm_year = 2026 - 1900;
    tm.tm_mon = 0;
    tm.tm_mday = 15;
    tm.tm_wday = 4;
    tm.tm_yday = 14;
    return tm;
}

}  // namespace

TEST_CASE("every golden template case renders exactly as Jinja, or fails where Jinja fails") {
    REQUIRE_SHARED_DATA();
    const std::string dir = test_data::shared("golden/templates/");
    std::map<std::string, jinja_test::Template> templates;
    std::ifstream cases(dir + "cases.jsonl");
    REQUIRE(cases.good());
    int n_cases = 0, n_errors = 0;
    for (std::string line; std::getline(cases, line);) {
        if (line.empty()) continue;
        auto c = nlohmann::ordered_json::parse(line);
        std::string name = c["template"];
        INFO("template " << name << ", scenario " << c["scenario"].get<std::string>());
        auto it = templates.find(name);
        if (it == templates.end()) {
            it = templates.emplace(name, jinja_test::Template(test_data::read_text(dir + "templates/" + name))).first;
            it->second.set_clock(golden_now);
        }
        n_cases++;
        if (c.contains("expected")) {
            std::string got;
            try {
                got = it->second.render(c["context"]);
            } catch (const jinja::Error& e) {
                FAIL_CHECK("unexpected error at line " << e.line << ": " << e.what());
                continue;
            }
            CHECK(got == c["expected"].get<std::string>());
            continue;
        }
        n_errors++;
        std::string source = c["error_source"];
        try {
            std::string got = it->second.render(c["context"]);
            FAIL_CHECK("rendered, but Jinja raised (" << source << "): " << c["error"].get<std::string>() << "\ngot: " << got);
        } catch (const jinja::Error& e) {
            if (source == "raise_exception") {
                CHECK(e.kind == jinja::ErrorKind::RAISED);
                CHECK(e.message == c["error"].get<std::string>());
                CHECK(e.line > 0);
            }
        }
    }
    CHECK(n_cases > 250);
    CHECK(n_errors > 30);
}
