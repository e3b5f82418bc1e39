// Hand-written AMD kernels: the code objects built for each target (embedded), their argument layouts
// (kernargs.h), launch shapes and buffer extents, and a host emulation entry point so a fake GPU can
// execute a dispatch. The kernels themselves are freestanding .hip files in kernels_amd/hip/.
#pragma once

#include "gguf/blocks.h"
#include "gguf/types.h"
#include "kernels_amd/kernargs.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tinyllm::amd {

// Errors carry their location first: "[kernels_amd] gemv_q4_k_q8: n_in 100 is not a multiple of 256".
struct KernelError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class Target { GFX1100, GFX1201, GFX90A, GFX942 };
inline constexpr Target ALL_TARGETS[] = {Target::GFX1100, Target::GFX1201, Target::GFX90A, Target::GFX942};
std::string_view target_name(Target t);                        // "gfx1100"
std::optional<Target> target_from_name(std::string_view name);  // "gfx1100" -> GFX1100
uint32_t wave_size(Target t);                                  // 32 on gfx11/12, 64 on CDNA

struct Dim3 {
    uint32_t x = 1, y = 1, z = 1;
    bool operator==(const Dim3&) const = default;
};
// AQL convention: grid in work-items (a multiple of block in every dimension), block = work-group size.
struct LaunchDims {
    Dim3 grid;
    Dim3 block;
};

// A global-memory pointer in a kernarg struct and how many bytes from it the kernel may touch.
struct BufferUse {
    const char* name;         // the kernarg field
    uint32_t kernarg_offset;  // where the 64-bit address sits in the kernarg segment
    uint64_t bytes;
    bool written;
};

struct KernelInfo {
    std::string_view name;    // code-object symbol; its descriptor is name + ".kd"
    std::string_view source;  // kernels_amd/hip/<source>.hip
    uint32_t kernarg_size;    // sizeof the kernarg struct = the descriptor's kernarg size
    uint32_t waves;           // waves per work-group
};

const std::vector<KernelInfo>& kernels();
const KernelInfo& kernel_info(std::string_view name);  // throws KernelError for an unknown name

// Checks the kernarg values (shapes, divisibility); throws KernelError naming the kernel and the field.
void validate(std::string_view kernel, std::span<const uint8_t> kernarg);
LaunchDims launch_dims(std::string_view kernel, std::span<const uint8_t> kernarg, Target target);
std::vector<BufferUse> buffers(std::string_view kernel, std::span<const uint8_t> kernarg);

// The ELF code object (for `target`) that defines `kernel` (symbol `kernel`, descriptor `kernel.kd`).
// Throws KernelError if the library was built without TINYLLM_AMD (no clang-19).
// Dispatching one on a GPU: the kernarg segment is exactly the Args struct (no hidden arguments; the
// descriptor's kernarg size is sizeof(Args)); the AQL packet's workgroup and grid sizes must be
// launch_dims() (work-group size is pinned in the descriptor); LDS and scratch sizes come from the
// descriptor (scratch is always 0); kernels read the dispatch packet through the dispatch-ptr SGPR.
std::span<const uint8_t> code_object(std::string_view kernel, Target target);
bool have_code_objects();

// Executes one dispatch of `kernel` on the host SIMT emulator with `target`'s wave size and lane
// semantics. Each pointer in the kernarg is passed through `resolve(address, bytes, written)`, which
// returns the host memory behind it or throws (a fake GPU checks the range is mapped there).
using MemoryResolver = std::function<void*(uint64_t address, uint64_t bytes, bool written)>;
void emulate(std::string_view kernel, Target target, Dim3 grid, Dim3 block, std::span<const uint8_t> kernarg,
             const MemoryResolver& resolve);

template <class Args>
std::span<const uint8_t> kernarg_bytes(const Args& args) {
    return {reinterpret_cast<const uint8_t*>(&args), sizeof(Args)};
}

// Q6_K blocks are 210 bytes, so only every other block is 4-byte aligned; the kernels read 212-byte
// blocks (2 zero bytes appended) with aligned u32 loads. `src` holds whole blocks.
constexpr size_t Q6_K_BYTES = sizeof(gguf::block_q6_K), Q6_K_REPACKED_BYTES = Q6_K_BYTES + 2;
std::vector<uint8_t> repack_q6_k(std::span<const uint8_t> src);

// Kernel names by weight type; nullopt when there is none.
std::optional<std::string_view> gemv_kernel_for(gguf::Type weight_type);
std::optional<std::string_view> gemm_kernel_for(gguf::Type weight_type);
std::optional<std::string_view> attention_partial_kernel_for(uint32_t head_dim);

}  // namespace tinyllm::amd
