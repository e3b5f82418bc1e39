// Internals of the CPU kernels: one table of entry points per instruction-set variant, unpacking panels,
// and per-thread scratch memory. (The "codes and scales" view of the quantized types is in kernels.h.)
//
// Each variant lives in files compiled with its own -m flags (*_avx512.cpp, *_avx2.cpp) and in a
// namespace of its own (cpu_kernels::avx512, ::avx2) whose headers only those files include. They
// must not instantiate inline code that baseline files also use (std containers, std::optional,
// ...): the linker keeps one copy of such code, and a scalar caller could end up running AVX-512
// instructions. So they call out-of-line helpers like bytes_per_row() instead.
#pragma once

#include "devices/cpu/kernels/kernels.h"
#include "gguf/blocks.h"

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace cpu_kernels {

// prefetch_level() == Prefetch::L2, set once with the active variant (dispatch.cpp).
extern bool g_prefetch_l2;

// Lines [0, n_lines) of 64 bytes from p into L1 or L2 (prefetch_level: the decode kernels' streams).
// prefetcht0/t1 are baseline x86-64 and the function static, so each variant's file keeps its own copy.
static inline void prefetch_lines(const uint8_t* p, int n_lines) {
    if (g_prefetch_l2)
        for (int l = 0; l < n_lines; l++) _mm_prefetch(reinterpret_cast<const char*>(p + 64 * l), _MM_HINT_T1);
    else
        for (int l = 0; l < n_lines; l++) _mm_prefetch(reinterpret_cast<const char*>(p + 64 * l), _MM_HINT_T0);
}

// f(std::integral_constant<int, N>(), t) for tokens [0, n) in groups of up to 4 (t the group's first, N
// its size): the few-token kernels' register tiles. Static, like prefetch_lines: one copy per variant.
template <class F>
static inline void by_4_tokens(int64_t n, F&& f) {
    for (int64_t t = 0; t < n; t += 4) switch (n - t) {
            case 1: f(std::integral_constant<int, 1>(), t); break;
            case 2: f(std::integral_constant<int, 2>(), t); break;
            case 3: f(std::integral_constant<int, 3>(), t); break;
            default: f(std::integral_constant<int, 4>(), t); break;
        }
}

// Bytes of a row of n elements of type t (a valid size: checked by the caller).
size_t bytes_per_row(gguf::Type t, int64_t n);

// One KV cache (Attention's k or v) in bytes, from the type table: KV head hk's row at position `row`
// starts at at(row, hk) and is row_bytes long (Q8_0 / Q4_0: whole blocks).
struct KvView {
    const uint8_t* base;
    int64_t pos_bytes, head_bytes, row_bytes;
    const uint8_t* at(int64_t row, int64_t hk) const { return base + row * pos_bytes + hk * head_bytes; }
};
KvView key_view(const Attention& a);
KvView value_view(const Attention& a);

// Entry points of one variant. Arguments are validated by the caller (dispatch.cpp).
struct Kernels {
    void (*quantize_rows)(gguf::Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out,
                          int64_t row_begin, int64_t row_end);
    // Every type with has_hand_kernel(type), F32/F16/BF16 included.
    void (*matmul)(const Matmul& m, int64_t row_begin, int64_t row_end);
    void (*attention)(const Attention& a, int64_t pair_begin, int64_t pair_end);
    void (*swiglu)(const float* gate, const float* up, int64_t n, float* out);
    void (*rms_norm)(const float* x, const float* w, int64_t n, float eps, float* out);
};

namespace scalar { extern const Kernels kernels; }
namespace avx2 { extern const Kernels kernels; }
namespace avx512 { extern const Kernels kernels; }

// Weights packed as panels (Matmul::packed) on the scalar variant, which has no panel kernel of its
// own (packed.cpp): Q8_0 by a scalar kernel over the panels, the other types by unpacking the rows and
// running `row_kernels` on them.
void matmul_packed_rows(const Matmul& m, int64_t row_begin, int64_t row_end, const Kernels& row_kernels);
// A product over packed weights on a variant with panel kernels (packed.cpp): `gemv` for fewer than
// gemm_min_tokens tokens and for the rows of the panels the range cuts, `gemm` for its whole panels.
using MatmulFn = void (*)(const Matmul& m, int64_t r0, int64_t r1);
void matmul_panels(const Matmul& m, int64_t r0, int64_t r1, int64_t gemm_min_tokens, MatmulFn gemv, MatmulFn gemm);
// Rows [r_begin, r_end) of one panel of packed weights (n_cols columns), units (blocks or super-blocks)
// [unit_begin, unit_end), back in GGUF form: rows of (unit_end - unit_begin) blocks at `out`.
void unpack_panel(gguf::Type weight_type, const uint8_t* panel, int64_t n_cols, int r_begin, int r_end, int64_t unit_begin,
                  int64_t unit_end, uint8_t* out);

// ---- activations of the row-wise kernels (lanes along the row) ---------------------------------------

// One token's activation for a quantized weight type, prepared once per call. The zero point of the
// weight codes and the mins both enter as a per-group term: Σ_i (s(u_i − z) + o)·d·q_i = s·d·Σ u_i q_i +
// (o − z·s)·d·Σ q_i, so `s` holds d·Σq per group (times −z for types with a zero point: their term is
// s·(−z·d·Σq)).
struct LaneAct {
    const int8_t* q;  // K quants, then 64 zero bytes
    const float* d;   // d_x per activation block: per 32 (Q8_0, Q8_1) or per 256 (Q8_K); zero-padded
    const float* s;   // per weight group: per 32 (Q8_0 / Q8_1: with mins, Q8_1's stored fp16 s, as ggml
                      // uses it) or 16 per super-block (Q8_K; zero past its groups)
};
// Bytes of one token's prepared activation.
int64_t lane_act_bytes(int64_t K);
// The n_tokens activation rows at x (the weight type's activation format) into `mem` (n_tokens ·
// lane_act_bytes(K)) and `out`. interleaved: each 128 quants in the order 0-31, 64-95, 32-63, 96-127
// (the AVX-512 Q4_K row kernel's code order).
void prepare_lane_acts(gguf::Type type, bool interleaved, const uint8_t* x, int64_t K, int64_t n_tokens, uint8_t* mem,
                       LaneAct* out);

// ---- per-thread scratch -----------------------------------------------------------------------------

// A 64-byte-aligned buffer of at least `bytes`, owned by the calling thread, reused across calls.
// Slots let one call hold several buffers at once.
enum class ScratchSlot { ACTIVATIONS, WEIGHTS, TILE, UNPACKED, COUNT };  // UNPACKED: packed rows back in GGUF form
void* scratch(ScratchSlot slot, size_t bytes);
// As scratch(), for contents worth keeping between calls: `kept` is true when the slot was last taken
// by scratch_keyed with the same nonzero `key` (and as many bytes), so it still holds what that caller
// left in it.
void* scratch_keyed(ScratchSlot slot, size_t bytes, uint64_t key, bool& kept);

// Half-precision conversion for scalar code (gguf has the reference conversions).
float fp16_to_f32(uint16_t h);

}  // namespace cpu_kernels
