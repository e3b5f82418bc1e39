// Stackful fibers for the SIMT emulator: each work-item runs on its own stack and switches back to the
// scheduler at every cross-lane op and barrier. A hand-written register switch on x86-64 (no syscall per
// switch, unlike swapcontext), ucontext elsewhere; AddressSanitizer is told about every stack switch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

// The hand-written switch is x86-64 only; -DTINYLLM_FIBER_UCONTEXT selects the portable path anywhere.
#if defined(__x86_64__) && !defined(TINYLLM_FIBER_UCONTEXT)
#define TINYLLM_FIBER_ASM 1
#else
#include <ucontext.h>
#endif

namespace tinyllm::amd::emu {

struct Fiber {
#if defined(TINYLLM_FIBER_ASM)
    void* sp = nullptr;  // saved stack pointer; the callee-saved registers sit on that stack
#else
    ucontext_t context{};
    void (*entry)(void*) = nullptr;  // what the ucontext trampoline starts
    void* arg = nullptr;
#endif
    const void* stack_bottom = nullptr;  // lowest address of the stack (unknown for a thread's own stack)
    size_t stack_size = 0;
    void* asan_fake_stack = nullptr;
};

// Prepares `fiber` to run entry(arg) on [stack, stack + size) at its first switch. entry must never return:
// it ends by switching away with fiber_switch(..., /*from_finished=*/true).
void fiber_init(Fiber& fiber, void* stack, size_t size, void (*entry)(void*), void* arg);
// Saves the running context into `from` and continues `to`; returns when something switches back to `from`.
void fiber_switch(Fiber& from, Fiber& to, bool from_finished = false);
// Called first thing in a fiber's entry: completes the switch that started it.
void fiber_started(Fiber& scheduler);

// Guarded stacks (one guard page below each), reserved lazily and reused by every dispatch on a thread.
class FiberStacks {
public:
    static constexpr size_t STACK_BYTES = 64 * 1024;
    FiberStacks() = default;
    FiberStacks(const FiberStacks&) = delete;
    FiberStacks& operator=(const FiberStacks&) = delete;
    ~FiberStacks();
    void reserve(size_t count);  // throws KernelError when the memory cannot be mapped
    void* stack(size_t i) const { return base_ + i * stride_ + page_; }

private:
    uint8_t* base_ = nullptr;
    size_t count_ = 0, stride_ = 0, page_ = 0;
};

}  // namespace tinyllm::amd::emu
