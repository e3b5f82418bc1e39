// AVX2 internals: per-type decoders from raw GGUF blocks to the codes-and-scales view
// (kernels.h), 32 elements (one ymm of codes) at a time, in natural element order.
// Include only from *_avx2.cpp (compiled with -mavx2 -mfma -mf16c).
#pragma once

#include "devices/cpu/kernels/kernels_impl.h"

#include <immintrin.h>

#include <cstring>

namespace cpu_kernels::avx2 {

// e^x for x ≤ 0 (about 1 ulp; below −87 a value near 1e-38 instead of less: negligible in a sum that
// holds e^0 = 1): Cody-Waite reduction and Cephes' expf polynomial, 2^n built in the exponent bits.
static inline __m256 exp_ps(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(pow2n));
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
// 32-element block types: codes(b) of one block; their scale d is the fp16 at offset 0 and, with
// kMinField, the min m at offset 2 (read four blocks at a time by four_halves).
// 256-element super-block types: unit(b) gives the group scales and offsets (groups 0-7 in [0], 8-15 in
// [1]); codes(b, c) the codes of chunk c (32 elements).

// fp16 fields at p, p + stride, p + 2·stride, p + 3·stride.
static inline __m128 four_halves(const uint8_t* p, int stride) {
    const uint64_t h = load_u16(p) | static_cast<uint64_t>(load_u16(p + stride)) << 16 |
                       static_cast<uint64_t>(load_u16(p + 2 * stride)) << 32 | static_cast<uint64_t>(load_u16(p + 3 * stride)) << 48;
    return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(h)));
}

struct DecQ8_0 {
    static constexpr int kUnit = 32, kBpb = 34;
    static constexpr bool kMinField = false;
    static __m256i codes(const uint8_t* b) {
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(b + 2)), _mm256_set1_epi8(static_cast<char>(0x80)));
    }
};

struct DecQ4_0 {
    static constexpr int kUnit = 32, kBpb = 18;
    static constexpr bool kMinField = false;
    static __m256i codes(const uint8_t* b) { return nibbles_32(b + 2); }
};

struct DecQ4_1 {
    static constexpr int kUnit = 32, kBpb = 20;
    static constexpr bool kMinField = true;
    static __m256i codes(const uint8_t* b) { return nibbles_32(b + 4); }
};

struct DecQ5_0 {
    static constexpr int kUnit = 32, kBpb = 22;
    static constexpr bool kMinField = false;
    static __m256i codes(const uint8_t* b) {
        return _mm256_or_si256(nibbles_32(b + 6), _mm256_and_si256(expand_bits(load_u32(b + 2)), _mm256_set1_epi8(16)));
    }
};

struct DecQ5_1 {
    static constexpr int kUnit = 32, kBpb = 24;
    static constexpr bool kMinField = true;
    static __m256i codes(const uint8_t* b) {
        return _mm256_or_si256(nibbles_32(b + 8), _mm256_and_si256(expand_bits(load_u32(b + 4)), _mm256_set1_epi8(16)));
    }
};

struct DecIq4Nl {
    static constexpr int kUnit = 32, kBpb = 18;
    static constexpr bool kMinField = false;
    static __m256i codes(const uint8_t* b) { return _mm256_shuffle_epi8(iq4nl_table(), nibbles_32(b + 2)); }
};

struct UnitScales {
    __m256 s[2];  // group scales: groups 0-7, 8-15
    __m256 o[2];  // group offsets (types with mins)
};

// 16 signed 8-bit values as two vectors of 8 floats, times d.
static inline void bytes_to_floats(__m128i v, bool is_signed, __m256 d, __m256 out[2]) {
    const __m128i hi = _mm_unpackhi_epi64(v, v);
    out[0] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v)));
    out[1] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(is_signed ? _mm256_cvtepi8_epi32(hi) : _mm256_cvtepu8_epi32(hi)));
}

static inline __m256 half_bcast(const uint8_t* p) { return _mm256_set1_ps(half_to_float(load_u16(p))); }

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
        return {{_mm256_mul_ps(half_bcast(b), _mm256_cvtepi32_ps(ls)), _mm256_setzero_ps()}, {}};
    }
    static __m256i codes(const uint8_t* b, int c) { return _mm256_shuffle_epi8(iq4nl_table(), nibbles_32(b + 8 + 16 * c)); }
};

struct DecQ2_K {  // scales[16] @0, qs[64] @16, d @80, dmin @82
    static constexpr int kUnit = 256, kBpb = 84;
    static UnitScales unit(const uint8_t* b) {
        const __m128i sc = _mm_loadu_si128((const __m128i*)b);
        UnitScales us;
        bytes_to_floats(_mm_and_si128(sc, _mm_set1_epi8(15)), false, half_bcast(b + 80), us.s);
        bytes_to_floats(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(15)), false,
                        _mm256_sub_ps(_mm256_setzero_ps(), half_bcast(b + 82)), us.o);
        return us;
    }
    static __m256i codes(const uint8_t* b, int c) { return plane_32(b + 16 + 32 * (c / 4), 2 * (c % 4), 3); }
};

struct DecQ3_K {  // hmask[32] @0, qs[64] @32, scales[12] @96, d @108
    static constexpr int kUnit = 256, kBpb = 110;
    static UnitScales unit(const uint8_t* b) {
        const uint8_t* sc = b + 96;
        alignas(16) int8_t scales[16];
        for (int g = 0; g < 16; g++) {
            const int low = g < 8 ? sc[g] & 15 : sc[g - 8] >> 4;
            scales[g] = static_cast<int8_t>((low | (((sc[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32);
        }
        UnitScales us;
        bytes_to_floats(_mm_load_si128((const __m128i*)scales), true, half_bcast(b + 108), us.s);
        return us;
    }
    static __m256i codes(const uint8_t* b, int c) {
        const __m256i low = plane_32(b + 32 + 32 * (c / 4), 2 * (c % 4), 3);
        const __m256i high = plane_32(b, 4 * (c / 4) + c % 4, 1);  // hmask bit 4h + shift/2
        return _mm256_add_epi8(low, _mm256_slli_epi16(high, 2));
    }
};

// The 8 6-bit scales and 8 6-bit mins of a q4_K/q5_K block (12 bytes at s12; 4 more are read) as 16
// bytes, scales first (see avx512_impl.h).
static inline __m128i k4_scales_mins(const uint8_t* s12) {
    const __m128i raw = _mm_loadu_si128((const __m128i*)s12);
    const __m128i a = _mm_shuffle_epi8(raw, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
    const __m128i top = _mm_shuffle_epi8(raw, _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7));
    const __m128i nibbles = _mm_blend_epi32(a, _mm_srli_epi16(a, 4), 0x8);  // mins j ≥ 4: high nibbles
    const __m128i low = _mm_and_si128(nibbles, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    return _mm_or_si128(low, _mm_and_si128(_mm_srli_epi16(top, 2), _mm_set1_epi8(0x30)));
}

static inline UnitScales k4_unit(const uint8_t* b) {  // q4_K / q5_K
    const __m128i sm = k4_scales_mins(b + 4);
    const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm));
    const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(sm, sm)));
    return {{_mm256_mul_ps(half_bcast(b), sc), _mm256_setzero_ps()},
            {_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), half_bcast(b + 2)), mn), _mm256_setzero_ps()}};
}

struct DecQ4_K {  // d @0, dmin @2, scales[12] @4, qs[128] @16
    static constexpr int kUnit = 256, kBpb = 144;
    static UnitScales unit(const uint8_t* b) { return k4_unit(b); }
    static __m256i codes(const uint8_t* b, int c) { return plane_32(b + 16 + 32 * (c / 2), 4 * (c % 2), 15); }
};

struct DecQ5_K {  // d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48
    static constexpr int kUnit = 256, kBpb = 176;
    static UnitScales unit(const uint8_t* b) { return k4_unit(b); }
    static __m256i codes(const uint8_t* b, int c) {
        const __m256i low = plane_32(b + 48 + 32 * (c / 2), 4 * (c % 2), 15);
        return _mm256_add_epi8(low, _mm256_slli_epi16(plane_32(b + 16, c, 1), 4));
    }
};

struct DecQ6_K {  // ql[128] @0, qh[64] @128, scales[16] @192, d @208
    static constexpr int kUnit = 256, kBpb = 210;
    static UnitScales unit(const uint8_t* b) {
        UnitScales us;
        bytes_to_floats(_mm_loadu_si128((const __m128i*)(b + 192)), true, half_bcast(b + 208), us.s);
        return us;
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

// 8 rows of weights decoded for the matrix-matrix kernel (gemm_avx2.cpp) over a slice of columns.
struct Panel8 {
    uint8_t* codes;  // [len/4][8 rows][4]: dword columns; the types with zero point 128: w = u − 128
    float* s;        // [groups][8 rows]
    float* o;        // [groups][8 rows] (types with mins)
};

// Entry points of the variant's files.
void quantize_rows(gguf::Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out, int64_t row_begin,
                   int64_t row_end);
void swiglu(const float* gate, const float* up, int64_t n, float* out);
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);
void matmul_quant(const Matmul& m, int64_t r0, int64_t r1);  // gemv_avx2.cpp: any number of tokens
void gemm_quant(const Matmul& m, int64_t r0, int64_t r1);    // gemm_avx2.cpp: from a few tokens on
void matmul_float(const Matmul& m, int64_t r0, int64_t r1);
// packed_avx2.cpp: weights packed as panels (Matmul::packed). Any rows, a few tokens:
void gemv_packed(const Matmul& m, int64_t r0, int64_t r1);
// Rows 8·half .. 8·half + 7 of one panel (K columns), columns [k0, k0 + len), into a Panel8.
void panel_to_panel8(gguf::Type type, const uint8_t* panel, int half, int64_t K, int64_t k0, int64_t len, const Panel8& out);
void attention(const Attention& a, int64_t pair_begin, int64_t pair_end);

}  // namespace cpu_kernels::avx2
