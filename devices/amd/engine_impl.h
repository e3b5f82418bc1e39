// The AMD GPU as the engine's devices::Device ("AMD"), and the compiler behind it: engine kernels (LLVM IR
// text) become linked amdgcn code objects in-process, and — for the fake /dev/kfd, which cannot run GPU
// machine code — host twins built from the same IR. Internal to devices/ (and its tests).
#pragma once

#include "devices/amd/amd.h"
#include "devices/device.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace amd {

// The registry's "AMD": GPU 0 through the real /dev/kfd; with TINYLLM_FAKE_KFD set (a test-only switch),
// a fake /dev/kfd whose emulated GPU has the target it names ("1" = gfx1100), in binaries that link the
// fakes (devices/amd/fake) and installed them. Throws devices::Error with the reason when there is no GPU.
std::unique_ptr<devices::Device> make_engine_device();
// The engine device on a GPU that runs host twins (the fake /dev/kfd), which it owns: every kernel it
// loads gets a twin (generated kernels their IR compiled for the host, hand kernels kernels_amd's emulator).
std::unique_ptr<devices::Device> make_twin_engine_device(std::unique_ptr<TwinKfdIO> io);
// What make_engine_device() calls when TINYLLM_FAKE_KFD names a target; set by amd::install_fake_kfd().
using FakeEngineFactory = std::unique_ptr<devices::Device> (*)(const std::string& target);
void set_fake_engine_factory(FakeEngineFactory factory);

// LLVM IR text -> a linked code object (ET_DYN) for `gfx`: O3 with the AMDGPU target machine, an object
// file from LLVM, then lld (in-process). `where` names the kernel in errors.
std::vector<uint8_t> compile_code_object(const std::string& ir, const std::string& gfx, const std::string& where);

// The host twin of amdgpu_kernel `kernel` in `ir`: the same IR retargeted to the host, with
//   void <kernel>.twin(const uint8_t* kernarg, i64 group_begin, i64 group_end, i64 block)
// running work-items 0..block-1 of workgroups [group_begin, group_end) in order. Explicit arguments are
// read from the kernarg segment at `arg_offsets` (the code object's metadata), so the twin takes exactly
// what the GPU would. Only work-item/workgroup x ids may be used; anything else amdgcn-specific throws.
std::string host_twin_ir(const std::string& ir, const std::string& kernel, std::span<const uint32_t> arg_offsets);
using TwinFn = void (*)(const uint8_t* kernarg, int64_t group_begin, int64_t group_end, int64_t block);

}  // namespace amd
