// Kernels for the AMD backend tests (tests/devices/amd_*), compiled with clang-19 for gfx1100 at build
// time (amd_test_kernels.cmake). Freestanding: no HIP headers, ids and sizes from builtins.
#define KERNEL extern "C" __attribute__((global))
#define DEVICE static __attribute__((device)) inline
typedef unsigned int u32;
typedef unsigned short u16;

// The workgroup size from the AQL dispatch packet (workgroup_size_x is its u16 at byte 4).
DEVICE u32 packet_block_x() { return ((const u16*)__builtin_amdgcn_dispatch_ptr())[2]; }

// c = a + b over n elements, one work-item each.
KERNEL void vadd(const float* a, const float* b, float* c, u32 n) {
    u32 i = __builtin_amdgcn_workgroup_id_x() * packet_block_x() + __builtin_amdgcn_workitem_id_x();
    if (i < n) c[i] = a[i] + b[i];
}

// x[row][col] *= s on a 2-D grid; the row length comes from the hidden arguments the runtime fills
// (code object v5: block counts as u32 at 0/4/8, group sizes as u16 at 12/14/16).
KERNEL void scale2d(float* x, float s) {
    const u32* hidden = (const u32*)__builtin_amdgcn_implicitarg_ptr();
    const u16* group = (const u16*)(hidden + 3);
    u32 cols = hidden[0] * group[0];
    u32 col = __builtin_amdgcn_workgroup_id_x() * group[0] + __builtin_amdgcn_workitem_id_x();
    u32 row = __builtin_amdgcn_workgroup_id_y() * group[1] + __builtin_amdgcn_workitem_id_y();
    x[row * cols + col] *= s;
}
