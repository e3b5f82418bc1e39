// Fiber switching and guarded fiber stacks for the SIMT emulator (see fiber_impl.h).
#include "kernels_amd/emu/fiber_impl.h"

#include "kernels_amd/kernels_amd.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#if defined(__SANITIZE_ADDRESS__)
#define TINYLLM_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TINYLLM_FIBER_ASAN 1
#endif
#endif
#if defined(TINYLLM_FIBER_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(TINYLLM_FIBER_ASM)
// tinyllm_fiber_switch(void** save_sp, void* load_sp): pushes the System V callee-saved registers and the
// SSE/x87 control words, stores rsp, loads the other stack and pops its registers. A new fiber's stack is
// prepared so that the final `ret` lands in tinyllm_fiber_start with entry in r12 and its argument in r13.
asm(R"(
    .text
    .globl tinyllm_fiber_switch
    .hidden tinyllm_fiber_switch
    .type tinyllm_fiber_switch, @function
tinyllm_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size tinyllm_fiber_switch, .-tinyllm_fiber_switch

    .globl tinyllm_fiber_start
    .hidden tinyllm_fiber_start
    .type tinyllm_fiber_start, @function
tinyllm_fiber_start:
    movq %r13, %rdi
    callq *%r12
    ud2
    .size tinyllm_fiber_start, .-tinyllm_fiber_start
)");
extern "C" void tinyllm_fiber_switch(void** save_sp, void* load_sp);
extern "C" void tinyllm_fiber_start();
#endif

namespace tinyllm::amd::emu {

#if !defined(TINYLLM_FIBER_ASM)
static void ucontext_start(unsigned lo, unsigned hi) {
    auto* fiber = reinterpret_cast<Fiber*>((static_cast<uintptr_t>(hi) << 32) | lo);
    fiber->entry(fiber->arg);
}
#endif

void fiber_init(Fiber& fiber, void* stack, size_t size, void (*entry)(void*), void* arg) {
    fiber.stack_bottom = stack;
    fiber.stack_size = size;
    fiber.asan_fake_stack = nullptr;
#if defined(TINYLLM_FIBER_ASAN)
    // A reused stack still carries the redzones of frames that never returned (finished or abandoned lanes).
    ASAN_UNPOISON_MEMORY_REGION(stack, size);
#endif
#if defined(TINYLLM_FIBER_ASM)
    auto top = reinterpret_cast<uintptr_t>(static_cast<uint8_t*>(stack) + size) & ~uintptr_t{15};
    // From the saved sp upwards: control words, r15, r14, r13, r12, rbx, rbp, return address. After the
    // `ret`, rsp = sp + 64 must be 16-byte aligned, as at a call site.
    auto* frame = reinterpret_cast<uint64_t*>(top - 80);
    uint32_t control[2] = {0x1F80, 0x037F};  // MXCSR and x87 control word at their reset values
    std::memcpy(&frame[0], control, sizeof(control));
    frame[1] = frame[2] = 0;                                  // r15, r14
    frame[3] = reinterpret_cast<uint64_t>(arg);               // r13
    frame[4] = reinterpret_cast<uint64_t>(entry);             // r12
    frame[5] = frame[6] = 0;                                  // rbx, rbp
    frame[7] = reinterpret_cast<uint64_t>(&tinyllm_fiber_start);
    fiber.sp = frame;
#else
    getcontext(&fiber.context);
    fiber.context.uc_stack.ss_sp = stack;
    fiber.context.uc_stack.ss_size = size;
    fiber.context.uc_link = nullptr;
    fiber.entry = entry;
    fiber.arg = arg;
    // makecontext passes int arguments: the Fiber's address in two halves.
    auto bits = reinterpret_cast<uintptr_t>(&fiber);
    makecontext(&fiber.context, reinterpret_cast<void (*)()>(&ucontext_start), 2, static_cast<unsigned>(bits),
                static_cast<unsigned>(bits >> 32));
#endif
}

void fiber_switch(Fiber& from, Fiber& to, bool from_finished) {
#if defined(TINYLLM_FIBER_ASAN)
    __sanitizer_start_switch_fiber(from_finished ? nullptr : &from.asan_fake_stack, to.stack_bottom, to.stack_size);
#else
    (void)from_finished;
#endif
#if defined(TINYLLM_FIBER_ASM)
    tinyllm_fiber_switch(&from.sp, to.sp);
#else
    swapcontext(&from.context, &to.context);
#endif
#if defined(TINYLLM_FIBER_ASAN)
    __sanitizer_finish_switch_fiber(from.asan_fake_stack, nullptr, nullptr);
#endif
}

void fiber_started(Fiber& scheduler) {
#if defined(TINYLLM_FIBER_ASAN)
    // The scheduler runs on the thread's own stack, whose extent ASan reports here.
    __sanitizer_finish_switch_fiber(nullptr, &scheduler.stack_bottom, &scheduler.stack_size);
#else
    (void)scheduler;
#endif
}

FiberStacks::~FiberStacks() {
    if (base_) munmap(base_, count_ * stride_);
}

void FiberStacks::reserve(size_t count) {
    if (count <= count_) return;
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    stride_ = STACK_BYTES + page_;
    void* p = mmap(nullptr, count * stride_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        throw KernelError("[kernels_amd] emulator: cannot map " + std::to_string(count) + " fiber stacks");
    for (size_t i = 0; i < count; i++) mprotect(static_cast<uint8_t*>(p) + i * stride_, page_, PROT_NONE);
    if (base_) munmap(base_, count_ * stride_);
    base_ = static_cast<uint8_t*>(p);
    count_ = count;
}

}  // namespace tinyllm::amd::emu
