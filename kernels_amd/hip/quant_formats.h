// Weight formats inside the kernels: for each GGUF type, the dot of one 32-value group with q8 activations
// (decode GEMVs, int8 dot4 on packed words) and a run of dequantized fp16 values (prefill GEMMs). All reads
// are aligned u32 words; Q6_K uses the 212-byte repacked blocks. Block layouts: gguf/blocks.h.
#pragma once

#include "kernels_amd/hip/amd.h"

// One 32-value group of q8 activations (see Q8QuantizeArgs).
struct Q8Group {
    u32x4 q[2];      // 32 int8, element 4i+j in byte j of word i
    float scale;
    float sum16[2];  // sums of the int8 values 0..15 and 16..31
};

inline Q8Group load_q8_group(const GemvQ8Args& a, uint32_t token, uint32_t group) {
    uint64_t index = static_cast<uint64_t>(token) * (a.n_in / Q8_GROUP) + group;
    Q8Group x;
    x.q[0] = load4(a.xq + index * 8);
    x.q[1] = load4(a.xq + index * 8 + 4);
    x.scale = a.xscale[index];
    x.sum16[0] = a.xsum[index * 2];
    x.sum16[1] = a.xsum[index * 2 + 1];
    return x;
}

inline uint32_t byte_of(uint32_t word, uint32_t i) { return (word >> (8 * i)) & 0xff; }
inline int32_t sbyte_of(uint32_t word, uint32_t i) { return static_cast<int8_t>(byte_of(word, i)); }

// Sum over 8 words of dot4(w[i], x[i]) for weights already unpacked to int8 bytes.
template <class Unpack>
inline int32_t dot32(const u32x4 w[2], const u32x4 x[2], Unpack unpack) {
    int32_t dot = 0;
    for (uint32_t i = 0; i < 8; i++) dot = dot4_i8(unpack(w[i / 4][i % 4], i), x[i / 4][i % 4], dot);
    return dot;
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block, from its 12 scale bytes
// (block words 1..3); sub-blocks 4..7 keep their top 2 bits in the top bits of bytes 0..7.
struct ScaleMin {
    float scale, min;
};
inline ScaleMin k_scale_min(const uint32_t* block, uint32_t j) {
    uint32_t w1 = load_nt(block + 1), w2 = load_nt(block + 2), w3 = load_nt(block + 3);
    uint32_t b = j % 4;
    if (j < 4) return {static_cast<float>(byte_of(w1, b) & 63), static_cast<float>(byte_of(w2, b) & 63)};
    return {static_cast<float>((byte_of(w3, b) & 15) | ((byte_of(w1, b) >> 6) << 4)),
            static_cast<float>((byte_of(w3, b) >> 4) | ((byte_of(w2, b) >> 6) << 4))};
}

// The iq4_nl code book as int8 bytes, looked up 4 nibbles at a time with three v_perm_b32: one for entries
// 0-7, one for 8-15, one to pick per byte by bit 3 (perm selectors 8-15 give junk, which the pick discards).
inline uint32_t iq4nl_lookup(uint32_t nibbles) {
    uint32_t low = perm_b32(0xF6EADDCF, 0xBFAD9881, nibbles);                  // -127 -104 -83 -65 -49 -35 -22 -10
    uint32_t high = perm_b32(0x71594535, 0x26190D01, nibbles & 0x07070707);    // 1 13 25 38 53 69 89 113
    return perm_b32(high, low, 0x03020100 | ((nibbles & 0x08080808) >> 1));
}

// Writes N dequantized values k..k+N-1 of one row as fp16 (N = 4, 8 or 16 and k % N == 0).
// Each format computes the value as ggml's reference dequantizer does, then rounds it to fp16 once.

struct FormatQ4K {  // 144 bytes: d, dmin, scales[12], qs[128]
    static constexpr uint32_t BLOCK_ELEMS = 256, BLOCK_WORDS = 36;
    static const uint32_t* block(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k) {
        return w + (static_cast<uint64_t>(row) * (n_in / BLOCK_ELEMS) + k / BLOCK_ELEMS) * BLOCK_WORDS;
    }
    static float group_dot(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t group, const Q8Group& x) {
        const uint32_t* b = block(w, row, n_in, group * 32);
        uint32_t j = group % 8, shift = (j & 1) * 4;  // sub-blocks 2c and 2c+1 share bytes: low, high nibbles
        const uint32_t* qs = b + 4 + (j / 2) * 8;
        u32x4 q[2] = {load4_nt(qs), load4_nt(qs + 4)};
        int32_t dot = dot32(q, x.q, [shift](uint32_t word, uint32_t) { return (word >> shift) & 0x0f0f0f0fu; });
        uint32_t head = load_nt(b);
        ScaleMin sm = k_scale_min(b, j);
        return x.scale * (half_lo(head) * sm.scale * static_cast<float>(dot) -
                          half_hi(head) * sm.min * (x.sum16[0] + x.sum16[1]));
    }
    template <uint32_t N>
    static void dequant(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k, _Float16* out) {
        const uint32_t* b = block(w, row, n_in, k);
        uint32_t j = (k % BLOCK_ELEMS) / 32, shift = (j & 1) * 4;
        const uint32_t* qs = b + 4 + (j / 2) * 8 + (k % 32) / 4;
        uint32_t head = load_nt(b);
        ScaleMin sm = k_scale_min(b, j);
        float d1 = half_lo(head) * sm.scale, m1 = half_hi(head) * sm.min;
        for (uint32_t i = 0; i < N / 4; i++) {
            uint32_t word = load_nt(qs + i) >> shift;
            for (uint32_t e = 0; e < 4; e++) out[4 * i + e] = static_cast<_Float16>(d1 * static_cast<float>(byte_of(word, e) & 15) - m1);
        }
    }
};

struct FormatQ5K {  // 176 bytes: d, dmin, scales[12], qh[32], qs[128]
    static constexpr uint32_t BLOCK_ELEMS = 256, BLOCK_WORDS = 44;
    static const uint32_t* block(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k) {
        return w + (static_cast<uint64_t>(row) * (n_in / BLOCK_ELEMS) + k / BLOCK_ELEMS) * BLOCK_WORDS;
    }
    static float group_dot(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t group, const Q8Group& x) {
        const uint32_t* b = block(w, row, n_in, group * 32);
        uint32_t j = group % 8, shift = (j & 1) * 4;
        const uint32_t* qs = b + 12 + (j / 2) * 8;
        u32x4 q[2] = {load4_nt(qs), load4_nt(qs + 4)};
        u32x4 qh[2] = {load4_nt(b + 4), load4_nt(b + 8)};  // bit j of byte l: the 5th bit of element l
        int32_t dot = 0;
        for (uint32_t i = 0; i < 8; i++) {
            uint32_t v = ((q[i / 4][i % 4] >> shift) & 0x0f0f0f0fu) | (((qh[i / 4][i % 4] >> j) & 0x01010101u) << 4);
            dot = dot4_i8(v, x.q[i / 4][i % 4], dot);
        }
        uint32_t head = load_nt(b);
        ScaleMin sm = k_scale_min(b, j);
        return x.scale * (half_lo(head) * sm.scale * static_cast<float>(dot) -
                          half_hi(head) * sm.min * (x.sum16[0] + x.sum16[1]));
    }
    template <uint32_t N>
    static void dequant(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k, _Float16* out) {
        const uint32_t* b = block(w, row, n_in, k);
        uint32_t j = (k % BLOCK_ELEMS) / 32, shift = (j & 1) * 4;
        const uint32_t* qs = b + 12 + (j / 2) * 8 + (k % 32) / 4;
        const uint32_t* qh = b + 4 + (k % 32) / 4;
        uint32_t head = load_nt(b);
        ScaleMin sm = k_scale_min(b, j);
        float d1 = half_lo(head) * sm.scale, m1 = half_hi(head) * sm.min;
        for (uint32_t i = 0; i < N / 4; i++) {
            uint32_t v = ((load_nt(qs + i) >> shift) & 0x0f0f0f0fu) | (((load_nt(qh + i) >> j) & 0x01010101u) << 4);
            for (uint32_t e = 0; e < 4; e++) out[4 * i + e] = static_cast<_Float16>(d1 * static_cast<float>(byte_of(v, e)) - m1);
        }
    }
};

// Q6_K repacked to 212 bytes: ql[128] @0, qh[64] @128, int8 scales[16] @192, d @208, 2 zero bytes.
// Group j (0..7) of a block: half h = j/4 covers ql[64h..64h+64), qh[32h..32h+32); quarter s = j%4 takes
// ql bytes 32(s&1).. (low nibbles for s<2, high for s>=2) and qh bits 2s..2s+1.
struct FormatQ6K {
    static constexpr uint32_t BLOCK_ELEMS = 256, BLOCK_WORDS = 53;
    static const uint32_t* block(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k) {
        return w + (static_cast<uint64_t>(row) * (n_in / BLOCK_ELEMS) + k / BLOCK_ELEMS) * BLOCK_WORDS;
    }
    static uint32_t quant_word(uint32_t ql, uint32_t qh, uint32_t j) {  // 4 values 0..63 (q + 32)
        return ((ql >> (4 * ((j % 4) / 2))) & 0x0f0f0f0fu) | (((qh >> (2 * (j % 4))) & 0x03030303u) << 4);
    }
    static float group_dot(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t group, const Q8Group& x) {
        const uint32_t* b = block(w, row, n_in, group * 32);
        uint32_t j = group % 8;
        const uint32_t* ql = b + 16 * (j / 4) + 8 * (j % 2);
        const uint32_t* qh = b + 32 + 8 * (j / 4);
        u32x4 l[2] = {load4_nt(ql), load4_nt(ql + 4)}, h[2] = {load4_nt(qh), load4_nt(qh + 4)};
        int32_t dot[2] = {0, 0};  // the two 16-value halves have their own scales
        for (uint32_t i = 0; i < 8; i++)
            dot[i / 4] = dot4_i8(quant_word(l[i / 4][i % 4], h[i / 4][i % 4], j), x.q[i / 4][i % 4], dot[i / 4]);
        uint32_t scales = load_nt(b + 48 + j / 2);
        float sc0 = static_cast<float>(sbyte_of(scales, 2 * (j % 2))), sc1 = static_cast<float>(sbyte_of(scales, 2 * (j % 2) + 1));
        // values are stored +32: subtract 32 * (sum of the activations) per half
        float acc = sc0 * (static_cast<float>(dot[0]) - 32.0f * x.sum16[0]) + sc1 * (static_cast<float>(dot[1]) - 32.0f * x.sum16[1]);
        return x.scale * half_lo(load_nt(b + 52)) * acc;
    }
    template <uint32_t N>
    static void dequant(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k, _Float16* out) {
        const uint32_t* b = block(w, row, n_in, k);
        uint32_t j = (k % BLOCK_ELEMS) / 32, within = (k % 32) / 4;
        const uint32_t* ql = b + 16 * (j / 4) + 8 * (j % 2) + within;
        const uint32_t* qh = b + 32 + 8 * (j / 4) + within;
        float d = half_lo(load_nt(b + 52));
        uint32_t scales = load_nt(b + 48 + j / 2);
        for (uint32_t i = 0; i < N / 4; i++) {
            float dsc = d * static_cast<float>(sbyte_of(scales, 2 * (j % 2) + (within + i) / 4));
            uint32_t v = quant_word(load_nt(ql + i), load_nt(qh + i), j);
            for (uint32_t e = 0; e < 4; e++) out[4 * i + e] = static_cast<_Float16>(dsc * static_cast<float>(static_cast<int32_t>(byte_of(v, e)) - 32));
        }
    }
};

// IQ4_XS, 136 bytes: d, scales_h u16, scales_l[4], qs[128]; 6-bit sub-block scales (bias 32), 4-bit
// indices into the iq4_nl code book, low nibbles = values 0..15 of a sub-block, high nibbles = 16..31.
struct FormatIQ4XS {
    static constexpr uint32_t BLOCK_ELEMS = 256, BLOCK_WORDS = 34;
    static const uint32_t* block(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k) {
        return w + (static_cast<uint64_t>(row) * (n_in / BLOCK_ELEMS) + k / BLOCK_ELEMS) * BLOCK_WORDS;
    }
    static float scale(const uint32_t* b, uint32_t j) {  // d * (ls - 32)
        uint32_t head = load_nt(b), low = byte_of(load_nt(b + 1), j / 2);
        int32_t ls = static_cast<int32_t>(((low >> (4 * (j % 2))) & 15) | (((head >> (16 + 2 * j)) & 3) << 4));
        return half_lo(head) * static_cast<float>(ls - 32);
    }
    static float group_dot(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t group, const Q8Group& x) {
        const uint32_t* b = block(w, row, n_in, group * 32);
        uint32_t j = group % 8;
        u32x4 qs = load4_nt(b + 2 + 4 * j);
        int32_t dot = 0;
        for (uint32_t i = 0; i < 4; i++) dot = dot4_i8(iq4nl_lookup(qs[i] & 0x0f0f0f0fu), x.q[0][i], dot);
        for (uint32_t i = 0; i < 4; i++) dot = dot4_i8(iq4nl_lookup((qs[i] >> 4) & 0x0f0f0f0fu), x.q[1][i], dot);
        return x.scale * scale(b, j) * static_cast<float>(dot);
    }
    template <uint32_t N>
    static void dequant(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k, _Float16* out) {
        const uint32_t* b = block(w, row, n_in, k);
        uint32_t j = (k % BLOCK_ELEMS) / 32, within = k % 32;
        float dl = scale(b, j);
        const uint32_t* qs = b + 2 + 4 * j + (within % 16) / 4;
        for (uint32_t i = 0; i < N / 4; i++) {
            uint32_t v = iq4nl_lookup((load_nt(qs + i) >> (within / 16 * 4)) & 0x0f0f0f0fu);
            for (uint32_t e = 0; e < 4; e++) out[4 * i + e] = static_cast<_Float16>(dl * static_cast<float>(sbyte_of(v, e)));
        }
    }
};

// Q8_0 (34 bytes) and Q4_0 (18 bytes) blocks are only 2-byte aligned: read the aligned words covering
// the data and shift by 2 bytes with v_perm_b32 (selector 0x05040302 takes bytes 2..5 of {hi, lo}).
// Data that is 4-byte aligned is read as it is: one word more would read past the end of a weight
// whose last block ends on a page boundary.
template <uint32_t WORDS>
inline void load_words_2aligned(const uint32_t* w, uint64_t byte_offset, uint32_t* out) {
    const uint32_t* p = w + byte_offset / 4;
    if (!(byte_offset & 2)) {
        for (uint32_t i = 0; i < WORDS; i++) out[i] = load_nt(p + i);
        return;
    }
    uint32_t raw[WORDS + 1];  // the last word starts inside the data: it never crosses the weight's end
    for (uint32_t i = 0; i <= WORDS; i++) raw[i] = load_nt(p + i);
    for (uint32_t i = 0; i < WORDS; i++) out[i] = perm_b32(raw[i + 1], raw[i], 0x05040302u);
}
inline float load_half_2aligned(const uint32_t* w, uint64_t byte_offset) {
    uint32_t word = load_nt(w + byte_offset / 4);
    return half_to_float((byte_offset & 2) ? word >> 16 : word & 0xffff);
}

struct FormatQ80 {  // d, qs int8[32]
    static constexpr uint32_t BLOCK_ELEMS = 32, BLOCK_BYTES = 34;
    static uint64_t offset(uint32_t row, uint32_t n_in, uint32_t k) {
        return (static_cast<uint64_t>(row) * (n_in / BLOCK_ELEMS) + k / BLOCK_ELEMS) * BLOCK_BYTES;
    }
    static float group_dot(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t group, const Q8Group& x) {
        uint64_t block = offset(row, n_in, group * 32);
        uint32_t qs[8];
        load_words_2aligned<8>(w, block + 2, qs);
        int32_t dot = 0;
        for (uint32_t i = 0; i < 8; i++) dot = dot4_i8(qs[i], x.q[i / 4][i % 4], dot);
        return x.scale * load_half_2aligned(w, block) * static_cast<float>(dot);
    }
    template <uint32_t N>
    static void dequant(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k, _Float16* out) {
        uint64_t block = offset(row, n_in, k);
        uint32_t qs[N / 4];
        load_words_2aligned<N / 4>(w, block + 2 + k % 32, qs);
        float d = load_half_2aligned(w, block);
        for (uint32_t i = 0; i < N; i++) out[i] = static_cast<_Float16>(static_cast<float>(sbyte_of(qs[i / 4], i % 4)) * d);
    }
};

struct FormatQ40 {  // d, qs[16]: low nibbles = values 0..15, high nibbles = 16..31, value = (q - 8) * d
    static constexpr uint32_t BLOCK_ELEMS = 32, BLOCK_BYTES = 18;
    static uint64_t offset(uint32_t row, uint32_t n_in, uint32_t k) {
        return (static_cast<uint64_t>(row) * (n_in / BLOCK_ELEMS) + k / BLOCK_ELEMS) * BLOCK_BYTES;
    }
    static float group_dot(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t group, const Q8Group& x) {
        uint64_t block = offset(row, n_in, group * 32);
        uint32_t qs[4];
        load_words_2aligned<4>(w, block + 2, qs);
        int32_t dot = 0;
        for (uint32_t i = 0; i < 4; i++) dot = dot4_i8(qs[i] & 0x0f0f0f0fu, x.q[0][i], dot);
        for (uint32_t i = 0; i < 4; i++) dot = dot4_i8((qs[i] >> 4) & 0x0f0f0f0fu, x.q[1][i], dot);
        float sum = x.sum16[0] + x.sum16[1];
        return x.scale * load_half_2aligned(w, block) * (static_cast<float>(dot) - 8.0f * sum);
    }
    template <uint32_t N>
    static void dequant(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k, _Float16* out) {
        uint64_t block = offset(row, n_in, k);
        uint32_t qs[N / 4];  // N values come from N bytes: k%16.. and the nibble of half k%32/16
        load_words_2aligned<N / 4>(w, block + 2 + k % 16, qs);
        float d = load_half_2aligned(w, block);
        uint32_t shift = (k % 32) / 16 * 4;
        for (uint32_t i = 0; i < N; i++) {
            int32_t q = static_cast<int32_t>((byte_of(qs[i / 4], i % 4) >> shift) & 15);
            out[i] = static_cast<_Float16>(static_cast<float>(q - 8) * d);
        }
    }
};

struct FormatF16 {  // dense fp16 rows (GEMM only)
    static constexpr uint32_t BLOCK_ELEMS = 1;
    template <uint32_t N>
    static void dequant(const uint32_t* w, uint32_t row, uint32_t n_in, uint32_t k, _Float16* out) {
        const uint32_t* p = w + (static_cast<uint64_t>(row) * n_in + k) / 2;
        for (uint32_t i = 0; i < N / 2; i++) {
            uint32_t word = load_nt(p + i);
            out[2 * i] = __builtin_bit_cast(_Float16, static_cast<uint16_t>(word & 0xffff));
            out[2 * i + 1] = __builtin_bit_cast(_Float16, static_cast<uint16_t>(word >> 16));
        }
    }
};
