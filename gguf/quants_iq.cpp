// Reference dequantization of the lattice ("IQ") formats, bit-exact with ggml's dequantize_row_iq*.
// Each 32-element sub-block is 4 groups of 8 (or 8 of 4) values picked from a grid table
// (gguf/quant_tables.cpp), with per-group sign bits and a per-sub-block scale.
#include "gguf/blocks.h"
#include "gguf/quant_tables.h"
#include "gguf/quants_impl.h"
#include "gguf/types.h"

#include <cstring>

namespace gguf::ref {

namespace {

using namespace tables;

constexpr float IQ1S_DELTA = 0.125f;

// Byte j of a packed grid entry.
inline uint8_t grid_byte(uint64_t entry, int j) { return static_cast<uint8_t>(entry >> (8 * j)); }
inline int8_t grid_sbyte(uint64_t entry, int j) { return static_cast<int8_t>(entry >> (8 * j)); }

// y[0..8) = scale · grid bytes, negated where the sign byte has bit j set.
void emit8(float* y, float scale, uint64_t grid, uint8_t signs) {
    for (int j = 0; j < 8; j++) y[j] = scale * grid_byte(grid, j) * (signs & kmask_iq2xs[j] ? -1.0f : 1.0f);
}

// As emit8, from two 4-byte grid entries (the iq3 formats).
void emit4x2(float* y, float scale, uint32_t grid_lo, uint32_t grid_hi, uint8_t signs) {
    uint64_t grid = grid_lo | static_cast<uint64_t>(grid_hi) << 32;
    emit8(y, scale, grid, signs);
}

uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

}  // namespace

// Per sub-block: u32 a0 holds 4 grid indices (one per byte), u32 a1 holds four 7-bit sign
// indices and, in its top 4 bits, the scale.
void dequantize_iq2_xxs(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_iq2_xxs*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        auto qs = reinterpret_cast<const uint8_t*>(b[i].qs);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            uint32_t a0 = load_u32(qs + 8 * ib), a1 = load_u32(qs + 8 * ib + 4);
            float db = d * (0.5f + (a1 >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++, y += 8)
                emit8(y, db, iq2xxs_grid[(a0 >> (8 * l)) & 255], ksigns_iq2xs[(a1 >> (7 * l)) & 127]);
        }
    }
}

// Each u16 q: 9-bit grid index, 7-bit sign index. Scale nibble: low for groups 0-1, high for 2-3.
void dequantize_iq2_xs(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_iq2_xs*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            float db[2] = {d * (0.5f + (b[i].scales[ib] & 15)) * 0.25f, d * (0.5f + (b[i].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                uint16_t q;
                std::memcpy(&q, reinterpret_cast<const uint8_t*>(b[i].qs) + 2 * (4 * ib + l), 2);
                emit8(y, db[l / 2], iq2xs_grid[q & 511], ksigns_iq2xs[q >> 9]);
            }
        }
    }
}

// 10-bit grid index: 8 bits in qs, 2 bits from qh[ib]; explicit sign bytes after the indices.
void dequantize_iq2_s(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_iq2_s*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        const uint8_t* signs = b[i].qs + QK_K / 8;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            float db[2] = {d * (0.5f + (b[i].scales[ib] & 15)) * 0.25f, d * (0.5f + (b[i].scales[ib] >> 4)) * 0.25f};
            for (int l = 0; l < 4; l++, y += 8) {
                int index = b[i].qs[4 * ib + l] | ((b[i].qh[ib] << (8 - 2 * l)) & 0x300);
                emit8(y, db[l / 2], iq2s_grid[index], signs[4 * ib + l]);
            }
        }
    }
}

// 64 bytes of 8-bit grid indices (two 4-value entries per group), then per sub-block a u32 with
// four 7-bit sign indices and the scale in its top 4 bits.
void dequantize_iq3_xxs(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_iq3_xxs*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        const uint8_t* qs = b[i].qs;
        const uint8_t* scales_and_signs = qs + QK_K / 4;
        for (int ib = 0; ib < QK_K / 32; ib++, qs += 8) {
            uint32_t a = load_u32(scales_and_signs + 4 * ib);
            float db = d * (0.5f + (a >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++, y += 8)
                emit4x2(y, db, iq3xxs_grid[qs[2 * l]], iq3xxs_grid[qs[2 * l + 1]], ksigns_iq2xs[(a >> (7 * l)) & 127]);
        }
    }
}

// 9-bit grid indices (high bit from qh[ib]), explicit sign bytes, odd scales 1 + 2·nibble.
void dequantize_iq3_s(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_iq3_s*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            float db = d * (1 + 2 * ((b[i].scales[ib / 2] >> (4 * (ib % 2))) & 15));
            const uint8_t* qs = b[i].qs + 8 * ib;
            int qh = b[i].qh[ib];
            for (int l = 0; l < 4; l++, y += 8) {
                int lo = qs[2 * l] | ((qh << (8 - 2 * l)) & 256);
                int hi = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
                emit4x2(y, db, iq3s_grid[lo], iq3s_grid[hi], b[i].signs[4 * ib + l]);
            }
        }
    }
}

// iq1_s: 11-bit indices into a {-1, 0, 1} grid, shifted by ±delta; qh[ib] holds the 3 high index
// bits per group, a 3-bit scale and the delta's sign.
void dequantize_iq1_s(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_iq1_s*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            uint16_t qh;
            std::memcpy(&qh, reinterpret_cast<const uint8_t*>(b[i].qh) + 2 * ib, 2);
            float dl = d * (2 * ((qh >> 12) & 7) + 1);
            float delta = qh & 0x8000 ? -IQ1S_DELTA : IQ1S_DELTA;
            for (int l = 0; l < 4; l++, y += 8) {
                uint64_t grid = iq1s_grid[b[i].qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
                for (int j = 0; j < 8; j++) y[j] = dl * (grid_sbyte(grid, j) + delta);
            }
        }
    }
}

// iq1_m: as iq1_s, but the fp16 scale is spread over the top nibbles of the 4 u16 scale words,
// each pair of groups has its own 3-bit scale and each group its own delta sign.
void dequantize_iq1_m(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_iq1_m*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint16_t sc[4];
        std::memcpy(sc, b[i].scales, sizeof sc);
        auto d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        float d = f16_to_f32(d_bits);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            float dl[2] = {d * (2 * ((sc[ib / 2] >> (6 * (ib % 2))) & 7) + 1),
                           d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7) + 1)};
            const uint8_t* qs = b[i].qs + 4 * ib;
            const uint8_t* qh = b[i].qh + 2 * ib;
            for (int l = 0; l < 4; l++, y += 8) {
                uint8_t h = qh[l / 2];
                int index = qs[l] | ((l % 2 == 0 ? h << 8 : h << 4) & 0x700);
                float delta = h & (l % 2 == 0 ? 0x08 : 0x80) ? -IQ1S_DELTA : IQ1S_DELTA;
                for (int j = 0; j < 8; j++) y[j] = dl[l / 2] * (grid_sbyte(iq1s_grid[index], j) + delta);
            }
        }
    }
}

void dequantize_iq4_nl(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_iq4_nl*>(x);
    for (int64_t i = 0; i < n / QK4_NL; i++, y += QK4_NL) {
        float d = f16_to_f32(b[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * kvalues_iq4nl[b[i].qs[j] & 15];
            y[j + QK4_NL / 2] = d * kvalues_iq4nl[b[i].qs[j] >> 4];
        }
    }
}

// iq4_xs: the iq4_nl codebook per 32-element sub-block, with a 6-bit scale (bias 32) split
// into a low nibble (scales_l) and 2 high bits (scales_h).
void dequantize_iq4_xs(const void* x, float* y, int64_t n) {
    auto b = static_cast<const block_iq4_xs*>(x);
    for (int64_t i = 0; i < n / QK_K; i++) {
        float d = f16_to_f32(b[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
            int ls = ((b[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | ((b[i].scales_h >> (2 * ib)) & 3) << 4;
            float dl = d * (ls - 32);
            const uint8_t* qs = b[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * kvalues_iq4nl[qs[j] & 15];
                y[j + 16] = dl * kvalues_iq4nl[qs[j] >> 4];
            }
        }
    }
}

}  // namespace gguf::ref
