// The per-render budget of our Jinja interpreter (internal to jinja/): steps, output bytes, allocated
// bytes and native stack, so that a hostile template (a GGUF carries its own) ends in an error quickly.
#pragma once

#include "jinja/jinja.h"

#include <cstddef>
#include <cstdint>

namespace jinja {

// Counts one render's work against its limits. The renderer installs it for the current thread, so
// that values, filters and printing (free functions) can charge it; without one nothing is counted.
class Budget {
public:
    explicit Budget(const TemplateLimits& limits);
    ~Budget();
    Budget(const Budget&) = delete;
    Budget& operator=(const Budget&) = delete;

    static Budget* current();

    void step(uint64_t n);           // n units of work (a statement, an expression, an item touched)
    void output(size_t bytes);       // bytes appended to the output or a captured block
    void allocate(size_t bytes);     // bytes of a string or container the template made
    void reserve(size_t bytes);      // fails when allocating `bytes` more would exceed the cap
    void check_stack();              // fails before the native stack could overflow

private:
    TemplateLimits limits_;
    uint64_t steps_ = 0;
    uint64_t output_ = 0;
    uint64_t allocated_ = 0;
    uintptr_t stack_base_ = 0;   // the frame that started the render
    size_t stack_allowed_ = 0;   // bytes below it we may use (limit, or less when the thread's stack is small)
    Budget* previous_ = nullptr;
};

// Shorthands that do nothing outside a render.
inline void budget_step(uint64_t n = 1) {
    if (Budget* b = Budget::current()) b->step(n);
}
inline void budget_allocate(size_t bytes) {
    if (Budget* b = Budget::current()) b->allocate(bytes);
}
inline void budget_reserve(size_t bytes) {
    if (Budget* b = Budget::current()) b->reserve(bytes);
}
inline void budget_check_stack() {
    if (Budget* b = Budget::current()) b->check_stack();
}

}  // namespace jinja
