// "AMD" for the engine: devices::Device over AmdDevice. Memory handles are GPU virtual addresses (the CPU
// maps the same memory: large-BAR VRAM or GTT); generated kernels become code objects compiled in process;
// hand kernels are kernels_amd's embedded code objects. On the fake /dev/kfd every kernel gets a host twin:
// generated kernels the same IR JIT-compiled for the host, hand kernels the kernels_amd emulator.
#include "devices/amd/amdgcn_compiler.h"
#include "devices/amd/engine_impl.h"
#include "devices/amd/ops_impl.h"
#include "devices/cpu/cpu_impl.h"
#include "devices/env.h"
#include "kernels_amd/kernels_amd.h"

#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>

namespace amd {

namespace {

namespace ka = tinyllm::amd;

// Work-items per workgroup of generated kernels (devices/device.h: ceil(global / 256) workgroups of 256).
constexpr uint32_t GENERATED_WORKGROUP = 256;

struct GeneratedProgram : devices::Program {
    const Kernel* kernel = nullptr;
};

class EngineDevice final : public OpsDevice {
public:
    EngineDevice(std::unique_ptr<TwinKfdIO> twins, KfdIO& io) : twins_(std::move(twins)) {
        try {
            gpu_ = AmdDevice::open(0, io);
        } catch (const NoDevice& e) {
            std::string why = e.what();
            if (why.rfind("[amd] ", 0) == 0) why = why.substr(6);
            throw devices::Error("[devices] AMD: " + why);
        }
        target_ = gpu_->info().target;
        hand_target_ = ka::target_from_name(target_);
    }

    const std::string& name() const override { return name_; }
    devices::Target target() const override { return {devices::Arch::AMDGCN, target_}; }

    devices::Memory alloc(size_t bytes) override {
        Buffer b = gpu_->alloc(bytes ? bytes : 1);
        std::memset(b.host, 0, b.size);  // a fresh allocation: no kernel can be using it yet
        gpu_->flush_host_writes();
        buffers_[b.va] = b;
        return devices::Memory{b.va, b.host, bytes, false};
    }
    void free(devices::Memory& m) override {
        if (!m.external && m.handle) {
            gpu_->free(buffer(m.handle, "free"));
            buffers_.erase(m.handle);
        }
        m = devices::Memory{};
    }
    void copy_in(const devices::Memory& dst, size_t offset, const void* src, size_t bytes) override {
        check_range(dst, offset, bytes, "copy_in");
        gpu_->copy_in(buffer(dst.handle, "copy_in"), src, bytes, offset);
    }
    void copy_out(void* dst, const devices::Memory& src, size_t offset, size_t bytes) override {
        check_range(src, offset, bytes, "copy_out");
        gpu_->copy_out(dst, buffer(src.handle, "copy_out"), bytes, offset);
    }

    std::shared_ptr<devices::Program> compile(const devices::KernelSource& src) override {
        std::vector<uint8_t> code = compile_code_object(src.llvm_ir, target_, src.name);
        const Program& program = gpu_->load_program(code, src.name);
        auto p = std::make_shared<GeneratedProgram>();
        p->kernel = &program.kernel(src.name);
        if (twins_) add_generated_twin(src, *p->kernel);
        return p;
    }

    // Arguments as the amdgpu_kernel declares them: the buffers, the vars (i64), the global size (i64).
    void launch(const devices::Program& program, const devices::LaunchArgs& a) override {
        const Kernel& k = *static_cast<const GeneratedProgram&>(program).kernel;
        if (a.global_size <= 0) return;
        std::vector<KernelArg> args;
        for (int i = 0; i < a.n_buffers; i++) {
            buffer(a.buffers[i]->handle, ("kernel '" + k.info.name + "' argument " + std::to_string(i)).c_str());
            args.push_back(KernelArg::pointer(a.buffers[i]->handle));
        }
        for (int i = 0; i < a.n_vars; i++) args.push_back(KernelArg::value<int64_t>(a.vars[i]));
        args.push_back(KernelArg::value<int64_t>(a.global_size));
        uint64_t groups = (uint64_t(a.global_size) + GENERATED_WORKGROUP - 1) / GENERATED_WORKGROUP;
        if (groups > UINT32_MAX / GENERATED_WORKGROUP) fail("kernel '" + k.info.name + "': grid of " + std::to_string(a.global_size) + " work-items");
        gpu_->launch(k, {uint32_t(groups)}, {GENERATED_WORKGROUP}, args);
    }

    void launch_hand_kernel(const std::string& kernel, std::span<const uint8_t> kernarg) override {
        if (!hand_target_) fail("no hand-written kernels for " + target_);
        ka::LaunchDims d = ka::launch_dims(kernel, kernarg, *hand_target_);  // validates the arguments
        for (const ka::BufferUse& use : ka::buffers(kernel, kernarg)) {  // every pointer is memory of this GPU
            uint64_t va;
            std::memcpy(&va, kernarg.data() + use.kernarg_offset, 8);
            check_span(va, use.bytes, "kernel '" + kernel + "' buffer '" + use.name + "'");
        }
        const Program& program = hand_program(std::string(ka::kernel_info(kernel).source));
        gpu_->launch_packed(program.kernel(kernel), {d.grid.x / d.block.x, d.grid.y / d.block.y, d.grid.z / d.block.z},
                            {d.block.x, d.block.y, d.block.z}, kernarg);
    }

    // Host code reads and writes GPU memory through the CPU mapping, once the queue is idle.
    void run_host(devices::HostFn fn, const void* ctx, int64_t n_work, int64_t grain) override {
        gpu_->synchronize();
        devices::get("CPU").run_host(fn, ctx, n_work, grain);
        gpu_->flush_host_writes();
    }

    void synchronize() override { gpu_->synchronize(); }

    uint64_t scratch(size_t bytes) override { return grown(scratch_, bytes).va; }
    uint64_t converted(uint64_t va, size_t bytes, size_t out_bytes, void (*convert)(const void*, size_t, void*)) override {
        check_span(va, bytes, "converted weight");
        gpu_->synchronize();  // the last launch that read the conversion is done, and va is written
        const Buffer& out = grown(converted_, out_bytes);
        convert(host_address(va), bytes, out.host);
        gpu_->flush_host_writes();
        return out.va;
    }
    void* host_address(uint64_t va) override {
        auto it = buffers_.upper_bound(va);
        if (it == buffers_.begin() || va - std::prev(it)->second.va > std::prev(it)->second.size)
            fail("address " + std::to_string(va) + " is not memory of this GPU");
        const Buffer& b = std::prev(it)->second;
        return static_cast<uint8_t*>(b.host) + (va - b.va);
    }
    void flush_host_writes() override { gpu_->flush_host_writes(); }

private:
    // `b`, reallocated when smaller than `bytes` (once the queue is idle: kernels may still read it).
    const Buffer& grown(Buffer& b, size_t bytes) {
        if (b.size >= bytes && b.va) return b;
        gpu_->synchronize();
        if (b.va) {
            buffers_.erase(b.va);
            gpu_->free(b);
        }
        b = gpu_->alloc(std::max<size_t>(bytes, 4096));
        buffers_[b.va] = b;
        return b;
    }

    [[noreturn]] void fail(const std::string& what) const { throw devices::Error("[devices] AMD: " + what); }

    const Buffer& buffer(uint64_t handle, const char* what) const {
        auto it = buffers_.find(handle);
        if (it == buffers_.end()) fail(std::string(what) + ": not memory of this GPU (a tensor on another device?)");
        return it->second;
    }
    // [va, va + bytes) lies inside one of our buffers.
    void check_span(uint64_t va, uint64_t bytes, const std::string& what) const {
        auto it = buffers_.upper_bound(va);
        if (it != buffers_.begin()) {
            const Buffer& b = std::prev(it)->second;
            if (va - b.va <= b.size && bytes <= b.size - (va - b.va)) return;
        }
        fail(what + ": " + std::to_string(bytes) + " bytes are not memory of this GPU (a tensor on another device?)");
    }
    void check_range(const devices::Memory& m, size_t offset, size_t bytes, const char* what) const {
        if (offset > m.size || bytes > m.size - offset)
            fail(std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) + " exceeds a " +
                 std::to_string(m.size) + "-byte buffer");
    }

    // kernels_amd's code object holding `source`'s kernels, loaded once.
    const Program& hand_program(const std::string& source) {
        auto it = hand_programs_.find(source);
        if (it != hand_programs_.end()) return *it->second;
        std::string first;
        for (const ka::KernelInfo& k : ka::kernels())
            if (k.source == source && first.empty()) first = std::string(k.name);
        const Program& p = gpu_->load_program(ka::code_object(first, *hand_target_), "kernels_amd/" + source);
        if (twins_) add_emulated_twins(source);
        return *(hand_programs_[source] = &p);
    }

    // The fake GPU runs a hand kernel on the kernels_amd emulator; every buffer is resolved through GPU
    // memory over its whole extent, so a short or unmapped buffer is a GPU fault.
    void add_emulated_twins(const std::string& source) {
        ka::Target target = *hand_target_;
        for (const ka::KernelInfo& k : ka::kernels()) {
            if (k.source != source) continue;
            std::string name(k.name);
            twins_->add_twin(name, [name, target](const Dispatch& d, GpuMemory& mem) {
                ka::emulate(name, target, {d.grid[0], d.grid[1], d.grid[2]}, {d.workgroup[0], d.workgroup[1], d.workgroup[2]}, d.kernarg,
                            [&mem](uint64_t va, uint64_t bytes, bool) -> void* { return mem.resolve(va, bytes); });
            });
        }
    }

    // The fake GPU runs a generated kernel as the same IR compiled for the host, reading the same kernarg
    // bytes (it has checked that every pointer argument is GPU memory).
    void add_generated_twin(const devices::KernelSource& src, const Kernel& k) {
        std::vector<uint32_t> offsets;
        for (const KernelArgInfo& a : k.info.args)
            if (!a.hidden()) offsets.push_back(a.offset);
        std::string ir = host_twin_ir(src.llvm_ir, src.name, offsets);
        auto fn = reinterpret_cast<TwinFn>(host_jit().compile(ir, src.name + ".twin"));
        std::string name = src.name;
        twins_->add_twin(name, [fn, name](const Dispatch& d, GpuMemory&) {
            if (d.dims != 1 || d.workgroup[0] == 0 || d.grid[0] % d.workgroup[0])
                throw Error("[fake-kfd] generated kernel '" + name + "' dispatched with a grid that is not whole 1-D workgroups");
            devices::cpu::call_jit(fn, d.kernarg.data(), int64_t(0), int64_t(d.grid[0] / d.workgroup[0]), int64_t(d.workgroup[0]));
        });
    }
    devices::cpu::LlvmJit& host_jit() {
        if (!jit_) jit_ = std::make_unique<devices::cpu::LlvmJit>();
        return *jit_;
    }

    std::string name_ = "AMD";
    std::unique_ptr<TwinKfdIO> twins_;  // a GPU that runs host twins; declared before gpu_: the GPU is closed first
    std::unique_ptr<AmdDevice> gpu_;
    std::string target_;
    std::optional<ka::Target> hand_target_;
    std::map<uint64_t, Buffer> buffers_;  // by GPU address
    Buffer scratch_, converted_;          // the ops' (OpsDevice::scratch, converted)
    std::map<std::string, const Program*> hand_programs_;
    std::unique_ptr<devices::cpu::LlvmJit> jit_;
};

std::atomic<FakeEngineFactory> g_fake_factory{nullptr};

}  // namespace

void set_fake_engine_factory(FakeEngineFactory factory) { g_fake_factory = factory; }

std::unique_ptr<devices::Device> make_twin_engine_device(std::unique_ptr<TwinKfdIO> io) {
    TwinKfdIO& kfd = *io;
    return std::make_unique<EngineDevice>(std::move(io), kfd);
}

std::unique_ptr<devices::Device> make_engine_device() {
    const std::string& fake = devices::env::fake_kfd();
    if (!fake.empty() && fake != "0") {
        std::string target = fake == "1" ? "gfx1100" : fake;
        FakeEngineFactory factory = g_fake_factory.load();
        if (!factory)
            throw devices::Error("[devices] AMD: TINYLLM_FAKE_KFD is set, but this binary has no fake /dev/kfd (a test-only "
                                 "switch: tinyllm_fake_gpu and the test binaries have it)");
        std::fprintf(stderr, "[devices] AMD: TINYLLM_FAKE_KFD is set: a fake /dev/kfd with an emulated %s (tests only)\n", target.c_str());
        return factory(target);
    }
    return std::make_unique<EngineDevice>(nullptr, system_kfd_io());
}

}  // namespace amd
