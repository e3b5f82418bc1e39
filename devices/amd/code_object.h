// Code objects as they lie in GPU memory: the loaded image the loader (device.cpp) builds and the fake GPU
// (fake_gpu.cpp) reads, and the kernel descriptor. parse_code_object (amd.h) reads the ELF file itself.
#pragma once

#include "devices/amd/amd.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace amd {

// The image to copy to GPU memory at `base`: PT_LOAD segments at their addresses, bss zeroed, dynamic
// relocations (R_AMDGPU_RELATIVE64, R_AMDGPU_ABS64) applied for that base.
std::vector<uint8_t> build_image(std::span<const uint8_t> elf, uint64_t base, const std::string& where);

// Parses a code object as it lies in GPU memory (what build_image produced): only what is loaded is
// visible (program headers, notes, dynamic symbols), as for a GPU looking at a kernel object.
CodeObject parse_loaded_image(std::span<const uint8_t> image, const std::string& where);

// The kernel descriptor (llvm::amdhsa::kernel_descriptor_t), 64 bytes at <kernel>.kd.
struct KernelDescriptor {
    uint32_t group_segment_fixed_size;
    uint32_t private_segment_fixed_size;
    uint32_t kernarg_size;
    uint8_t reserved0[4];
    int64_t kernel_code_entry_byte_offset;
    uint8_t reserved1[20];
    uint32_t compute_pgm_rsrc3;
    uint32_t compute_pgm_rsrc1;
    uint32_t compute_pgm_rsrc2;
    uint16_t kernel_code_properties;
    uint16_t kernarg_preload;
    uint8_t reserved3[4];
};
static_assert(sizeof(KernelDescriptor) == 64, "kernel descriptor is 64 bytes");
constexpr uint16_t KD_ENABLE_WAVEFRONT_SIZE32 = 1 << 10;  // kernel_code_properties bit 10

}  // namespace amd
