// Our interpreter for the Jinja subset real chat templates use (Jinja 3.1 with Hugging Face's settings:
// trim_blocks, lstrip_blocks, an immutable sandbox, transformers' tojson and globals). Parse once, render
// from any number of threads, each render within a budget. llm::ChatTemplate is its caller.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace jinja {

// The Python exception a template error corresponds to.
enum class ErrorKind { SYNTAX, UNDEFINED, TYPE, VALUE, SECURITY, RAISED, RUNTIME };

// A template failed to parse or render. `message` is what Jinja would say (for RAISED exactly the
// template's raise_exception(msg)); `line` the 1-based template line, 0 when unknown.
struct Error : std::exception {
    ErrorKind kind;
    std::string message;
    int line = 0;  // 0 until the statement or expression that failed adds it
    Error(ErrorKind k, std::string m, int l = 0) : kind(k), message(std::move(m)), line(l) {}
    const char* what() const noexcept override { return message.c_str(); }
};

// What one render may use; exceeding any is an Error (RUNTIME) naming the limit. Every real template in
// ../shared/golden/templates uses a tiny fraction (tests/jinja/budget_test.cpp).
struct TemplateLimits {
    uint64_t max_steps = 2'000'000;                // statements, expressions, loop iterations, items touched
    uint64_t max_output_bytes = 32ull << 20;       // all text appended to the output and captured blocks
    uint64_t max_alloc_bytes = 128ull << 20;       // all strings and containers the template creates
    size_t max_stack_bytes = 1u << 20;             // native stack (less if the thread has less; 4x under sanitizers)
};

using Clock = std::function<std::tm()>;  // local "now" for strftime_now

struct Program;  // a parsed template (jinja/ast_impl.h), immutable

// Throws Error(SYNTAX) with the line; a source over 1 MiB is refused before parsing (line 0).
std::shared_ptr<const Program> parse(std::string_view source);

// Renders `program` against `context` (exactly the variables the template sees; key order is kept).
// Throws Error. A render on a thread with a tok::CancelScope stops (RUNTIME) once the scope says so.
std::string render(const Program& program, const nlohmann::ordered_json& context, Clock clock,
                   const TemplateLimits& limits = {});

}  // namespace jinja
