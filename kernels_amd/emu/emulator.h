// The host SIMT emulator: what the host build of kernels_amd/hip/amd.h calls (ids, LDS, barrier,
// cross-lane ops), the exact per-wave semantics of those ops, the lane-mapping mutation hook, and running
// a grid of a kernel's emulated twin. One fiber per work-item; a wave's fibers meet at every cross-lane
// op, a work-group's at every barrier.
#pragma once

#include "kernels_amd/kernels_amd.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tinyllm::amd::emu {

// ---- called by kernel code running on a work-item fiber ----
uint32_t workitem_id(int dim);
uint32_t workgroup_id(int dim);
uint32_t workgroup_size(int dim);
void barrier(uint32_t site);
int32_t ds_swizzle(int32_t value, uint32_t pattern, uint32_t site);
int32_t ds_bpermute(int32_t byte_address, int32_t value, uint32_t site);
void* lds_alloc(size_t bytes, size_t align);

enum class MatrixOp : uint8_t {
    WMMA_GFX11,  // v_wmma_f32_16x16x16_f16, wave32, 16 halves of A and B per lane
    WMMA_GFX12,  // v_wmma_f32_16x16x16_f16 (gfx12 layout), wave32, 8 halves per lane
    MFMA_F16,    // v_mfma_f32_16x16x16f16, wave64, 4 halves per lane
};
// d = a * b + c for the whole wave; a, b, c, d point at this lane's registers.
void matrix_op(MatrixOp op, const _Float16* a, const _Float16* b, const float* c, float* d, uint32_t site);

// ---- per-lane pure ISA semantics ----
uint32_t perm_b32(uint32_t s0, uint32_t s1, uint32_t selector);  // v_perm_b32
int32_t sudot4(bool a_signed, uint32_t a, bool b_signed, uint32_t b, int32_t c);  // v_dot4_i32_iu8, clamp off
int32_t sdot4(uint32_t a, uint32_t b, int32_t c);  // v_dot4c_i32_i8, clamp off

// ---- whole-wave semantics (the scheduler gathers lane registers into these arrays) ----
// Inactive lanes (active[l] == false) are not written and read as 0 when they are a source.
void wave_swizzle(uint32_t pattern, const int32_t* in, const bool* active, int32_t* out, uint32_t wave_size);
void wave_bpermute(const int32_t* address, const int32_t* in, const bool* active, int32_t* out, uint32_t wave_size);
// a, b: wave_size * k_per_lane halves (lane-major); c, d: wave_size * acc_per_lane floats.
// Throws KernelError (without a location prefix) on malformed use, e.g. gfx11 lanes 16-31 not replicating 0-15.
void wave_matrix_op(MatrixOp op, const _Float16* a, const _Float16* b, const float* c, float* d);
int matrix_k_per_lane(MatrixOp op);
int matrix_acc_per_lane(MatrixOp op);
uint32_t matrix_wave_size(MatrixOp op);

// ---- test hook: deliberately wrong lane mappings, to show the kernel tests notice them ----
enum class Mutation : uint8_t {
    NONE,
    SWIZZLE_SOURCE_LANE,   // BitMode ds_swizzle reads from the lane after the right one
    BPERMUTE_SOURCE_LANE,  // ds_bpermute reads from the lane after the right one
    WMMA_GFX11_D_ROWS,     // gfx11 WMMA writes D with the gfx12 row layout
    WMMA_GFX12_D_ROWS,     // gfx12 WMMA writes D with the gfx11 row layout
    MFMA_D_ROWS,           // MFMA writes D row i of lane l to row (l/16) + 4i instead of 4(l/16) + i
};
void set_mutation(Mutation m);
Mutation mutation();

// ---- one dispatch ----
using EmuKernelFn = void (*)(const void* kernarg);  // runs one work-item of a kernel's emulated twin
// Runs every work-group of the grid in order on the calling thread. `what` prefixes error messages.
void run_grid(const std::string& what, EmuKernelFn fn, const void* kernarg, Target target, Dim3 grid, Dim3 block);
EmuKernelFn find_twin(std::string_view kernel_name, Target target);  // the kernel's twin; nullptr if there is none

}  // namespace tinyllm::amd::emu
