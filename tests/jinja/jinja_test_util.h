// The jinja tests' template: parsed once and rendered through the interpreter's public interface
// (jinja/jinja.h), with the local clock and the default limits unless a test sets them.
#pragma once

#include "jinja/jinja.h"

#include <ctime>
#include <memory>
#include <string>

namespace jinja_test {

inline std::tm local_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    return tm;
}

class Template {
public:
    explicit Template(const std::string& source) : program_(jinja::parse(source)) {}
    std::string render(const nlohmann::ordered_json& context) const { return jinja::render(*program_, context, clock_, limits_); }
    void set_clock(jinja::Clock clock) { clock_ = std::move(clock); }
    void set_limits(const jinja::TemplateLimits& limits) { limits_ = limits; }

private:
    std::shared_ptr<const jinja::Program> program_;
    jinja::Clock clock_ = local_now;
    jinja::TemplateLimits limits_;
};

}  // namespace jinja_test
