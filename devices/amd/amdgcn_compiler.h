// The compiler behind the engine's AMD device (amdgcn_compiler.cpp): engine kernels (LLVM IR text) become
// linked amdgcn code objects in-process, and — for the fake /dev/kfd, which cannot run GPU machine code —
// host twins built from the same IR.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace amd {

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
