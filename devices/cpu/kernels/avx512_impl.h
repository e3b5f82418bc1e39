// AVX-512 internals: per-type decoders from raw GGUF blocks to the codes-and-scales view
// (kernels.h), 64 elements (one zmm of codes) at a time, in natural element order.
// Include only from *_avx512.cpp. Everything here is static (see kernels_impl.h for why).
#pragma once

#include "devices/cpu/kernels/kernels_impl.h"

#include <immintrin.h>

#include <cstring>

namespace cpu_kernels::avx512 {

// ---- small helpers -------------------------------------------------------------------------------

// e^x to about 1 ulp for x ≤ 0 (down to −∞, which gives 0): Cody-Waite reduction x = n·ln2 + r and a
// degree-7 polynomial (Cephes' expf coefficients) for e^r.
static inline __m512 exp_ps(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));  // e^-104 is below the smallest subnormal
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}


static inline uint16_t load_u16(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}

static inline uint32_t load_u32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

static inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// Lane i of the result is v[idx[i]]: spreads per-group values over the lanes of a chunk.
static inline __m512 spread(const __m512i idx, __m512 v) { return _mm512_permutexvar_ps(idx, v); }

// Lane → group index for a 64-element chunk `c` of a unit, 4 elements (one int32 lane) per lane.
// group 32: lanes 0-7 → group 2c, 8-15 → 2c+1; group 16: lane i → 4c + i/4.
static inline __m512i lane_groups(int group, int c) {
    if (group == 32) return _mm512_set_epi32(2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1, 2 * c + 1,
                                             2 * c + 1, 2 * c + 1, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c, 2 * c);
    const int g = 4 * c;
    return _mm512_set_epi32(g + 3, g + 3, g + 3, g + 3, g + 2, g + 2, g + 2, g + 2, g + 1, g + 1, g + 1, g + 1, g, g, g, g);
}

// [a, a, b, b] of 16-byte pieces, then the low nibbles of the 1st and 3rd and the high nibbles of the
// 2nd and 4th: the codes of two 32-element nibble blocks (low nibbles are elements 0-15).
static inline __m512i nibbles_2x16(const uint8_t* a, const uint8_t* b) {
    const __m512i ab = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i*)a)), 0xFF00,
                                                   _mm_loadu_si128((const __m128i*)b));
    const __m512i shift = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                           0x0004000400040004, 0, 0);
    return _mm512_and_si512(_mm512_srlv_epi16(ab, shift), _mm512_set1_epi8(0x0F));
}

// 32 bytes p, shifted right by s0 (first 32 codes) and s1 (last 32), masked: the 2-, 4-bit planes of
// K-quant blocks.
static inline __m512i planes_2x32(const uint8_t* p, int s0, int s1, int mask) {
    const __m512i pp = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)p));
    const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<short>(s0)), _mm256_set1_epi16(static_cast<short>(s1)), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(pp, shift), _mm512_set1_epi8(static_cast<char>(mask)));
}

// Mask of the 64 codes whose bit is set: bit b0 of bytes p[0..32) for the first 32, b1 for the last 32.
static inline __mmask64 bit_planes(const uint8_t* p, int b0, int b1) {
    const __m512i pp = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)p));
    const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << b0)),
                                            _mm256_set1_epi8(static_cast<char>(1 << b1)), 1);
    return _mm512_test_epi8_mask(pp, bits);
}

// Low (high = 0) or high nibbles of 64 bytes.
static inline __m512i interleaved_nibbles(const uint8_t* p, int high) {
    const __m512i v = _mm512_loadu_si512(p);
    return _mm512_and_si512(high ? _mm512_srli_epi16(v, 4) : v, _mm512_set1_epi8(0x0F));
}

static inline __m512i iq4nl_table() {
    // kvalues_iq4nl + 128, in each 128-bit lane for vpshufb
    const __m128i t = _mm_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129, (char)141, (char)153, (char)166,
                                    (char)181, (char)197, (char)217, (char)241);
    return _mm512_broadcast_i32x4(t);
}

// The 8 6-bit scales and 8 6-bit mins of a q4_K/q5_K block (12 bytes at s12; 4 more are read) as 16
// bytes, scales first. Scale / min j < 4: the low 6 bits of byte j / j+4; j ≥ 4: a nibble of byte j+4
// and the top 2 bits of byte j-4 / j.
static inline __m128i k4_scales_mins(const uint8_t* s12) {
    const __m128i raw = _mm_loadu_si128((const __m128i*)s12);
    const __m128i a = _mm_shuffle_epi8(raw, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i top = _mm_shuffle_epi8(raw, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i nibbles = _mm_mask_blend_epi32(0x8, a, _mm_srli_epi16(a, 4));  // mins j ≥ 4: high nibbles
    const __m128i low = _mm_and_si128(nibbles, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    return _mm_or_si128(low, _mm_and_si128(_mm_srli_epi16(top, 2), _mm_set1_epi8(0x30)));
}

// ---- per-type decoders ---------------------------------------------------------------------------
//
// A type is read in units of kUnit elements (two 32-element blocks, or one 256-element super-block).
// unit(): the unit's group scales (lanes 0..) and, for types with mins, group offsets in `o`.
// codes(): the codes of chunk c (64 elements) of the unit.
// 32-element block types also give codes2() of any two blocks, and scales4() / mins4(): d (or m) of
// four consecutive blocks.

struct UnitScales {
    __m512 s;
    __m512 o;
};

// Two fp16 scales in lanes 0 and 1 (the other lanes are never read).
static inline __m512 two_scales(uint16_t d0, uint16_t d1) {
    const __m128i d = _mm_cvtsi32_si128(static_cast<int>(d0 | static_cast<uint32_t>(d1) << 16));
    return _mm512_castps128_ps512(_mm_cvtph_ps(d));
}

// fp16 fields at p, p + stride, p + 2·stride, p + 3·stride (four consecutive 32-element blocks).
static inline __m128 four_halves(const uint8_t* p, int stride) {
    const uint64_t h = load_u16(p) | static_cast<uint64_t>(load_u16(p + stride)) << 16 |
                       static_cast<uint64_t>(load_u16(p + 2 * stride)) << 32 | static_cast<uint64_t>(load_u16(p + 3 * stride)) << 48;
    return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(h)));
}

// Adds 16 to the codes whose fifth bit is set in the two blocks' 32-bit qh fields.
static inline __m512i add_fifth_bit(__m512i u, const uint8_t* qh0, const uint8_t* qh1) {
    const __mmask64 high = _cvtu64_mask64(load_u32(qh0) | static_cast<uint64_t>(load_u32(qh1)) << 32);
    return _mm512_mask_add_epi8(u, high, u, _mm512_set1_epi8(16));
}

struct DecQ8_0 {
    static constexpr int kUnit = 64, kBpb = 34;
    static __m128 scales4(const uint8_t* b) { return four_halves(b, kBpb); }
    static __m128 mins4(const uint8_t*) { return _mm_setzero_ps(); }
    static UnitScales unit(const uint8_t* b) { return {two_scales(load_u16(b), load_u16(b + kBpb)), _mm512_setzero_ps()}; }
    static __m512i codes(const uint8_t* b, int) { return codes2(b, b + kBpb); }
    static __m512i codes2(const uint8_t* b0, const uint8_t* b1) {
        const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)(b0 + 2))),
                                             _mm256_loadu_si256((const __m256i*)(b1 + 2)), 1);
        return _mm512_xor_si512(q, _mm512_set1_epi8(static_cast<char>(0x80)));  // q + 128
    }
};

struct DecQ4_0 {
    static constexpr int kUnit = 64, kBpb = 18;
    static __m128 scales4(const uint8_t* b) { return four_halves(b, kBpb); }
    static __m128 mins4(const uint8_t*) { return _mm_setzero_ps(); }
    static UnitScales unit(const uint8_t* b) { return {two_scales(load_u16(b), load_u16(b + kBpb)), _mm512_setzero_ps()}; }
    static __m512i codes(const uint8_t* b, int) { return codes2(b, b + kBpb); }
    static __m512i codes2(const uint8_t* b0, const uint8_t* b1) { return nibbles_2x16(b0 + 2, b1 + 2); }
};

struct DecQ4_1 {
    static constexpr int kUnit = 64, kBpb = 20;
    static __m128 scales4(const uint8_t* b) { return four_halves(b, kBpb); }
    static __m128 mins4(const uint8_t* b) { return four_halves(b + 2, kBpb); }
    static UnitScales unit(const uint8_t* b) {
        return {two_scales(load_u16(b), load_u16(b + kBpb)), two_scales(load_u16(b + 2), load_u16(b + kBpb + 2))};
    }
    static __m512i codes(const uint8_t* b, int) { return codes2(b, b + kBpb); }
    static __m512i codes2(const uint8_t* b0, const uint8_t* b1) { return nibbles_2x16(b0 + 4, b1 + 4); }
};

struct DecQ5_0 {
    static constexpr int kUnit = 64, kBpb = 22;
    static __m128 scales4(const uint8_t* b) { return four_halves(b, kBpb); }
    static __m128 mins4(const uint8_t*) { return _mm_setzero_ps(); }
    static UnitScales unit(const uint8_t* b) { return {two_scales(load_u16(b), load_u16(b + kBpb)), _mm512_setzero_ps()}; }
    static __m512i codes(const uint8_t* b, int) { return codes2(b, b + kBpb); }
    static __m512i codes2(const uint8_t* b0, const uint8_t* b1) { return add_fifth_bit(nibbles_2x16(b0 + 6, b1 + 6), b0 + 2, b1 + 2); }
};

struct DecQ5_1 {
    static constexpr int kUnit = 64, kBpb = 24;
    static __m128 scales4(const uint8_t* b) { return four_halves(b, kBpb); }
    static __m128 mins4(const uint8_t* b) { return four_halves(b + 2, kBpb); }
    static UnitScales unit(const uint8_t* b) {
        return {two_scales(load_u16(b), load_u16(b + kBpb)), two_scales(load_u16(b + 2), load_u16(b + kBpb + 2))};
    }
    static __m512i codes(const uint8_t* b, int) { return codes2(b, b + kBpb); }
    static __m512i codes2(const uint8_t* b0, const uint8_t* b1) { return add_fifth_bit(nibbles_2x16(b0 + 8, b1 + 8), b0 + 4, b1 + 4); }
};

struct DecIq4Nl {
    static constexpr int kUnit = 64, kBpb = 18;
    static __m128 scales4(const uint8_t* b) { return four_halves(b, kBpb); }
    static __m128 mins4(const uint8_t*) { return _mm_setzero_ps(); }
    static UnitScales unit(const uint8_t* b) { return DecQ4_0::unit(b); }
    static __m512i codes(const uint8_t* b, int) { return codes2(b, b + kBpb); }
    static __m512i codes2(const uint8_t* b0, const uint8_t* b1) { return _mm512_shuffle_epi8(iq4nl_table(), nibbles_2x16(b0 + 2, b1 + 2)); }
};

struct DecIq4Xs {  // d @0, scales_h @2, scales_l[4] @4, qs[128] @8
    static constexpr int kUnit = 256, kBpb = 136;
    static UnitScales unit(const uint8_t* b) {
        const __m256i j = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i low = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(load_u32(b + 4))), _mm256_slli_epi32(j, 2)),
            _mm256_set1_epi32(15));  // nibble j of scales_l, low nibble first
        const __m256i high = _mm256_and_si256(
            _mm256_srlv_epi32(_mm256_set1_epi32(load_u16(b + 2)), _mm256_add_epi32(j, j)), _mm256_set1_epi32(3));
        const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
        const __m256 s = _mm256_mul_ps(_mm256_set1_ps(half_to_float(load_u16(b))), _mm256_cvtepi32_ps(ls));
        return {_mm512_zextps256_ps512(s), _mm512_setzero_ps()};  // lanes past the 8 groups are zero
    }
    static __m512i codes(const uint8_t* b, int c) {
        // sub-blocks 2c and 2c+1: 16 bytes each, low nibbles first
        const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i*)(b + 8 + 32 * c)));
        const __m512i ab = _mm512_shuffle_i64x2(q, q, _MM_SHUFFLE(1, 1, 0, 0));
        const __m512i shift = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                               0x0004000400040004, 0, 0);
        const __m512i nib = _mm512_and_si512(_mm512_srlv_epi16(ab, shift), _mm512_set1_epi8(0x0F));
        return _mm512_shuffle_epi8(iq4nl_table(), nib);
    }
};

struct DecQ2_K {  // scales[16] @0, qs[64] @16, d @80, dmin @82
    static constexpr int kUnit = 256, kBpb = 84;
    static UnitScales unit(const uint8_t* b) {
        const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)b));
        const __m512 s = _mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(15)));
        const __m512 m = _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4));
        return {_mm512_mul_ps(_mm512_set1_ps(half_to_float(load_u16(b + 80))), s),
                _mm512_mul_ps(_mm512_set1_ps(-half_to_float(load_u16(b + 82))), m)};
    }
    static __m512i codes(const uint8_t* b, int c) {  // half c/2, shifts 4(c%2) and 4(c%2)+2
        return planes_2x32(b + 16 + 32 * (c / 2), 4 * (c % 2), 4 * (c % 2) + 2, 3);
    }
};

struct DecQ3_K {  // hmask[32] @0, qs[64] @32, scales[12] @96, d @108
    static constexpr int kUnit = 256, kBpb = 110;
    static UnitScales unit(const uint8_t* b) {
        // scale g: low 4 bits from nibble (g / 8) of byte g % 8, high 2 bits from bits 2(g/4) of byte 8 + g % 4
        const __m512i g = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        uint8_t lo8[16];
        std::memcpy(lo8, b + 96, 8);
        std::memcpy(lo8 + 8, b + 96, 8);
        const __m512i low = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)lo8)),
                              _mm512_slli_epi32(_mm512_srli_epi32(g, 3), 2)),
            _mm512_set1_epi32(15));
        const __m512i hshift = _mm512_add_epi32(_mm512_slli_epi32(_mm512_and_si512(g, _mm512_set1_epi32(3)), 3),
                                                _mm512_slli_epi32(_mm512_srli_epi32(g, 2), 1));
        const __m512i high = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_set1_epi32(static_cast<int>(load_u32(b + 104))), hshift), _mm512_set1_epi32(3));
        const __m512i scale = _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)), _mm512_set1_epi32(32));
        return {_mm512_mul_ps(_mm512_set1_ps(half_to_float(load_u16(b + 108))), _mm512_cvtepi32_ps(scale)),
                _mm512_setzero_ps()};
    }
    static __m512i codes(const uint8_t* b, int c) {
        const int h = c / 2, pair = c % 2;
        const __m512i low = planes_2x32(b + 32 + 32 * h, 4 * pair, 4 * pair + 2, 3);
        const __mmask64 high = bit_planes(b, 4 * h + 2 * pair, 4 * h + 2 * pair + 1);
        return _mm512_mask_add_epi8(low, high, low, _mm512_set1_epi8(4));
    }
};

struct DecQ4_K {  // d @0, dmin @2, scales[12] @4, qs[128] @16
    static constexpr int kUnit = 256, kBpb = 144;
    static UnitScales unit(const uint8_t* b) { return k_unit(b); }
    static UnitScales k_unit(const uint8_t* b) {
        const __m512 sm = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(k4_scales_mins(b + 4)));
        const __m128 d_dmin = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(b))));
        const __m512 d = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                                               _mm512_castps128_ps512(d_dmin));
        const __m512 v = _mm512_mul_ps(d, sm);  // lanes 0-7: d·sc, 8-15: dmin·m
        const __m512 mins = _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(3, 2, 3, 2));
        return {v, _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(mins), _mm512_set1_epi32(INT32_MIN)))};
    }
    static __m512i codes(const uint8_t* b, int c) { return planes_2x32(b + 16 + 32 * c, 0, 4, 15); }
    // The matrix-vector kernels read 64 bytes of qs at once: chunk 2p takes their low nibbles (groups
    // 4p and 4p+2), chunk 2p+1 the high ones (4p+1, 4p+3); the activations are permuted to match.
    static constexpr bool kGemvInterleaved = true;
    static __m512i gemv_codes(const uint8_t* b, int c) { return interleaved_nibbles(b + 16 + 64 * (c / 2), c % 2); }
};

struct DecQ5_K {  // d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48
    static constexpr int kUnit = 256, kBpb = 176;
    static UnitScales unit(const uint8_t* b) { return DecQ4_K::k_unit(b); }
    static __m512i codes(const uint8_t* b, int c) {
        const __m512i low = planes_2x32(b + 48 + 32 * c, 0, 4, 15);
        return _mm512_mask_add_epi8(low, bit_planes(b + 16, 2 * c, 2 * c + 1), low, _mm512_set1_epi8(16));
    }
    static constexpr bool kGemvInterleaved = true;  // as q4_K
    static __m512i gemv_codes(const uint8_t* b, int c) {
        const __m512i low = interleaved_nibbles(b + 48 + 64 * (c / 2), c % 2);
        const int bit = 4 * (c / 2) + c % 2;  // qh bit of group g is g
        return _mm512_mask_add_epi8(low, bit_planes(b + 16, bit, bit + 2), low, _mm512_set1_epi8(16));
    }
};

struct DecQ6_K {  // ql[128] @0, qh[64] @128, scales[16] @192, d @208
    static constexpr int kUnit = 256, kBpb = 210;
    static UnitScales unit(const uint8_t* b) {
        const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(b + 192))));
        return {_mm512_mul_ps(_mm512_set1_ps(half_to_float(load_u16(b + 208))), sc), _mm512_setzero_ps()};
    }
    static __m512i codes(const uint8_t* b, int c) {
        // half n = c/2: chunk 0 is ql[0..64) low nibbles + qh bits 0-1 / 2-3, chunk 1 the high nibbles + bits 4-5 / 6-7
        const int n = c / 2, upper = c % 2;
        const __m512i ql = _mm512_loadu_si512(b + 64 * n);
        const __m512i low = _mm512_and_si512(upper ? _mm512_srli_epi16(ql, 4) : ql, _mm512_set1_epi8(0x0F));
        const __m512i high = planes_2x32(b + 128 + 32 * n, 4 * upper, 4 * upper + 2, 3);
        return _mm512_or_si512(low, _mm512_slli_epi16(high, 4));
    }
};

}  // namespace cpu_kernels::avx512

namespace cpu_kernels::avx512 {

// Matrix-vector products for few tokens (decode): gemv_avx512.cpp.
void gemv_quant(const Matmul& m, int64_t r0, int64_t r1);

// Matrix-matrix products (prefill): rows packed 16 at a time, tokens 8 at a time (or 16 on AMX tiles).
// gemm_avx512.cpp.
void gemm_quant(const Matmul& m, int64_t r0, int64_t r1);

// A panel of up to 16 rows × K: codes as [K/4 dwords][16 rows] (64 bytes per dword column: the VNNI
// layout of an AMX B tile), then per group the 16 rows' scales and offsets. Rows past n_rows are zero
// (scale 0).
struct Panel {
    uint8_t* codes;  // K · 16 bytes
    float* s;        // n_groups · 16
    float* o;        // n_groups · 16
};

// The AMX kernels (gemm_amx.cpp; run only when amx_active()). They take the same packed panels as the
// AVX-512 ones, with the activations laid out in 16-token tiles, and compute the same integer dot
// products, 16 tokens × 16 rows × one group per tile instruction, with the codes made signed
// (u − zero) so that no zero-point correction is needed.
namespace amx {
// Bytes of the tile-ordered activations of n_tokens tokens.
size_t acts_bytes(int64_t n_tokens, int64_t K, int group);
// The activations' rows (format `act`: Q8_0, Q8_1 or Q8_K; group 32) laid into 16-token blocks
// (tokens past n_tokens are zero) at `mem`, with d_x and, for types with mins, d_x·Σq per group.
void prepare_acts(gguf::Type act, const uint8_t* x, int64_t n_tokens, int64_t K, int group, bool has_min, uint8_t* mem);
// Codes of a packed panel of k_len columns minus the type's zero point, as signed bytes.
void make_signed(const Panel& p, int64_t k_len, int zero);
// As the AVX-512 gemm_tokens, for 32-element groups: 16 panel rows × n_tokens over groups [g0, g0 +
// n_groups) of the activations (`super`: Q8_K ones, n_groups whole super-blocks); adds to y unless
// `first`. Meanwhile the `ahead_bytes` at `ahead` (the next panel's weights) are prefetched into L2, a
// few lines per step, so that unpacking them does not wait on memory.
void gemm_tokens(const Panel& p, int64_t g0, int64_t n_groups, const uint8_t* acts, int64_t n_tokens, int64_t K,
                 bool has_min, bool super, float* y, int64_t y_stride, int n_rows, bool first,
                 const uint8_t* ahead = nullptr, int64_t ahead_bytes = 0);
// F16 and BF16 weights (m.type) with activations of the same type, from 8 tokens on, K a multiple of
// 32: bf16 tiles summing in f32. An F16 value is split exactly into two bf16 (the nearest one and the
// rest, which has at most 3 significant bits), and the four products of the parts are exact, so the
// result differs from the FMA kernel's only by the order of the f32 sums.
void gemm_float(const Matmul& m, int64_t r0, int64_t r1);
}  // namespace amx

// F32/F16/BF16 weights: float_avx512.cpp.
void matmul_float(const Matmul& m, int64_t r0, int64_t r1);

// Weights packed as panels of 16 rows (Matmul::packed), any number of tokens: packed_avx512.cpp.
void gemv_packed(const Matmul& m, int64_t r0, int64_t r1);
// Columns [k0, k0 + k_len) of one packed panel (K columns) as the matrix-matrix kernels' Panel; with
// `signed_codes` (AMX) the codes minus the type's zero point, as make_signed leaves them.
void packed_to_panel(gguf::Type type, const uint8_t* panel, int64_t K, int64_t k0, int64_t k_len, const Panel& p,
                     bool signed_codes = false);

// Activation quantizers: quantize_avx512.cpp.
void quantize_rows(gguf::Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out, int64_t row_begin,
                   int64_t row_end);
void swiglu(const float* gate, const float* up, int64_t n, float* out);
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);
void attention(const Attention& a, int64_t pair_begin, int64_t pair_end);

// The matrix-vector kernels' view of a decoder: by default the natural order of codes().
template <class D>
constexpr bool gemv_interleaved() {
    if constexpr (requires { D::kGemvInterleaved; }) return D::kGemvInterleaved;
    return false;
}
template <class D>
static inline __m512i gemv_codes(const uint8_t* b, int c) {
    if constexpr (gemv_interleaved<D>()) return D::gemv_codes(b, c);
    return D::codes(b, c);
}
// Lane → group index of the gemv chunk c of a 256-element unit.
template <class D>
static inline __m512i gemv_lane_groups(int group, int c) {
    if constexpr (gemv_interleaved<D>()) {
        const int ga = 4 * (c / 2) + c % 2, gb = ga + 2;
        return _mm512_set_epi32(gb, gb, gb, gb, gb, gb, gb, gb, ga, ga, ga, ga, ga, ga, ga, ga);
    }
    return lane_groups(group, c);
}

// In-register transpose of 16 vectors of 16 floats: vector i of the result is lane i of each input.
static inline void transpose16(__m512 v[16]) {
    __m512 t[16];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        v[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        v[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i]), _mm512_castps_pd(t[4 * i + 2])));
        v[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
        v[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[4 * i + 1]), _mm512_castps_pd(t[4 * i + 3])));
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            t[8 * i + j] = _mm512_shuffle_f32x4(v[8 * i + j], v[8 * i + 4 + j], 0x88);
            t[8 * i + 4 + j] = _mm512_shuffle_f32x4(v[8 * i + j], v[8 * i + 4 + j], 0xdd);
        }
#pragma GCC unroll 8
    for (int j = 0; j < 8; j++) {
        v[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        v[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
    }
}

// Calls f.template operator()<Decoder>() for the decoder of a hand-kernel quantized type.
template <class F>
static void with_decoder(gguf::Type t, F&& f) {
    using gguf::Type;
    switch (t) {
        case Type::Q8_0: f.template operator()<DecQ8_0>(); break;
        case Type::Q4_0: f.template operator()<DecQ4_0>(); break;
        case Type::Q4_1: f.template operator()<DecQ4_1>(); break;
        case Type::Q5_0: f.template operator()<DecQ5_0>(); break;
        case Type::Q5_1: f.template operator()<DecQ5_1>(); break;
        case Type::IQ4_NL: f.template operator()<DecIq4Nl>(); break;
        case Type::IQ4_XS: f.template operator()<DecIq4Xs>(); break;
        case Type::Q2_K: f.template operator()<DecQ2_K>(); break;
        case Type::Q3_K: f.template operator()<DecQ3_K>(); break;
        case Type::Q4_K: f.template operator()<DecQ4_K>(); break;
        case Type::Q5_K: f.template operator()<DecQ5_K>(); break;
        case Type::Q6_K: f.template operator()<DecQ6_K>(); break;
        default: break;
    }
}

}  // namespace cpu_kernels::avx512
