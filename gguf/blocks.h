// Quantization block layouts, byte-compatible with ggml (ggml-common.h). Each checks its own size.
// `half` fields hold IEEE fp16 bits; convert with gguf::f16_to_f32.
#pragma once

#include <cstdint>

namespace gguf {

using half = uint16_t;

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK8_1 = 32;
constexpr int QK_K = 256;       // super-block size of the K and IQ types
constexpr int K_SCALE_SIZE = 12;
constexpr int QK4_NL = 32, QK_MXFP4 = 32, QK_NVFP4 = 64, QK1_0 = 128, QK2_0 = 64;

struct block_q4_0 { half d; uint8_t qs[QK4_0 / 2]; };
static_assert(sizeof(block_q4_0) == 2 + QK4_0 / 2, "wrong q4_0 block size");

struct block_q4_1 { half d; half m; uint8_t qs[QK4_1 / 2]; };
static_assert(sizeof(block_q4_1) == 4 + QK4_1 / 2, "wrong q4_1 block size");

struct block_q5_0 { half d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; };
static_assert(sizeof(block_q5_0) == 2 + 4 + QK5_0 / 2, "wrong q5_0 block size");

struct block_q5_1 { half d; half m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; };
static_assert(sizeof(block_q5_1) == 4 + 4 + QK5_1 / 2, "wrong q5_1 block size");

struct block_q8_0 { half d; int8_t qs[QK8_0]; };
static_assert(sizeof(block_q8_0) == 2 + QK8_0, "wrong q8_0 block size");

struct block_q8_1 { half d; half s; int8_t qs[QK8_1]; };  // s = d * sum(qs)
static_assert(sizeof(block_q8_1) == 4 + QK8_1, "wrong q8_1 block size");

struct block_q2_K { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; half d; half dmin; };
static_assert(sizeof(block_q2_K) == QK_K / 16 + QK_K / 4 + 4, "wrong q2_K block size");

struct block_q3_K { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; half d; };
static_assert(sizeof(block_q3_K) == QK_K / 8 + QK_K / 4 + 12 + 2, "wrong q3_K block size");

struct block_q4_K { half d; half dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; };
static_assert(sizeof(block_q4_K) == 4 + K_SCALE_SIZE + QK_K / 2, "wrong q4_K block size");

struct block_q5_K {
    half d; half dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2];
};
static_assert(sizeof(block_q5_K) == 4 + K_SCALE_SIZE + QK_K / 8 + QK_K / 2, "wrong q5_K block size");

struct block_q6_K { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; half d; };
static_assert(sizeof(block_q6_K) == QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, "wrong q6_K block size");

struct block_q8_K { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; };  // bsums: sums of 16 qs
static_assert(sizeof(block_q8_K) == 4 + QK_K + QK_K / 16 * 2, "wrong q8_K block size");

struct block_iq2_xxs { half d; uint16_t qs[QK_K / 8]; };
static_assert(sizeof(block_iq2_xxs) == 2 + QK_K / 4, "wrong iq2_xxs block size");

struct block_iq2_xs { half d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; };
static_assert(sizeof(block_iq2_xs) == 2 + QK_K / 4 + QK_K / 32, "wrong iq2_xs block size");

// qs: 32 grid indices (low 8 bits; qh has the high 2), then 32 sign bytes.
struct block_iq2_s { half d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; };
static_assert(sizeof(block_iq2_s) == 2 + QK_K / 4 + QK_K / 16, "wrong iq2_s block size");

struct block_iq3_xxs { half d; uint8_t qs[3 * QK_K / 8]; };
static_assert(sizeof(block_iq3_xxs) == 2 + 3 * QK_K / 8, "wrong iq3_xxs block size");

struct block_iq3_s {
    half d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t signs[QK_K / 8]; uint8_t scales[QK_K / 64];
};
static_assert(sizeof(block_iq3_s) == 2 + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64, "wrong iq3_s block size");

struct block_iq1_s { half d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; };
static_assert(sizeof(block_iq1_s) == 2 + QK_K / 8 + QK_K / 16, "wrong iq1_s block size");

struct block_iq1_m { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; };
static_assert(sizeof(block_iq1_m) == QK_K / 8 + QK_K / 16 + QK_K / 32, "wrong iq1_m block size");

struct block_iq4_nl { half d; uint8_t qs[QK4_NL / 2]; };
static_assert(sizeof(block_iq4_nl) == 2 + QK4_NL / 2, "wrong iq4_nl block size");

struct block_iq4_xs { half d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; };
static_assert(sizeof(block_iq4_xs) == 2 + 2 + QK_K / 64 + QK_K / 2, "wrong iq4_xs block size");

struct block_tq1_0 { uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; uint8_t qh[QK_K / 64]; half d; };
static_assert(sizeof(block_tq1_0) == 2 + 4 * QK_K / 64 / 4 + (QK_K - 4 * QK_K / 64) / 5, "wrong tq1_0 block size");

struct block_tq2_0 { uint8_t qs[QK_K / 4]; half d; };
static_assert(sizeof(block_tq2_0) == 2 + QK_K / 4, "wrong tq2_0 block size");

struct block_mxfp4 { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; };  // e: E8M0 shared exponent
static_assert(sizeof(block_mxfp4) == 1 + QK_MXFP4 / 2, "wrong mxfp4 block size");

// nvfp4: one UE4M3 scale per 16 elements; each 16-element sub-block packs 8 bytes, low nibbles first.
struct block_nvfp4 { uint8_t d[QK_NVFP4 / 16]; uint8_t qs[QK_NVFP4 / 2]; };
static_assert(sizeof(block_nvfp4) == QK_NVFP4 / 16 + QK_NVFP4 / 2, "wrong nvfp4 block size");

struct block_q1_0 { half d; uint8_t qs[QK1_0 / 8]; };  // bit set: +d, clear: -d
static_assert(sizeof(block_q1_0) == 2 + QK1_0 / 8, "wrong q1_0 block size");

struct block_q2_0 { half d; uint8_t qs[QK2_0 / 4]; };  // 2-bit codes q, value (q - 1) * d
static_assert(sizeof(block_q2_0) == 2 + QK2_0 / 4, "wrong q2_0 block size");

}  // namespace gguf
