// Targets, the embedded code objects, and emulate(): validate a dispatch like the GPU would receive it,
// resolve every buffer through the caller's memory map, and run the kernel's emulated twin.
#include "kernels_amd/code_objects_impl.h"
#include "kernels_amd/emu/emulator_impl.h"
#include "kernels_amd/kernels_amd.h"

#include <cstring>
#include <vector>

namespace tinyllm::amd {

std::string_view target_name(Target t) {
    switch (t) {
    case Target::GFX1100: return "gfx1100";
    case Target::GFX1201: return "gfx1201";
    case Target::GFX90A: return "gfx90a";
    case Target::GFX942: return "gfx942";
    }
    return "?";
}

std::optional<Target> target_from_name(std::string_view name) {
    for (Target t : ALL_TARGETS)
        if (target_name(t) == name) return t;
    return std::nullopt;
}

uint32_t wave_size(Target t) { return t == Target::GFX1100 || t == Target::GFX1201 ? 32 : 64; }

bool have_code_objects() { return detail::embedded_code_object_count > 0; }

std::span<const uint8_t> code_object(std::string_view kernel, Target target) {
    const KernelInfo& info = kernel_info(kernel);
    for (size_t i = 0; i < detail::embedded_code_object_count; i++) {
        const auto& co = detail::embedded_code_objects[i];
        if (info.source == co.source && target_name(target) == co.target) return {co.begin, co.end};
    }
    throw KernelError("[kernels_amd] " + std::string(kernel) + ": no " + std::string(target_name(target)) +
                      " code object (built without TINYLLM_AMD / clang-19?)");
}

namespace {
std::string dims_text(Dim3 d) { return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")"; }
}  // namespace

void emulate(std::string_view kernel, Target target, Dim3 grid, Dim3 block, std::span<const uint8_t> kernarg,
             const MemoryResolver& resolve) {
    const KernelInfo& info = kernel_info(kernel);
    std::string what = "[kernels_amd] emulate " + std::string(kernel) + " on " + std::string(target_name(target));
    LaunchDims expected = launch_dims(kernel, kernarg, target);
    if (grid != expected.grid || block != expected.block)
        throw KernelError(what + ": dispatched grid " + dims_text(grid) + " block " + dims_text(block) + ", the kernel needs grid " +
                          dims_text(expected.grid) + " block " + dims_text(expected.block));
    alignas(16) uint8_t args[256];
    std::memcpy(args, kernarg.data(), info.kernarg_size);
    for (const BufferUse& b : buffers(kernel, kernarg)) {
        uint64_t address;
        std::memcpy(&address, args + b.kernarg_offset, 8);
        if (address % 4) throw KernelError(what + ": buffer '" + b.name + "' address is not 4-byte aligned");
        void* host = resolve(address, b.bytes, b.written);
        if (!host) throw KernelError(what + ": buffer '" + b.name + "' is not mapped");
        std::memcpy(args + b.kernarg_offset, &host, 8);
    }
    emu::EmuKernelFn fn = emu::find_twin(kernel, target);
    if (!fn) throw KernelError(what + ": no emulated twin");
    emu::run_grid(what, fn, args, target, grid, block);
}

namespace emu {
EmuKernelFn find_twin(std::string_view kernel_name, Target target) {
    std::span<const TwinEntry> list = target == Target::GFX1100   ? twins_gfx1100()
                                       : target == Target::GFX1201 ? twins_gfx1201()
                                       : target == Target::GFX90A  ? twins_gfx90a()
                                                                   : twins_gfx942();
    for (const TwinEntry& t : list)
        if (kernel_name == t.name) return t.fn;
    return nullptr;
}
}  // namespace emu

}  // namespace tinyllm::amd
