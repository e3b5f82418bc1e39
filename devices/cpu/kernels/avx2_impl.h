// AVX2 internals: per-type decoders from raw GGUF blocks to the codes-and-scales view
// (kernels_impl.h), 32 elements (one ymm of codes) at a time, in natural element order.
// Include only from *_avx2.cpp (compiled with -mavx2 -mfma -mf16c).
#pragma once

#include "devices/cpu/kernels/kernels_impl.h"

#include <immintrin.h>

#include <cstring>

namespace cpu_kernels::avx2 {

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

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// The 32 codes of a 32-element nibble block (low nibbles are elements 0-15).
static inline __m256i nibbles_32(const uint8_t* qs) {
    const __m128i q = _mm_loadu_si128((const __m128i*)qs);
    const __m128i m = _mm_set1_epi8(0x0F);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m), _mm_and_si128(q, m));
}

// 32 bytes shifted right by `shift` and masked: a 2- or 4-bit plane of a K-quant block.
static inline __m256i plane_32(const uint8_t* p, int shift, int mask) {
    return _mm256_and_si256(_mm256_srli_epi16(_mm256_loadu_si256((const __m256i*)p), shift),
                            _mm256_set1_epi8(static_cast<char>(mask)));
}

// 0xFF in the bytes whose bit is set in the 32-bit mask `bits` (bit i ↔ byte i), else 0.
static inline __m256i expand_bits(uint32_t bits) {
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                               _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
    const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

static inline __m256i iq4nl_table() {
    // kvalues_iq4nl + 128, in each 128-bit lane for vpshufb
    return _mm256_setr_epi8(1, 24, 45, 63, 79, 93, 106, 118, (char)129, (char)141, (char)153, (char)166, (char)181,
                            (char)197, (char)217, (char)241, 1, 24, 45, 63, 79, 93, 106, 118, (char)129, (char)141,
                            (char)153, (char)166, (char)181, (char)197, (char)217, (char)241);
}

// ---- per-type decoders ---------------------------------------------------------------------------
//
// A type is read in units of kUnit elements (one 32-element block, or one 256-element super-block).
// unit() fills the unit's group scales s[] and offsets o[] (kUnit / group of each); codes() gives the
// codes of chunk c (32 elements) of the unit.

struct DecQ8_0 {
    static constexpr int kUnit = 32, kBpb = 34;
    static void unit(const uint8_t* b, float* s, float*) { s[0] = half_to_float(load_u16(b)); }
    static __m256i codes(const uint8_t* b, int) {
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(b + 2)), _mm256_set1_epi8(static_cast<char>(0x80)));
    }
};

struct DecQ4_0 {
    static constexpr int kUnit = 32, kBpb = 18;
    static void unit(const uint8_t* b, float* s, float*) { s[0] = half_to_float(load_u16(b)); }
    static __m256i codes(const uint8_t* b, int) { return nibbles_32(b + 2); }
};

struct DecQ4_1 {
    static constexpr int kUnit = 32, kBpb = 20;
    static void unit(const uint8_t* b, float* s, float* o) { s[0] = half_to_float(load_u16(b)), o[0] = half_to_float(load_u16(b + 2)); }
    static __m256i codes(const uint8_t* b, int) { return nibbles_32(b + 4); }
};

struct DecQ5_0 {
    static constexpr int kUnit = 32, kBpb = 22;
    static void unit(const uint8_t* b, float* s, float*) { s[0] = half_to_float(load_u16(b)); }
    static __m256i codes(const uint8_t* b, int) {
        return _mm256_or_si256(nibbles_32(b + 6), _mm256_and_si256(expand_bits(load_u32(b + 2)), _mm256_set1_epi8(16)));
    }
};

struct DecQ5_1 {
    static constexpr int kUnit = 32, kBpb = 24;
    static void unit(const uint8_t* b, float* s, float* o) { s[0] = half_to_float(load_u16(b)), o[0] = half_to_float(load_u16(b + 2)); }
    static __m256i codes(const uint8_t* b, int) {
        return _mm256_or_si256(nibbles_32(b + 8), _mm256_and_si256(expand_bits(load_u32(b + 4)), _mm256_set1_epi8(16)));
    }
};

struct DecIq4Nl {
    static constexpr int kUnit = 32, kBpb = 18;
    static void unit(const uint8_t* b, float* s, float*) { s[0] = half_to_float(load_u16(b)); }
    static __m256i codes(const uint8_t* b, int) { return _mm256_shuffle_epi8(iq4nl_table(), nibbles_32(b + 2)); }
};

struct DecIq4Xs {  // d @0, scales_h @2, scales_l[4] @4, qs[128] @8
    static constexpr int kUnit = 256, kBpb = 136;
    static void unit(const uint8_t* b, float* s, float*) {
        const float d = half_to_float(load_u16(b));
        const uint16_t sh = load_u16(b + 2);
        for (int ib = 0; ib < 8; ib++) {
            const int ls = ((b[4 + ib / 2] >> 4 * (ib % 2)) & 15) | (((sh >> 2 * ib) & 3) << 4);
            s[ib] = d * (ls - 32);
        }
    }
    static __m256i codes(const uint8_t* b, int c) { return _mm256_shuffle_epi8(iq4nl_table(), nibbles_32(b + 8 + 16 * c)); }
};

struct DecQ2_K {  // scales[16] @0, qs[64] @16, d @80, dmin @82
    static constexpr int kUnit = 256, kBpb = 84;
    static void unit(const uint8_t* b, float* s, float* o) {
        const float d = half_to_float(load_u16(b + 80)), dmin = half_to_float(load_u16(b + 82));
        for (int g = 0; g < 16; g++) s[g] = d * (b[g] & 15), o[g] = -(dmin * (b[g] >> 4));
    }
    static __m256i codes(const uint8_t* b, int c) { return plane_32(b + 16 + 32 * (c / 4), 2 * (c % 4), 3); }
};

struct DecQ3_K {  // hmask[32] @0, qs[64] @32, scales[12] @96, d @108
    static constexpr int kUnit = 256, kBpb = 110;
    static void unit(const uint8_t* b, float* s, float*) {
        const float d = half_to_float(load_u16(b + 108));
        const uint8_t* sc = b + 96;
        for (int g = 0; g < 16; g++) {
            const int low = g < 8 ? sc[g] & 15 : sc[g - 8] >> 4;
            s[g] = d * ((low | (((sc[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32);
        }
    }
    static __m256i codes(const uint8_t* b, int c) {
        const __m256i low = plane_32(b + 32 + 32 * (c / 4), 2 * (c % 4), 3);
        const __m256i high = plane_32(b, 4 * (c / 4) + c % 4, 1);  // hmask bit 4h + shift/2
        return _mm256_add_epi8(low, _mm256_slli_epi16(high, 2));
    }
};

static inline void k4_unit(const uint8_t* b, float* s, float* o) {  // q4_K / q5_K scales and mins
    const float d = half_to_float(load_u16(b)), dmin = half_to_float(load_u16(b + 2));
    const uint8_t* sc = b + 4;
    for (int j = 0; j < 8; j++) {
        const int scale = j < 4 ? sc[j] & 63 : (sc[j + 4] & 15) | ((sc[j - 4] >> 6) << 4);
        const int min = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
        s[j] = d * scale, o[j] = -(dmin * min);
    }
}

struct DecQ4_K {  // d @0, dmin @2, scales[12] @4, qs[128] @16
    static constexpr int kUnit = 256, kBpb = 144;
    static void unit(const uint8_t* b, float* s, float* o) { k4_unit(b, s, o); }
    static __m256i codes(const uint8_t* b, int c) { return plane_32(b + 16 + 32 * (c / 2), 4 * (c % 2), 15); }
};

struct DecQ5_K {  // d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48
    static constexpr int kUnit = 256, kBpb = 176;
    static void unit(const uint8_t* b, float* s, float* o) { k4_unit(b, s, o); }
    static __m256i codes(const uint8_t* b, int c) {
        const __m256i low = plane_32(b + 48 + 32 * (c / 2), 4 * (c % 2), 15);
        return _mm256_add_epi8(low, _mm256_slli_epi16(plane_32(b + 16, c, 1), 4));
    }
};

struct DecQ6_K {  // ql[128] @0, qh[64] @128, scales[16] @192, d @208
    static constexpr int kUnit = 256, kBpb = 210;
    static void unit(const uint8_t* b, float* s, float*) {
        const float d = half_to_float(load_u16(b + 208));
        for (int g = 0; g < 16; g++) s[g] = d * static_cast<int8_t>(b[192 + g]);
    }
    static __m256i codes(const uint8_t* b, int c) {
        // half n = c/4, quarter i = c%4: ql[64n + 32(i%2)] nibble i/2, qh[32n] bits 2i..2i+1
        const int n = c / 4, i = c % 4;
        const __m256i low = plane_32(b + 64 * n + 32 * (i % 2), 4 * (i / 2), 15);
        return _mm256_or_si256(low, _mm256_slli_epi16(plane_32(b + 128 + 32 * n, 2 * i, 3), 4));
    }
};

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

// Entry points of the variant's files.
void quantize_rows(gguf::Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out, int64_t row_begin,
                   int64_t row_end);
void matmul_quant(const Matmul& m, int64_t r0, int64_t r1);
void matmul_float(const Matmul& m, int64_t r0, int64_t r1);
void attention(const Attention& a, int64_t pair_begin, int64_t pair_end);

}  // namespace cpu_kernels::avx2
