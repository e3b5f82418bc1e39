// The per-render budget: counters against TemplateLimits, and a native stack check that also respects
// the stack the current thread actually has (server threads may have less than the limit).
#include "jinja/budget_impl.h"
#include "jinja/value_impl.h"
#include "tokenizer/tokenizer.h"

#include <pthread.h>

#include <algorithm>
#include <string>

namespace jinja {

namespace {

thread_local Budget* g_current = nullptr;

// Lowest usable address of this thread's stack (0 when unknown); cached, it does not change.
uintptr_t stack_low() {
    thread_local uintptr_t low = [] {
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) != 0) return uintptr_t{0};
        void* addr = nullptr;
        size_t size = 0;
        uintptr_t result = pthread_attr_getstack(&attr, &addr, &size) == 0 ? reinterpret_cast<uintptr_t>(addr) : 0;
        pthread_attr_destroy(&attr);
        return result;
    }();
    return low;
}

uintptr_t frame() { return reinterpret_cast<uintptr_t>(__builtin_frame_address(0)); }

[[noreturn]] void exceeded(const char* what, const char* field, uint64_t limit) {
    fail(ErrorKind::RUNTIME, std::string("template budget exceeded: ") + what + " (TemplateLimits::" + field + " = " +
                                 std::to_string(limit) + ")");
}

}  // namespace

// Sanitizer builds (TINYLLM_SANITIZED, set by CMake) have frames several times larger; the limit means
// the same depth there.
#ifdef TINYLLM_SANITIZED
constexpr size_t STACK_SCALE = 4;
#else
constexpr size_t STACK_SCALE = 1;
#endif

Budget::Budget(const TemplateLimits& limits) : limits_(limits), previous_(g_current) {
    stack_base_ = frame();
    stack_allowed_ = limits_.max_stack_bytes * STACK_SCALE;
    constexpr size_t MARGIN = 256 * 1024;  // for the frames below the last check (libc, allocation, unwinding)
    if (uintptr_t low = stack_low(); low && low < stack_base_) {
        size_t available = stack_base_ - low;
        stack_allowed_ = std::min(stack_allowed_, available > MARGIN ? available - MARGIN : 0);
    }
    g_current = this;
}

Budget::~Budget() { g_current = previous_; }

Budget* Budget::current() { return g_current; }

void Budget::step(uint64_t n) {
    steps_ += n;
    if (steps_ > limits_.max_steps) exceeded("too many steps", "max_steps", limits_.max_steps);
    if (tok::CancelScope::should_stop(n)) fail(ErrorKind::RUNTIME, "render stopped: the caller cancelled it");
}

void Budget::output(size_t bytes) {
    output_ += bytes;
    if (output_ > limits_.max_output_bytes) exceeded("output too large", "max_output_bytes", limits_.max_output_bytes);
}

void Budget::allocate(size_t bytes) {
    allocated_ += bytes;
    if (allocated_ > limits_.max_alloc_bytes) exceeded("too much memory allocated", "max_alloc_bytes", limits_.max_alloc_bytes);
}

void Budget::reserve(size_t bytes) {
    if (allocated_ + bytes > limits_.max_alloc_bytes)
        exceeded("too much memory allocated", "max_alloc_bytes", limits_.max_alloc_bytes);
}

void Budget::check_stack() {
    uintptr_t here = frame();
    if (here < stack_base_ && stack_base_ - here > stack_allowed_)
        exceeded("native stack too deep", "max_stack_bytes", limits_.max_stack_bytes);
}

}  // namespace jinja
