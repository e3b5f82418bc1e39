// The CPU device: 64-byte aligned host memory, external buffers wrapped in place, kernels from the LLVM
// JIT, and a thread pool that splits each kernel's outer loop (or a custom kernel's work items).
#include "devices/cpu/cpu_impl.h"
#include "devices/cpu/thread_pool.h"
#include "devices/env.h"

#include <cstdlib>
#include <cstring>

namespace devices::cpu {

namespace {

// x86-64 entry point of a generated kernel (see KernelSource).
using KernelFn = void (*)(void** buffers, const int64_t* vars, int64_t begin, int64_t end);

struct CpuProgram : Program {
    KernelFn fn = nullptr;
};

struct KernelCall {
    KernelFn fn;
    void** buffers;
    const int64_t* vars;
};

void run_kernel_chunk(const void* ctx, int64_t begin, int64_t end) {
    auto c = static_cast<const KernelCall*>(ctx);
    c->fn(c->buffers, c->vars, begin, end);
}

class CpuDevice final : public Device {
public:
    CpuDevice() : pool_(env::threads()) {}
    const std::string& name() const override { return name_; }
    Target target() const override { return {Arch::X86_64, ""}; }
    int n_threads() const override { return pool_.size(); }

    Memory alloc(size_t bytes) override {
        size_t rounded = (bytes + 63) / 64 * 64;
        if (rounded == 0) rounded = 64;
        void* p = std::aligned_alloc(64, rounded);
        if (!p) throw Error("[devices] CPU: out of memory allocating " + std::to_string(bytes) + " bytes");
        std::memset(p, 0, rounded);
        return Memory{reinterpret_cast<uint64_t>(p), p, bytes, false};
    }
    void free(Memory& m) override {
        if (!m.external) std::free(m.host);
        m = Memory{};
    }
    Memory wrap(const void* host, size_t bytes) override {
        void* p = const_cast<void*>(host);  // kernels never write external buffers (the engine checks)
        return Memory{reinterpret_cast<uint64_t>(p), p, bytes, true};
    }
    void copy_in(const Memory& dst, size_t offset, const void* src, size_t bytes) override {
        check_range(dst, offset, bytes, "copy_in");
        std::memcpy(static_cast<char*>(dst.host) + offset, src, bytes);
    }
    void copy_out(void* dst, const Memory& src, size_t offset, size_t bytes) override {
        check_range(src, offset, bytes, "copy_out");
        std::memcpy(dst, static_cast<const char*>(src.host) + offset, bytes);
    }

    std::shared_ptr<Program> compile(const KernelSource& src) override {
        auto p = std::make_shared<CpuProgram>();
        p->fn = reinterpret_cast<KernelFn>(jit_.compile(src.llvm_ir, src.name));
        return p;
    }
    void launch(const Program& program, const LaunchArgs& a) override {
        constexpr int MAX_BUFFERS = 64;
        if (a.n_buffers > MAX_BUFFERS) throw Error("[devices] CPU: too many kernel buffers");
        void* ptrs[MAX_BUFFERS];
        for (int i = 0; i < a.n_buffers; i++) ptrs[i] = a.buffers[i]->host;
        KernelCall call{static_cast<const CpuProgram&>(program).fn, ptrs, a.vars};
        if (a.parallel) pool_.run(run_kernel_chunk, &call, a.global_size, 1);
        else if (a.global_size > 0) call.fn(ptrs, a.vars, 0, a.global_size);
    }
    void run_host(HostFn fn, const void* ctx, int64_t n_work, int64_t grain) override {
        pool_.run(fn, ctx, n_work, grain);
    }
    void synchronize() override {}

private:
    static void check_range(const Memory& m, size_t offset, size_t bytes, const char* what) {
        if (offset > m.size || bytes > m.size - offset)
            throw Error(std::string("[devices] CPU: ") + what + " of " + std::to_string(bytes) + " bytes at offset " +
                        std::to_string(offset) + " exceeds a " + std::to_string(m.size) + "-byte buffer");
    }

    std::string name_ = "CPU";
    ThreadPool pool_;
    LlvmJit jit_;
};

}  // namespace

std::unique_ptr<Device> make_device() { return std::make_unique<CpuDevice>(); }

}  // namespace devices::cpu
