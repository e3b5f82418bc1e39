// Portability layer of the hand-written AMD kernels: ids, LDS, barrier, int8 dot, byte permute, cross-lane
// swizzle/bpermute and 16x16x16 f16 matrix ops. The same kernel source builds (a) with clang-19 for gfx1100,
// gfx1201 (wave32, WMMA) and gfx90a, gfx942 (wave64, MFMA) and (b) for the host SIMT emulator (emu/), whose
// translation units define TINYLLM_EMU_TARGET and include emu/emulator.h before this header.
#pragma once

#if defined(__AMDGCN__)
// Freestanding device build: no HIP headers, so every function below and in the kernels is device code.
#pragma clang force_cuda_host_device begin
typedef __UINT8_TYPE__ uint8_t;
typedef __INT8_TYPE__ int8_t;
typedef __UINT16_TYPE__ uint16_t;
typedef __INT16_TYPE__ int16_t;
typedef __UINT32_TYPE__ uint32_t;
typedef __INT32_TYPE__ int32_t;
typedef __UINT64_TYPE__ uint64_t;
typedef __INT64_TYPE__ int64_t;
#include "kernels_amd/kernargs.h"
using namespace tinyllm::amd;
#if defined(__gfx1100__)
#define AMD_GFX 1100
#elif defined(__gfx1201__)
#define AMD_GFX 1201
#elif defined(__gfx90a__)
#define AMD_GFX 9010
#elif defined(__gfx942__)
#define AMD_GFX 942
#else
#error "kernels_amd: unsupported target (gfx1100, gfx1201, gfx90a, gfx942)"
#endif
#else
#define AMD_GFX TINYLLM_EMU_TARGET
#endif

#define AMD_RDNA (AMD_GFX == 1100 || AMD_GFX == 1201)

constexpr uint32_t WAVE = AMD_RDNA ? 32 : 64;

typedef uint32_t u32x4 __attribute__((vector_size(16), aligned(4)));
typedef float f32x4 __attribute__((vector_size(16), aligned(4)));

// Matrix-core fragments of D(16x16, f32) = A(16x16, f16) * B(16x16, f16) + C. Lane l holds row l%16 of A
// and column l%16 of B at k = mma_k(l, e); element v of its accumulator is D[mma_acc_row(l, v)][l%16].
#if AMD_GFX == 1100
constexpr uint32_t MMA_K_PER_LANE = 16, MMA_ACC_PER_LANE = 8;  // lanes 16-31 replicate lanes 0-15
inline uint32_t mma_k(uint32_t, uint32_t e) { return e; }
inline uint32_t mma_acc_row(uint32_t lane, uint32_t v) { return 2 * v + lane / 16; }
#elif AMD_GFX == 1201
constexpr uint32_t MMA_K_PER_LANE = 8, MMA_ACC_PER_LANE = 8;
inline uint32_t mma_k(uint32_t lane, uint32_t e) { return 8 * (lane / 16) + e; }
inline uint32_t mma_acc_row(uint32_t lane, uint32_t v) { return 8 * (lane / 16) + v; }
#else
constexpr uint32_t MMA_K_PER_LANE = 4, MMA_ACC_PER_LANE = 4;
inline uint32_t mma_k(uint32_t lane, uint32_t e) { return 4 * (lane / 16) + e; }
inline uint32_t mma_acc_row(uint32_t lane, uint32_t v) { return 4 * (lane / 16) + v; }
#endif
typedef _Float16 mma_ab_t __attribute__((vector_size(2 * MMA_K_PER_LANE)));
typedef float mma_acc_t __attribute__((vector_size(4 * MMA_ACC_PER_LANE)));

#if defined(__AMDGCN__)

inline uint32_t thread_id() { return __builtin_amdgcn_workitem_id_x(); }
inline uint32_t group_id_x() { return __builtin_amdgcn_workgroup_id_x(); }
inline uint32_t group_id_y() { return __builtin_amdgcn_workgroup_id_y(); }
// From the AQL dispatch packet: workgroup_size_x is the u16 at byte 4.
inline uint32_t block_dim_x() { return static_cast<const uint16_t*>(__builtin_amdgcn_dispatch_ptr())[2]; }
inline void barrier() {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
// Streamed weights are read once: nontemporal loads keep them from evicting activations and the KV cache.
inline uint32_t load_nt(const uint32_t* p) { return __builtin_nontemporal_load(p); }
inline u32x4 load4_nt(const uint32_t* p) { return __builtin_nontemporal_load(reinterpret_cast<const u32x4*>(p)); }
inline int32_t dot4_i8(uint32_t a, uint32_t b, int32_t c) {
#if AMD_RDNA
    return __builtin_amdgcn_sudot4(true, static_cast<int32_t>(a), true, static_cast<int32_t>(b), c, false);
#else
    return __builtin_amdgcn_sdot4(static_cast<int32_t>(a), static_cast<int32_t>(b), c, false);
#endif
}
inline uint32_t perm_b32(uint32_t s0, uint32_t s1, uint32_t selector) { return __builtin_amdgcn_perm(s0, s1, selector); }
template <uint32_t Pattern>
inline int32_t ds_swizzle(int32_t v) { return __builtin_amdgcn_ds_swizzle(v, Pattern); }
inline int32_t ds_bpermute(uint32_t byte_address, int32_t v) {
    return __builtin_amdgcn_ds_bpermute(static_cast<int32_t>(byte_address), v);
}
inline mma_acc_t mma_f16(mma_ab_t a, mma_ab_t b, mma_acc_t c) {
#if AMD_GFX == 1100
    return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(a, b, c);
#elif AMD_GFX == 1201
    return __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(a, b, c);
#else
    return __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, 0, 0, 0);
#endif
}
#define AMD_LDS(T, name, count) __attribute__((shared)) T name[count]
#define AMD_KERNEL(name, Args, waves)                                                               \
    extern "C" __attribute__((global, amdgpu_flat_work_group_size((waves) * WAVE, (waves) * WAVE))) \
    void name(Args args)

#else  // host emulation

namespace emu_ = ::tinyllm::amd::emu;
inline uint32_t thread_id() { return emu_::workitem_id(0); }
inline uint32_t group_id_x() { return emu_::workgroup_id(0); }
inline uint32_t group_id_y() { return emu_::workgroup_id(1); }
inline uint32_t block_dim_x() { return emu_::workgroup_size(0); }
inline void barrier(uint32_t site = __builtin_LINE()) { emu_::barrier(site); }
inline uint32_t load_nt(const uint32_t* p) { return *p; }
inline u32x4 load4_nt(const uint32_t* p) { return *reinterpret_cast<const u32x4*>(p); }
inline int32_t dot4_i8(uint32_t a, uint32_t b, int32_t c) {
#if AMD_RDNA
    return emu_::sudot4(true, a, true, b, c);
#else
    return emu_::sdot4(a, b, c);
#endif
}
inline uint32_t perm_b32(uint32_t s0, uint32_t s1, uint32_t selector) { return emu_::perm_b32(s0, s1, selector); }
template <uint32_t Pattern>
inline int32_t ds_swizzle(int32_t v, uint32_t site = __builtin_LINE()) { return emu_::ds_swizzle(v, Pattern, site); }
inline int32_t ds_bpermute(uint32_t byte_address, int32_t v, uint32_t site = __builtin_LINE()) {
    return emu_::ds_bpermute(static_cast<int32_t>(byte_address), v, site);
}
inline mma_acc_t mma_f16(mma_ab_t a, mma_ab_t b, mma_acc_t c, uint32_t site = __builtin_LINE()) {
#if AMD_GFX == 1100
    constexpr auto op = emu_::MatrixOp::WMMA_GFX11;
#elif AMD_GFX == 1201
    constexpr auto op = emu_::MatrixOp::WMMA_GFX12;
#else
    constexpr auto op = emu_::MatrixOp::MFMA_F16;
#endif
    mma_acc_t d;
    emu_::matrix_op(op, reinterpret_cast<const _Float16*>(&a), reinterpret_cast<const _Float16*>(&b),
                    reinterpret_cast<const float*>(&c), reinterpret_cast<float*>(&d), site);
    return d;
}
#define AMD_LDS(T, name, count) T* name = static_cast<T*>(emu_::lds_alloc(sizeof(T) * (count), alignof(T)))
#define AMD_KERNEL(name, Args, waves) void name(const Args& args)

#endif

// ---- helpers built on the primitives (identical on device and host) ----

inline uint32_t lane_id() { return thread_id() % WAVE; }
inline uint32_t wave_id() { return thread_id() / WAVE; }
inline uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }
inline float half_to_float(uint32_t bits) { return static_cast<float>(__builtin_bit_cast(_Float16, static_cast<uint16_t>(bits))); }
inline float half_lo(uint32_t word) { return half_to_float(word & 0xffff); }
inline float half_hi(uint32_t word) { return half_to_float(word >> 16); }
inline u32x4 load4(const uint32_t* p) { return *reinterpret_cast<const u32x4*>(p); }
inline f32x4 load4(const float* p) { return *reinterpret_cast<const f32x4*>(p); }

// Value of lane (lane ^ Mask): ds_swizzle BitMode (and 0x1f, xor Mask) within 32 lanes, ds_bpermute across.
template <uint32_t Mask>
inline int32_t shuffle_xor(int32_t v) {
    if constexpr (Mask < 32) return ds_swizzle<0x1f | (Mask << 10)>(v);
    else return ds_bpermute((lane_id() ^ Mask) * 4, v);
}
template <uint32_t Mask>
inline float shuffle_xor(float v) { return __builtin_bit_cast(float, shuffle_xor<Mask>(__builtin_bit_cast(int32_t, v))); }

struct OpAdd {
    template <class T>
    T operator()(T a, T b) const { return a + b; }
};
struct OpMax {
    float operator()(float a, float b) const { return __builtin_fmaxf(a, b); }
};

// Reduces over aligned groups of Width lanes (a power of two <= WAVE) by xor butterflies; every lane of a
// group ends with the same value because each step combines the same two operands in both lanes.
template <uint32_t Width, class T, class Op>
inline T group_reduce(T v, Op op) {
    if constexpr (Width > 1) return group_reduce<Width / 2>(op(v, shuffle_xor<Width / 2>(v)), op);
    else return v;
}
template <class T>
inline T wave_sum(T v) { return group_reduce<WAVE>(v, OpAdd{}); }
