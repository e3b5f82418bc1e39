// Kernel argument layouts of the hand-written AMD kernels, shared by the .hip sources (device), the host
// emulator and the AMD device that fills the kernarg segment. Pointers are GPU virtual addresses on the
// device and host addresses in the emulator; the structs are plain data with the same layout on both.
#pragma once

#if !defined(__AMDGCN__)
#include <cstdint>
#endif

namespace tinyllm::amd {

// Work-group shapes. Every kernel runs 1-D work-groups of WAVES waves (wave32 on gfx11/12, wave64 on CDNA).
constexpr uint32_t Q8_QUANTIZE_WAVES = 4;
constexpr uint32_t GEMV_WAVES = 4;           // one output row per wave
constexpr uint32_t GEMM_WAVES = 4;           // 2x2 waves, each a 32x32 tile of the 64x64 work-group tile
constexpr uint32_t GEMM_TILE = 64;           // tokens and outputs per work-group
constexpr uint32_t ATTN_WAVES = 4;
constexpr uint32_t ATTN_CHUNK = 64;          // keys per work-group of the partial kernel
constexpr uint32_t ATTN_COMBINE_WAVES = 1;
constexpr uint32_t Q8_GROUP = 32;            // activation values per q8 scale
constexpr uint32_t KV_STORE_WAVES = 1;

// q8_quantize: x (n_tokens, n_in) f32 -> int8 values with a scale per 32 and sums per 16.
// Group g of token t: values xq[t][8g..8g+8) (4 int8 per word, element 4i+j in byte j of word i),
// value = xscale[t][g] * int8, xsum[t][2g+h] = sum of the int8 values 16h..16h+15. n_in % 32 == 0.
struct Q8QuantizeArgs {
    const float* x;        // (n_tokens, n_in)
    uint32_t* xq;          // (n_tokens, n_in / 4)
    float* xscale;         // (n_tokens, n_in / 32)
    float* xsum;           // (n_tokens, n_in / 16)
    uint32_t n_tokens;
    uint32_t n_in;
};

// gemv_<type>_q8: y[t][n] = sum_k W[n][k] * x[t][k] with x as q8_quantize wrote it. W is the raw GGUF
// tensor (rows of n_in / block_size blocks), except Q6_K whose blocks are repacked to 212 bytes
// (repack_q6_k). n_in is a multiple of the block size (256 for K/IQ types, 32 for Q8_0/Q4_0).
struct GemvQ8Args {
    const uint32_t* w;     // (n_out, n_in) quantized; 4-byte aligned, readable up to a multiple of 4 bytes
    const uint32_t* xq;    // (n_tokens, n_in / 4)
    const float* xscale;   // (n_tokens, n_in / 32)
    const float* xsum;     // (n_tokens, n_in / 16)
    float* y;              // (n_tokens, n_out)
    uint32_t n_out;
    uint32_t n_in;
    uint32_t n_tokens;
    uint32_t pad0;
};

// gemv_f16: y[t][n] = sum_k W[n][k] * x[t][k], W fp16 (small dense heads). n_in % 8 == 0.
struct GemvF16Args {
    const uint16_t* w;     // (n_out, n_in) fp16
    const float* x;        // (n_tokens, n_in)
    float* y;              // (n_tokens, n_out)
    uint32_t n_out;
    uint32_t n_in;
    uint32_t n_tokens;
    uint32_t pad0;
};

// gemm_<type>: y[t][n] = sum_k W[n][k] * x[t][k] on the matrix cores (WMMA on gfx11/12, MFMA on CDNA):
// weights dequantized to fp16 on the fly, x fp16, fp32 accumulation. Same weight layouts as the GEMVs.
struct GemmArgs {
    const uint32_t* w;     // (n_out, n_in) quantized or fp16
    const uint16_t* x;     // (n_tokens, n_in) fp16
    float* y;              // (n_tokens, n_out)
    uint32_t n_out;
    uint32_t n_in;
    uint32_t n_tokens;
    uint32_t pad0;
};

// attn_decode_partial_d<D>: one query token against kv_len cached keys, split into chunks of ATTN_CHUNK
// keys. Work-group (chunk, kv_head) handles all query heads of its KV head (GQA). Per chunk it writes the
// unnormalised output and (max, sum) of its scores in log2 units: score = q.k * scale * log2(e),
// partial = sum_j 2^(score_j - max) v_j, sum = sum_j 2^(score_j - max).
// Paged (block_table set): n_tokens query tokens of a mixed batch, work-group (chunk, token * n_kv_heads +
// kv_head); token t sees keys 0..pos[t] of sequence seq[t], key j in pool row
// block_table[seq * blocks_per_seq + j / block_size] * block_size + j % block_size (sequence, block id and
// position clamped into range). n_chunks covers a whole sequence; chunks past a token's keys write
// partial 0 and (max, sum) = (-inf, 0), which the combine weighs 0.
struct AttnDecodeArgs {
    const float* q;        // (n_tokens, n_heads, D)
    const uint16_t* k;     // fp16; (pos or row, kv_head, d) at kv_head * kv_head_stride + pos * pos_stride + d
    const uint16_t* v;     // fp16; same strides as k
    float* partial;        // (n_tokens, n_heads, n_chunks, D)
    float* stats;          // (n_tokens, n_heads, n_chunks, 2)
    const int32_t* pos;    // paged: (n_tokens)
    const int32_t* seq;    // paged: (n_tokens)
    const int32_t* block_table;  // paged: (n_seqs, blocks_per_seq) block ids; null: not paged
    uint32_t n_heads;
    uint32_t n_kv_heads;   // n_heads % n_kv_heads == 0
    uint32_t kv_len;       // not paged: keys 0..kv_len-1 are attended; >= 1
    uint32_t n_chunks;     // ceil(kv_len / ATTN_CHUNK); paged: ceil(blocks_per_seq * block_size / ATTN_CHUNK)
    uint32_t kv_head_stride;
    uint32_t pos_stride;
    float scale;           // usually 1/sqrt(D)
    uint32_t n_tokens;     // paged: the query tokens (not paged: one, whatever this says)
    uint32_t n_seqs, blocks_per_seq, block_size, n_blocks;  // paged
};

// attn_decode_combine: out[h] = sum_c 2^(max_c - M) partial[h][c] / sum_c 2^(max_c - M) sum_c.
struct AttnCombineArgs {
    const float* partial;  // (n_heads, n_chunks, head_dim)
    const float* stats;    // (n_heads, n_chunks, 2)
    float* out;            // (n_heads, head_dim)
    uint32_t n_heads;
    uint32_t n_chunks;
    uint32_t head_dim;
    uint32_t pad0;
};

// kv_store_f16: pool row slot[t] = x[t] as fp16 (round to nearest even) for each token t; a slot outside
// [0, n_rows) is skipped. out[t] = slot[t] (what the engine orders the pool's readers after). One
// work-group per token.
struct KvStoreArgs {
    const float* x;        // (n_tokens, row)
    const int32_t* slot;   // (n_tokens)
    uint16_t* pool;        // (n_rows, row) fp16
    int32_t* out;          // (n_tokens)
    uint32_t n_tokens;
    uint32_t row;
    uint32_t n_rows;
    uint32_t pad0;
};

}  // namespace tinyllm::amd
