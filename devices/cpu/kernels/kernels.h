// Hand-written CPU kernels: activation quantizers, quantized matrix-vector / matrix-matrix products
// and attention over a KV cache. Single-threaded functions over a range of output rows (or of
// (token, head) pairs); the engine splits the range across its thread pool. AVX-512, AVX2 and scalar
// variants, chosen at run time.
#pragma once

#include "gguf/types.h"

#include <cstdint>
#include <stdexcept>

namespace cpu_kernels {

// Bad arguments (unsupported type, sizes that do not fit the block size, ...). The message starts with
// the kernel's name: "[cpu_kernels.matmul] q4_K: n_cols 100 is not a multiple of 256".
struct Error : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

// ---- instruction sets ----------------------------------------------------------------------------

enum class Isa { SCALAR, AVX2, AVX512 };  // AVX2 means AVX2+FMA+F16C; AVX512 means F+BW+DQ+VL+VNNI+BF16

const char* isa_name(Isa isa);
bool isa_supported(Isa isa);   // by this CPU and OS (cpuid + xgetbv)
Isa best_isa();                // the best supported one
// The variant every kernel call uses: best_isa(), or TINYLLM_CPU_ISA=scalar|avx2|avx512 when set.
Isa active_isa();
// Override for tests and benchmarks (not thread-safe against running kernels); throws if unsupported.
void set_active_isa(Isa isa);

// AMX (Sapphire Rapids on): int8 tile products for the quantized matrix-matrix kernels, a capability of
// the AVX512 variant. Supported: cpuid AMX-TILE and AMX-INT8, the OS saves the tile state (XCR0), and
// Linux granted this process the tile data permission. Active: supported, the AVX512 variant active,
// and not turned off by TINYLLM_CPU_AMX=0 or set_amx_enabled(false).
bool amx_supported();
bool amx_active();
// Override for tests and benchmarks (not thread-safe against running kernels); throws if enabling it
// on a CPU or OS without AMX.
void set_amx_enabled(bool on);

// Where the decode kernels' software prefetches put the weights they will read next: into L1
// (prefetcht0) or only into L2 (prefetcht1); the distances are the variants' own (packed_avx512.cpp).
// L2 by default (measured faster on the AMD EPYC Zen 4), L1 where AMX is supported (measured on the
// Intel Xeon); the figures are in README.md's Performance section. TINYLLM_CPU_PREFETCH=l1|l2 overrides.
enum class Prefetch : uint8_t { L1, L2 };
Prefetch prefetch_level();
const char* prefetch_name(Prefetch p);

// ---- activations ---------------------------------------------------------------------------------

// The format a weight type multiplies against, as in ggml's CPU vec_dot pairs: Q8_0 for Q8_0, Q4_0,
// Q5_0, IQ4_NL; Q8_1 for Q4_1, Q5_1; Q8_K for the K-quants and IQ4_XS; F16 for F16; BF16 for BF16;
// F32 for F32 and for every type on the generic (dequantize, then multiply) path.
gguf::Type activation_type(gguf::Type weight_type);
bool has_hand_kernel(gguf::Type weight_type);  // false: the generic path (needs gguf's dequantizer)

// Bytes of one activation row of n_cols values in activation_type(weight_type).
int64_t activation_row_bytes(gguf::Type weight_type, int64_t n_cols);

// Rows [row_begin, row_end) of x (n_rows, n_cols) f32, row stride x_stride floats, into `out` (rows of
// activation_row_bytes each) in format `act`: Q8_0, Q8_1, Q8_K, F16, BF16 or F32, or Q4_0 (a KV cache
// format, not an activation one: the reference quantizer on every variant). Bit-exact with ggml's
// reference quantizers (Q8_0/Q8_1 round half away from zero, Q8_K and F16/BF16 to nearest even) on
// every variant, ties included (only the payload bits of a NaN converted to F16 may differ).
void quantize_rows(gguf::Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out,
                   int64_t row_begin, int64_t row_end);

// out = x / sqrt(mean(x²) + eps) · w over one row of n values, as engine::rms_norm computes it: the mean
// as the sum times the f32 constant 1/n, the reciprocal of the square root, then x · r · w (the sum in
// the variant's vector lanes, so not bit-equal to a generated kernel's sum).
void rms_norm_row(const float* x, const float* w, int64_t n, float eps, float* out);
// out = silu(gate) · up over n values (SwiGLU), to about 2 ulp of the f32 formula.
void swiglu_row(const float* gate, const float* up, int64_t n, float* out);

// ---- matrix products -----------------------------------------------------------------------------

// y[t][r] = Σ_c W[r][c] · x[t][c]
struct Matmul {
    gguf::Type type = gguf::Type::F32;  // weight type
    const void* w = nullptr;            // (n_rows, n_cols) rows of gguf::row_bytes(type, n_cols) bytes
    int64_t n_rows = 0;
    int64_t n_cols = 0;                 // a multiple of the type's block size
    const void* x = nullptr;            // (n_tokens, n_cols) rows in activation_type(type), packed
    int64_t n_tokens = 0;
    float* y = nullptr;                 // (n_tokens, y_stride): y[t * y_stride + r]
    int64_t y_stride = 0;               // ≥ n_rows
    bool packed = false;                // w holds pack_rows() panels instead of GGUF rows
    // Nonzero: every call with this key has the same x, so a thread's later row ranges of the product
    // may reuse the activations it prepared for an earlier one (matrix-matrix kernels). 0: never.
    uint64_t acts_key = 0;
};

// Checks sizes and types; throws Error. matmul() calls it too.
void validate(const Matmul& m);

// Output rows [row_begin, row_end) for every token. Ranges that start at multiples of
// kMatmulRowAlign run fastest (one tile of rows). Few tokens stream the weights once per 4 tokens;
// from 5 (quantized) or 8 (float) tokens on, rows are packed into tiles that serve every token.
constexpr int64_t kMatmulRowAlign = 16;
// Threads share a product's rows in multiples of this: the widest decode tile (4 panels of 16 rows).
constexpr int64_t kMatmulRowGrain = 64;
void matmul(const Matmul& m, int64_t row_begin, int64_t row_end);

// The generic path with an explicit dequantizer: rows dequantized 16 at a time into F32, multiplied by
// the active variant's F32 kernel. m.x holds F32 activations. (matmul() takes it with gguf's dequantizer
// for types without a hand kernel; tests pass ggml's own numbers.)
void matmul_generic(const Matmul& m, gguf::DequantizeFn dequantize, int64_t row_begin, int64_t row_end);

// ---- the common view of the quantized types --------------------------------------------------------
//
// Every hand-kernel type decodes to its gguf::CodeLayout:  w[i] = s[g] · (u[i] − zero) + o[g].
// With activations x[i] = d_x[g] · q[i] (Q8 blocks) the dot product of one group is
//   s[g] · d_x[g] · Σ (u − zero)·q  +  o[g] · d_x[g] · Σ q
// where the integer sum is exact (vpdpbusd multiplies unsigned by signed bytes) and Σ q comes with
// the activation (Q8_K bsums, Q8_1 s) or is computed once per activation row.

// Layout of a hand-kernel quantized type (the type table's `codes`); nullptr for float and
// generic-path types.
const gguf::CodeLayout* quant_layout(gguf::Type t);

// Reference decoding of one block into codes, per-group scales and offsets (scalar, exact).
// u: block_size bytes; s, o: block_size / group floats.
using DecodeBlockFn = void (*)(const void* block, uint8_t* u, float* s, float* o);
DecodeBlockFn decode_block_fn(gguf::Type t);

// ---- weights packed for the matmul ---------------------------------------------------------------
//
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q4_K, Q5_K and Q6_K weights can be stored as panels
// of 16 rows, in the order the AVX-512 kernels read them (packed.cpp has the formats): per panel the
// 16 rows' codes interleaved by 4-byte words (one aligned 64-byte load feeds 4 bytes of codes of all
// 16 rows to vpdpbusd), then the scales and mins laid out so that one load gives a value of all 16 rows. A panel takes the same bytes as the
// 16 rows it replaces, and decode streams the weights front to back in one sequence with little work
// per byte. Matmul::packed says w is in this form; every variant accepts it (AVX-512 reads a line as
// 16 rows, AVX2 as two halves of 8; the scalar variant unpacks rows and runs its row kernels).
constexpr int64_t kPanelRows = 16;
// Whether pack_rows() takes this weight: a type above, rows in whole panels, columns a multiple of 64.
bool can_pack(gguf::Type weight_type, int64_t n_rows, int64_t n_cols);
// Panels [panel_begin, panel_end) of w (n_rows, n_cols) into `out` (the same size as w).
void pack_rows(gguf::Type weight_type, const void* w, int64_t n_rows, int64_t n_cols, void* out,
               int64_t panel_begin, int64_t panel_end);
// The exact inverse: rows [row_begin, row_end) of packed weights back as GGUF rows at `out`.
void unpack_rows(gguf::Type weight_type, const void* packed, int64_t n_rows, int64_t n_cols, void* out,
                 int64_t row_begin, int64_t row_end);
// Where columns [0, n_cols) of a panel's codes end (the codes come first, so the columns [k0, k1) of a
// panel are its bytes [panel_code_bytes(k0), panel_code_bytes(k1)); n_cols a multiple of the type's unit).
int64_t panel_code_bytes(gguf::Type weight_type, int64_t n_cols);

// ---- attention -----------------------------------------------------------------------------------

// Causal attention of n_tokens query tokens at positions start_pos .. start_pos+n_tokens-1 over a KV
// cache holding positions 0 .. start_pos+n_tokens-1 (the new keys/values already stored).
// Grouped-query: query head h reads KV head h / (n_head / n_head_kv). Strides are in elements.
// Q8_0 and Q4_0 caches are GGUF blocks of 32 values along the head dimension (head dims and strides are
// multiples of 32); the kernels dequantize them a block at a time as they read them.
struct Attention {
    const float* q = nullptr;         // (n_tokens, n_head, head_dim_k)
    int64_t q_token_stride = 0, q_head_stride = 0;
    gguf::Type kv_type = gguf::Type::F32;  // F32, F16, Q8_0 or Q4_0, for both caches
    const void* k = nullptr;          // (n_kv, n_head_kv, head_dim_k)
    int64_t k_pos_stride = 0, k_head_stride = 0;
    const void* v = nullptr;          // (n_kv, n_head_kv, head_dim_v)
    int64_t v_pos_stride = 0, v_head_stride = 0;
    float* out = nullptr;             // (n_tokens, n_head, head_dim_v)
    int64_t out_token_stride = 0, out_head_stride = 0;
    int64_t n_tokens = 0, start_pos = 0;
    int64_t n_head = 0, n_head_kv = 0;
    int64_t head_dim_k = 0, head_dim_v = 0;  // may differ (MLA)
    float scale = 1.0f;               // logits = scale · q·k
    int64_t window = 0;               // > 0: query at p sees keys at p-window+1 .. p (sliding window)
    const float* sinks = nullptr;     // (n_head) or null: per-head sink logit, in the softmax sum only
    // Paged KV (ops::PagedAttention), when block_table is set: token t is at position pos[t] of sequence
    // seq[t] (start_pos is not read), and key position p is cache row
    // block_table[seq[t] * blocks_per_seq + p / block_size] * block_size + p % block_size.
    const int32_t* pos = nullptr;          // (n_tokens)
    const int32_t* seq = nullptr;          // (n_tokens)
    const int32_t* block_table = nullptr;  // (n_seqs, blocks_per_seq)
    int64_t n_seqs = 0, blocks_per_seq = 0, block_size = 0, n_blocks = 0;
};

// Token t's position, and the cache row of its key position p with how many rows from there are
// contiguous (to the end of p's block). Paged positions, sequences and block ids are clamped into range.
inline int64_t query_pos(const Attention& a, int64_t t) {
    if (!a.block_table) return a.start_pos + t;
    const int64_t p = a.pos[t], last = a.blocks_per_seq * a.block_size - 1;
    return p < 0 ? 0 : p > last ? last : p;
}
inline int64_t key_row(const Attention& a, int64_t t, int64_t p) {
    if (!a.block_table) return p;
    int64_t s = a.seq[t];
    s = s < 0 ? 0 : s >= a.n_seqs ? a.n_seqs - 1 : s;
    int64_t b = a.block_table[s * a.blocks_per_seq + p / a.block_size];
    b = b < 0 ? 0 : b >= a.n_blocks ? a.n_blocks - 1 : b;
    return b * a.block_size + p % a.block_size;
}
inline int64_t key_run(const Attention& a, int64_t p) { return a.block_table ? a.block_size - p % a.block_size : INT64_MAX; }

void validate(const Attention& a);

// Query (token, head) pairs [pair_begin, pair_end), pair = (n_tokens − 1 − t) · n_head + h: tokens from the
// last, so that a pool handing out its chunks in order starts with the costliest of a causal prefill.
void attention(const Attention& a, int64_t pair_begin, int64_t pair_end);

}  // namespace cpu_kernels
