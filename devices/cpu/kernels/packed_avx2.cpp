// AVX2 products over weights packed as panels of 16 rows (kernels.h; packed.cpp has the formats). The
// panels are the AVX-512 kernels' layout read as two halves: a 64-byte line holds a 4-byte word of 16
// rows, its first 32 bytes rows 0-7 and its last 32 rows 8-15, so one ymm load gives a word of 8 rows.
// Per type a decoder turns a chunk of a half's codes into dword columns (column j: elements 4j..4j+3
// of the 8 rows) and reads the 8 rows' group scales from the panel's meta. Decode (1-4 tokens) multiplies
// the columns in registers as they stream by; prefill (gemm_avx2.cpp) stores them as a Panel8 and runs
// its tile over them. Codes go through vpmaddubsw as gemm_avx2.cpp describes: unsigned codes times the
// signed quants, small codes summed in int16 before vpmaddwd; the codes with zero point 128 (Q8_0 and
// the IQ4 codebook) as |w| times the quants with w's sign.
#include "devices/cpu/kernels/avx2_impl.h"

#include <algorithm>
#include <type_traits>

namespace cpu_kernels::avx2 {

using gguf::Type;

namespace {

// 2 KiB ahead along a panel's codes, every line (into L1). Intel Xeon AMX held to AVX2, 1B tg32 at 2 /
// 4 / 8 KiB: Q4_K_M 42 / 39 / 37, Q4_0 47 / 42 / 38, Q8_0 29 / 26 / 24, Q6_K 34 / 31 / 28 tok/s; 1 and
// 3 KiB no better than 2.
constexpr int64_t kPrefetchAhead = 2048;


inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i low4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
inline __m256i high4(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F)); }
// 8 fp16 values (one per row of the half) as floats.
inline __m256 halves8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// 8 bytes as 8 unsigned / signed dwords.
inline __m256i bytes8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
inline __m256i sbytes8(const uint8_t* p) { return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

// Bit k (0-7) of each byte of h at bit 4, the rest zero: the fifth bits of Q5_0/Q5_1/Q5_K codes.
inline __m256i fifth_bit(__m256i h, int k) {
    const __m256i s = k < 4 ? _mm256_slli_epi16(h, 4 - k) : k == 4 ? h : _mm256_srli_epi16(h, k - 4);
    return _mm256_and_si256(s, _mm256_set1_epi8(0x10));
}
// Q6_K: bits 2k, 2k + 1 of each byte of h at bits 4, 5.
inline __m256i q6_k_top(__m256i h, int k) {
    const __m256i s = k == 0 ? _mm256_slli_epi16(h, 4) : k == 1 ? _mm256_slli_epi16(h, 2) : k == 2 ? h : _mm256_srli_epi16(h, 2);
    return _mm256_and_si256(s, _mm256_set1_epi8(0x30));
}
// The 4 quants at q in every dword.
inline __m256i bcast4(const int8_t* q) { return _mm256_set1_epi32(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(q)))); }

// Two chains of int16 sums of vpmaddubsw products, a and b: the first product starts them, and after
// the last they are widened under their scales (vpmaddwd) into isum.
inline void chain_pair(__m256i& pa, __m256i& pb, __m256i a, __m256i b, bool first, bool last, __m256i sa, __m256i sb, __m256i& isum) {
    pa = first ? a : _mm256_add_epi16(pa, a);
    pb = first ? b : _mm256_add_epi16(pb, b);
    if (last) isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(pa, sa), _mm256_madd_epi16(pb, sb)));
}

// IQ4_NL's codebook as signed bytes (the panel codes are its indices), in both 128-bit lanes.
inline __m256i iq4_signed_table() {
    return _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113, -127, -104, -83, -65, -49, -35,
                            -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
}

// ---- per-type panel decoders ------------------------------------------------------------------------
//
// A chunk is kChunk elements of the panel's codes (kLines 64-byte lines), holding kChunk / kGroup
// groups. codes(c, gi, col) gives group gi of the chunk whose codes start at c (+32 for rows 8-15) as
// kGroup / 4 dword columns: signed codes w − zero where kSigned, else the unsigned codes u. scales(meta,
// chunk, gi, half, s, o) gives the group's scales s and (kMin) offsets o of the half's 8 rows; meta is
// the panel's meta region. For the generic decode tile also kSigned, kMin, kSuper (Q8_K activations),
// kMetaPerChunk (meta bytes per chunk, for prefetching) and kSums (how many vpmaddubsw results of the
// unsigned codes an int16 lane can sum: 2 · max code · 128 each).

struct P8_0 {
    static constexpr int kChunk = 32, kGroup = 32, kLines = 8, kSums = 1, kMetaPerChunk = 32;
    static constexpr bool kSigned = true, kSuper = false;
    static void codes(const uint8_t* c, int, __m256i* col) {
        for (int k = 0; k < 8; k++) col[k] = _mm256_xor_si256(load32(c + 64 * k), _mm256_set1_epi8(static_cast<char>(0x80)));
    }
    static void scales(const uint8_t* meta, int64_t chunk, int, int half, __m256& s, __m256&) { s = halves8(meta + 32 * chunk + 16 * half); }
};

// Q4_0, Q4_1 (kMinField), Q5_0, Q5_1 (kFifth), IQ4_NL (kTable): per 32 elements 4 words whose low
// nibbles are elements 0-15 and high nibbles 16-31 (Q5: then a word of fifth bits: bit k of each byte
// for word k's low nibbles, bit 4 + k for its high ones); per block after all codes d[16] (then m[16]).
template <bool kMinField, bool kFifth, bool kTable>
struct PBlock32 {
    static constexpr int kChunk = 32, kGroup = 32, kLines = kFifth ? 5 : 4, kSums = kFifth ? 4 : 8, kMetaPerChunk = kMinField ? 64 : 32;
    static constexpr bool kSigned = kTable, kMin = kMinField, kSuper = false;
    static void codes(const uint8_t* c, int, __m256i* col) {
        const __m256i h = kFifth ? load32(c + 256) : _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            const __m256i v = load32(c + 64 * k);
            __m256i lo = low4(v), hi = high4(v);
            if constexpr (kFifth) lo = _mm256_or_si256(lo, fifth_bit(h, k)), hi = _mm256_or_si256(hi, fifth_bit(h, 4 + k));
            if constexpr (kTable) lo = _mm256_shuffle_epi8(iq4_signed_table(), lo), hi = _mm256_shuffle_epi8(iq4_signed_table(), hi);
            col[k] = lo, col[4 + k] = hi;
        }
    }
    static void scales(const uint8_t* meta, int64_t chunk, int, int half, __m256& s, __m256& o) {
        s = halves8(meta + kMetaPerChunk * chunk + 16 * half);
        if constexpr (kMinField) o = halves8(meta + kMetaPerChunk * chunk + 32 + 16 * half);
    }
};

// IQ4_XS: codes as IQ4_NL's; per super-block after all codes d[16], scales_l[4][16], scales_h[16].
struct PIq4Xs : PBlock32<false, false, true> {
    static constexpr int kMetaPerChunk = 16;  // 128 per super-block
    static constexpr bool kSuper = true;
    static void scales(const uint8_t* meta, int64_t chunk, int, int half, __m256& s, __m256&) {
        const uint8_t* mu = meta + 128 * (chunk / 8);
        const int g = static_cast<int>(chunk % 8);
        const __m256i low = _mm256_and_si256(_mm256_srli_epi32(bytes8(mu + 32 + 16 * (g / 2) + 8 * half), 4 * (g % 2)), _mm256_set1_epi32(15));
        const __m256i hbits = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mu + 96 + 16 * half)));
        const __m256i high = _mm256_and_si256(_mm256_srli_epi32(hbits, 2 * g), _mm256_set1_epi32(3));
        const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)), _mm256_set1_epi32(32));
        s = _mm256_mul_ps(halves8(mu + 16 * half), _mm256_cvtepi32_ps(ls));
    }
};

// Q4_K, Q5_K (kFifth): per 64 elements 8 words (low nibbles group 2c, high 2c + 1; Q5_K then the two
// words of fifth bits); per super-block after all codes d[16], dmin[16], lo[8][16], hi[4][16]. (Decode
// runs tile_k4; these serve prefill.)
template <bool kFifth>
struct PK4 {
    static constexpr int kChunk = 64, kGroup = 32, kLines = kFifth ? 10 : 8;
    static void codes(const uint8_t* c, int gi, __m256i* col) {
        const __m256i h = kFifth ? load32(c + 512 + 64 * gi) : _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            const __m256i v = load32(c + 64 * k);
            col[k] = gi == 0 ? low4(v) : high4(v);
            if constexpr (kFifth) col[k] = _mm256_or_si256(col[k], fifth_bit(h, k));
        }
    }
    static void scales(const uint8_t* meta, int64_t chunk, int gi, int half, __m256& s, __m256& o) {
        const uint8_t* mu = meta + 256 * (chunk / 4);
        const int j = 2 * static_cast<int>(chunk % 4) + gi;
        const __m256i lo = bytes8(mu + 64 + 16 * j + 8 * half);
        const __m256i hi = _mm256_srli_epi32(bytes8(mu + 192 + 16 * (j % 4) + 8 * half), j < 4 ? 0 : 4);
        const __m256i m3 = _mm256_set1_epi32(3), m15 = _mm256_set1_epi32(15);
        const __m256i sc = _mm256_or_si256(_mm256_and_si256(lo, m15), _mm256_slli_epi32(_mm256_and_si256(hi, m3), 4));
        const __m256i mn = _mm256_or_si256(_mm256_srli_epi32(lo, 4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hi, 2), m3), 4));
        s = _mm256_mul_ps(halves8(mu + 16 * half), _mm256_cvtepi32_ps(sc));
        o = _mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), halves8(mu + 32 + 16 * half)), _mm256_cvtepi32_ps(mn));
    }
};

// Q6_K: per 32 elements 4 words of low nibbles (low: group of elements 0-15, high: 16-31) and 2 words
// of top bits; per super-block after all codes the int8 scales [16 groups][16 rows], then d[16]. (Decode
// runs tile_q6_k; the zero point 32 is the activations' term.)
struct PQ6_K {
    static constexpr int kChunk = 32, kGroup = 16, kLines = 6;
    static void codes(const uint8_t* c, int gi, __m256i* col) {
        const __m256i h = load32(c + 256 + 64 * gi);
        for (int k = 0; k < 4; k++) {
            const __m256i v = load32(c + 64 * k);
            col[k] = _mm256_or_si256(gi == 0 ? low4(v) : high4(v), q6_k_top(h, k));
        }
    }
    static void scales(const uint8_t* meta, int64_t chunk, int gi, int half, __m256& s, __m256&) {
        const uint8_t* mu = meta + 288 * (chunk / 8);
        const int g = 2 * static_cast<int>(chunk % 8) + gi;
        s = _mm256_mul_ps(halves8(mu + 256 + 16 * half), _mm256_cvtepi32_ps(sbytes8(mu + 16 * g + 8 * half)));
    }
};

// Calls f.template operator()<Decoder>() for a type with a panel format.
template <class F>
void with_panel_decoder(Type t, F&& f) {
    switch (t) {
        case Type::Q8_0: f.template operator()<P8_0>(); break;
        case Type::Q4_0: f.template operator()<PBlock32<false, false, false>>(); break;
        case Type::Q4_1: f.template operator()<PBlock32<true, false, false>>(); break;
        case Type::Q5_0: f.template operator()<PBlock32<false, true, false>>(); break;
        case Type::Q5_1: f.template operator()<PBlock32<true, true, false>>(); break;
        case Type::IQ4_NL: f.template operator()<PBlock32<false, false, true>>(); break;
        case Type::IQ4_XS: f.template operator()<PIq4Xs>(); break;
        case Type::Q4_K: f.template operator()<PK4<false>>(); break;
        case Type::Q5_K: f.template operator()<PK4<true>>(); break;
        case Type::Q6_K: f.template operator()<PQ6_K>(); break;
        default: break;
    }
}

// ---- decode: P panels × N tokens, the columns multiplied as they are decoded ------------------------

// The integer dot product of one group's columns with token x's quants from q (the group's first).
template <class D>
inline __m256i group_dot(const __m256i* col, const int8_t* q) {
    constexpr int kWords = D::kGroup / 4, kStep = D::kSigned ? 1 : D::kSums < kWords ? D::kSums : kWords;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i dot = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k0 = 0; k0 < kWords; k0 += kStep) {
        __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = k0; k < k0 + kStep; k++) {
            if constexpr (D::kSigned) p = _mm256_maddubs_epi16(_mm256_abs_epi8(col[k]), _mm256_sign_epi8(bcast4(q + 4 * k), col[k]));
            else p = _mm256_add_epi16(p, _mm256_maddubs_epi16(col[k], bcast4(q + 4 * k)));
        }
        dot = _mm256_add_epi32(dot, _mm256_madd_epi16(p, ones));
    }
    return dot;
}

// acc[q][h][t]: rows 8h..8h+7 of panel q for token t, over all K columns.
template <class D, int P, int N>
void tile(const uint8_t* const* panel, int64_t K, const LaneAct* x, __m256 (&acc)[P][2][N]) {
    constexpr int kGroups = D::kChunk / D::kGroup;
    const int64_t meta_at = kPanelRows * K / D::kChunk * D::kLines * 4;  // codes bytes: 16 rows × kLines·4 bytes per chunk
    for (int64_t c = 0; c < K / D::kChunk; c++) {
        const int64_t codes = c * D::kLines * 64;
#pragma GCC unroll 2
        for (int q = 0; q < P; q++) {
            prefetch_lines(panel[q] + codes + kPrefetchAhead, D::kLines);  // the hardware prefetcher alone leaves the loads waiting
            prefetch_lines(panel[q] + meta_at + D::kMetaPerChunk * c + 2048, 1);
        }
#pragma GCC unroll 2
        for (int gi = 0; gi < kGroups; gi++) {
            const int64_t ga = c * kGroups + gi;  // the group among the row's
            const int64_t term_at = D::kSuper ? ga / (256 / D::kGroup) * 16 + ga % (256 / D::kGroup) : ga;
            const int64_t dx_at = D::kSuper ? ga * D::kGroup / 256 : ga;
#pragma GCC unroll 2
            for (int q = 0; q < P; q++)
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    __m256i col[D::kGroup / 4];
                    D::codes(panel[q] + codes + 32 * h, gi, col);
                    __m256 s, o = _mm256_setzero_ps();
                    D::scales(panel[q] + meta_at, c, gi, h, s, o);
#pragma GCC unroll 4
                    for (int t = 0; t < N; t++) {
                        const __m256i dot = group_dot<D>(col, x[t].q + ga * D::kGroup);
                        acc[q][h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(s, _mm256_set1_ps(x[t].d[dx_at])), acc[q][h][t]);
                        if constexpr (!D::kSigned) acc[q][h][t] = _mm256_fmadd_ps(D::kMin ? o : s, _mm256_set1_ps(x[t].s[term_at]), acc[q][h][t]);
                    }
                }
        }
    }
}

// 8 unsigned (signed) bytes, each in both int16 halves of its dword: a row's scale for vpmaddwd.
inline __m256i scale_pairs(const uint8_t* p) {
    const __m256i v = bytes8(p);
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}
inline __m256i signed_scale_pairs(const uint8_t* p) {
    const __m256i v = sbytes8(p);
    return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}

// Q4_K and Q5_K, by super-block: the 6-bit scales multiply the int16 sums in vpmaddwd (one int32 sum per
// row and super-block), the mins meet the activations' group sums once per super-block; per group
// scales in float (the generic tile) cost as much as the products.
// The scales and mins of a panel's super-block (its 256 bytes of meta) as bytes [group][16 rows].
inline void k4_scales_mins(const uint8_t* mu, uint8_t sc[128], uint8_t mn[128]) {
    const __m256i m15 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    for (int a = 0; a < 4; a++) {  // groups 2a, 2a + 1; their top bits in hi[2a % 4], hi[2a % 4 + 1]
        const __m256i L = load32(mu + 64 + 32 * a), H = load32(mu + 192 + 32 * (a % 2));
        const __m256i s_top = a < 2 ? _mm256_slli_epi16(H, 4) : H, m_top = a < 2 ? _mm256_slli_epi16(H, 2) : _mm256_srli_epi16(H, 2);
        _mm256_store_si256(reinterpret_cast<__m256i*>(sc + 32 * a), _mm256_or_si256(_mm256_and_si256(L, m15), _mm256_and_si256(s_top, m30)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(mn + 32 * a), _mm256_or_si256(high4(L), _mm256_and_si256(m_top, m30)));
    }
}

template <bool kFifth, int P, int N>
void tile_k4(const uint8_t* const* panel, int64_t K, const LaneAct* x, __m256 (&acc)[P][2][N]) {
    constexpr int kLines = kFifth ? 10 : 8, kStep = kFifth ? 4 : 8;  // int16 sums: 4 · 2 · 31 · 128 < 2^15
    const int64_t meta_at = kPanelRows * K / 64 * kLines * 4;
    alignas(32) uint8_t sc[P][128], mn[P][128];
    for (int64_t i = 0; i < K / 256; i++) {
        __m256i isum[P][2][N];
#pragma GCC unroll 2
        for (int q = 0; q < P; q++) {
            const uint8_t* mu = panel[q] + meta_at + 256 * i;
            prefetch_lines(mu + 4 * 256, 4);
            k4_scales_mins(mu, sc[q], mn[q]);
            for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) isum[q][h][t] = _mm256_setzero_si256();
        }
#pragma GCC unroll 1
        for (int c = 0; c < 4; c++) {
            const int64_t codes = (4 * i + c) * kLines * 64;
#pragma GCC unroll 2
            for (int q = 0; q < P; q++) prefetch_lines(panel[q] + codes + kPrefetchAhead, kLines);
#pragma GCC unroll 2
            for (int q = 0; q < P; q++)
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const uint8_t* cp = panel[q] + codes + 32 * h;
                    const __m256i h0 = kFifth ? load32(cp + 512) : _mm256_setzero_si256(), h1 = kFifth ? load32(cp + 576) : _mm256_setzero_si256();
                    const __m256i s_lo = scale_pairs(sc[q] + 32 * c + 8 * h), s_hi = scale_pairs(sc[q] + 32 * c + 16 + 8 * h);
                    __m256i plo[N], phi[N];
#pragma GCC unroll 8
                    for (int k = 0; k < 8; k++) {
                        const __m256i v = load32(cp + 64 * k);
                        __m256i lo = low4(v), hi = high4(v);
                        if constexpr (kFifth) lo = _mm256_or_si256(lo, fifth_bit(h0, k)), hi = _mm256_or_si256(hi, fifth_bit(h1, k));
#pragma GCC unroll 4
                        for (int t = 0; t < N; t++) {
                            const int8_t* xq = x[t].q + 256 * i + 64 * c + 4 * k;
                            chain_pair(plo[t], phi[t], _mm256_maddubs_epi16(lo, bcast4(xq)), _mm256_maddubs_epi16(hi, bcast4(xq + 32)), k % kStep == 0,
                                       k % kStep == kStep - 1, s_lo, s_hi, isum[q][h][t]);
                        }
                    }
                }
        }
#pragma GCC unroll 2
        for (int q = 0; q < P; q++) {
            const uint8_t* mu = panel[q] + meta_at + 256 * i;
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256 d = halves8(mu + 16 * h), dmin = halves8(mu + 32 + 16 * h);
                __m256 mins[N];
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) mins[t] = _mm256_setzero_ps();
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    const __m256 m = _mm256_cvtepi32_ps(bytes8(mn[q] + 16 * j + 8 * h));
#pragma GCC unroll 4
                    for (int t = 0; t < N; t++) mins[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(x[t].s[16 * i + j]), mins[t]);
                }
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) {
                    acc[q][h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[q][h][t]), _mm256_mul_ps(d, _mm256_set1_ps(x[t].d[i])), acc[q][h][t]);
                    acc[q][h][t] = _mm256_fnmadd_ps(mins[t], dmin, acc[q][h][t]);
                }
            }
        }
    }
}

// Q6_K, by super-block: the int8 scales multiply the int16 sums in vpmaddwd, the zero point's term
// (−32 · Σq per group, in the activations' s) meets the scales once per super-block.
template <int P, int N>
void tile_q6_k(const uint8_t* const* panel, int64_t K, const LaneAct* x, __m256 (&acc)[P][2][N]) {
    const int64_t meta_at = kPanelRows * K * 3 / 4;
    for (int64_t i = 0; i < K / 256; i++) {
        __m256i isum[P][2][N];
#pragma GCC unroll 2
        for (int q = 0; q < P; q++) {
            prefetch_lines(panel[q] + meta_at + 288 * i + 4 * 288, 5);
            for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) isum[q][h][t] = _mm256_setzero_si256();
        }
#pragma GCC unroll 1
        for (int w = 0; w < 8; w++) {
            const int64_t codes = (8 * i + w) * 384;
#pragma GCC unroll 2
            for (int q = 0; q < P; q++) prefetch_lines(panel[q] + codes + kPrefetchAhead, 6);
#pragma GCC unroll 2
            for (int q = 0; q < P; q++)
#pragma GCC unroll 2
                for (int h = 0; h < 2; h++) {
                    const uint8_t* cp = panel[q] + codes + 32 * h;
                    const uint8_t* scales = panel[q] + meta_at + 288 * i + 16 * (2 * w) + 8 * h;
                    const __m256i h0 = load32(cp + 256), h1 = load32(cp + 320);
                    const __m256i sa = signed_scale_pairs(scales), sb = signed_scale_pairs(scales + 16);
                    __m256i pa[N], pb[N];
#pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) {
                        const __m256i v = load32(cp + 64 * k);
                        const __m256i a = _mm256_or_si256(low4(v), q6_k_top(h0, k)), b = _mm256_or_si256(high4(v), q6_k_top(h1, k));
#pragma GCC unroll 4
                        for (int t = 0; t < N; t++) {  // int16 sums of two products: 2 · 2 · 63 · 128 < 2^15
                            const int8_t* xq = x[t].q + 256 * i + 32 * w + 4 * k;
                            chain_pair(pa[t], pb[t], _mm256_maddubs_epi16(a, bcast4(xq)), _mm256_maddubs_epi16(b, bcast4(xq + 16)), k % 2 == 0, k % 2 == 1, sa,
                                       sb, isum[q][h][t]);
                        }
                    }
                }
        }
#pragma GCC unroll 2
        for (int q = 0; q < P; q++) {
            const uint8_t* mu = panel[q] + meta_at + 288 * i;
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                const __m256 d = halves8(mu + 256 + 16 * h);
                __m256 term[N];
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) term[t] = _mm256_setzero_ps();
#pragma GCC unroll 16
                for (int g = 0; g < 16; g++) {
                    const __m256 s = _mm256_cvtepi32_ps(sbytes8(mu + 16 * g + 8 * h));
#pragma GCC unroll 4
                    for (int t = 0; t < N; t++) term[t] = _mm256_fmadd_ps(s, _mm256_set1_ps(x[t].s[16 * i + g]), term[t]);
                }
#pragma GCC unroll 4
                for (int t = 0; t < N; t++)
                    acc[q][h][t] = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[q][h][t]), _mm256_set1_ps(x[t].d[i]), term[t]), d, acc[q][h][t]);
            }
        }
    }
}

// Panels of rows [r0, r1) × N tokens, P panels at a time while P are left, then one; whole panels are
// computed, the rows in the range stored.
template <class D, int P, int N>
void panel_rows(const Matmul& m, const LaneAct* x, float* y, int64_t r0, int64_t r1) {
    const size_t panel_bytes = kPanelRows * bytes_per_row(m.type, m.n_cols);
    const int64_t p_end = (r1 + kPanelRows - 1) / kPanelRows;
    int64_t p = r0 / kPanelRows;
    auto run = [&](auto tile_panels) {
        constexpr int Q = decltype(tile_panels)::value;
        const uint8_t* panels[Q];
        __m256 acc[Q][2][N];
#pragma GCC unroll 2
        for (int q = 0; q < Q; q++) {
            panels[q] = static_cast<const uint8_t*>(m.w) + (p + q) * panel_bytes;
            for (int h = 0; h < 2; h++)
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) acc[q][h][t] = _mm256_setzero_ps();
        }
        if constexpr (std::is_same_v<D, PK4<false>> || std::is_same_v<D, PK4<true>>) tile_k4<std::is_same_v<D, PK4<true>>, Q, N>(panels, m.n_cols, x, acc);
        else if constexpr (std::is_same_v<D, PQ6_K>) tile_q6_k<Q, N>(panels, m.n_cols, x, acc);
        else tile<D, Q, N>(panels, m.n_cols, x, acc);
        for (int q = 0; q < Q; q++, p++)
            for (int h = 0; h < 2; h++) {
                const int64_t first = p * kPanelRows + 8 * h;
                // rows r0 ≤ first + i < r1
                const __m256i at = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(first - r0)));
                const __m256i keep = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_setzero_si256(), at),
                                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(r1 - r0)), at));
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) _mm256_maskstore_ps(y + first + t * m.y_stride, keep, acc[q][h][t]);
            }
    };
    if constexpr (P > 1)
        while (p_end - p >= P) run(std::integral_constant<int, P>());
    while (p < p_end) run(std::integral_constant<int, 1>());
}

}  // namespace

void gemv_packed(const Matmul& m, int64_t r0, int64_t r1) {
    const int64_t K = m.n_cols;
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, m.n_tokens * (lane_act_bytes(K) + sizeof(LaneAct))));
    auto acts = reinterpret_cast<LaneAct*>(mem + m.n_tokens * lane_act_bytes(K));
    prepare_lane_acts(m.type, false, static_cast<const uint8_t*>(m.x), K, m.n_tokens, mem, acts);
    with_panel_decoder(m.type, [&]<class D>() {
        for (int64_t t = 0; t < m.n_tokens; t += 4) {
            float* y = m.y + t * m.y_stride;
            switch (std::min<int64_t>(4, m.n_tokens - t)) {
                case 1: panel_rows<D, 2, 1>(m, acts + t, y, r0, r1); break;
                case 2: panel_rows<D, 1, 2>(m, acts + t, y, r0, r1); break;
                case 3: panel_rows<D, 1, 3>(m, acts + t, y, r0, r1); break;
                default: panel_rows<D, 1, 4>(m, acts + t, y, r0, r1); break;
            }
        }
    });
}

void panel_to_panel8(Type type, const uint8_t* panel, int half, int64_t K, int64_t k0, int64_t len, const Panel8& out) {
    with_panel_decoder(type, [&]<class D>() {
        constexpr int kGroups = D::kChunk / D::kGroup, kWords = D::kGroup / 4;
        const int64_t meta_at = kPanelRows * K / D::kChunk * D::kLines * 4;
        for (int64_t c = k0 / D::kChunk; c < (k0 + len) / D::kChunk; c++)
            for (int gi = 0; gi < kGroups; gi++) {
                const int64_t g = (c - k0 / D::kChunk) * kGroups + gi;  // the group in the slice
                __m256i col[kWords];
                D::codes(panel + c * D::kLines * 64 + 32 * half, gi, col);
                for (int k = 0; k < kWords; k++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.codes + 32 * (kWords * g + k)), col[k]);
                __m256 s, o = _mm256_setzero_ps();
                D::scales(panel + meta_at, c, gi, half, s, o);
                _mm256_storeu_ps(out.s + 8 * g, s);
                _mm256_storeu_ps(out.o + 8 * g, o);
            }
    });
}

}  // namespace cpu_kernels::avx2
