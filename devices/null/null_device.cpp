// The NULL device: compiles every kernel for an AMD target and never runs one. Memory is host memory so
// graphs can be built and scheduled; launches are no-ops. CI uses it to check generated code.
#include "devices/cpu/cpu_impl.h"
#include "devices/env.h"
#include "devices/null/null_impl.h"

#include <cstdlib>
#include <cstring>

namespace devices::null {

namespace {

class NullDevice final : public Device {
public:
    const std::string& name() const override { return name_; }
    // An AMD target (TINYLLM_NULL_TARGET, default gfx1100): CI checks the generated amdgcn code.
    Target target() const override { return {Arch::AMDGCN, env::null_target()}; }
    Memory alloc(size_t bytes) override {
        size_t rounded = (bytes + 63) / 64 * 64;
        void* p = std::aligned_alloc(64, rounded ? rounded : 64);
        if (!p) throw Error("[devices] NULL: out of memory");
        std::memset(p, 0, rounded ? rounded : 64);
        return Memory{reinterpret_cast<uint64_t>(p), p, bytes, false};
    }
    void free(Memory& m) override {
        if (!m.external) std::free(m.host);
        m = Memory{};
    }
    void copy_in(const Memory& dst, size_t offset, const void* src, size_t bytes) override {
        if (offset + bytes > dst.size) throw Error("[devices] NULL: copy_in past the end of a buffer");
        std::memcpy(static_cast<char*>(dst.host) + offset, src, bytes);
    }
    void copy_out(void* dst, const Memory& src, size_t offset, size_t bytes) override {
        if (offset + bytes > src.size) throw Error("[devices] NULL: copy_out past the end of a buffer");
        std::memcpy(dst, static_cast<const char*>(src.host) + offset, bytes);
    }
    std::shared_ptr<Program> compile(const KernelSource& src) override {
        cpu::compile_to_object(src.llvm_ir, target());  // throws on any LLVM error
        return std::make_shared<Program>();
    }
    void launch(const Program&, const LaunchArgs&) override {}
    void run_host(HostFn, const void*, int64_t, int64_t) override {}
    void launch_hand_kernel(const std::string&, std::span<const uint8_t>) override {}
    void synchronize() override {}

private:
    std::string name_ = "NULL";
};

}  // namespace

std::unique_ptr<Device> make_device() { return std::make_unique<NullDevice>(); }

}  // namespace devices::null
