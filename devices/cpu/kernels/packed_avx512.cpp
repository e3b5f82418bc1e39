// AVX-512 matrix-vector products over weights packed as panels of 16 rows (kernels.h, packed.cpp has
// the formats). Lanes run across the panel's rows: one aligned 64-byte load holds 4 code bytes of 16
// rows, and vpdpbusd with one broadcast 4-byte slice of a token's quants advances all 16 dot products
// (nibble types: two, the low and the high nibbles). The weights stream front to back with prefetch,
// a few panels side by side (below), with a fraction of the instructions per byte of the row-wise kernels.
#include "devices/cpu/kernels/avx512_impl.h"

#include <type_traits>

namespace cpu_kernels::avx512 {

using gguf::Type;

namespace {
// Prefetch distance along a panel's codes, every line, three panels side by side. Into L1: 4 KiB
// ahead; at 8 KiB (tuned on the cache-resident 100M decode) the 1B decode from memory ran 8-10% slower
// than at 2-4 KiB (Intel Xeon AMX, 1B tg32 Q4_K_M 39.7 vs 43.5, Q4_0 45.2 vs 49.4, Q8_0 26.8 vs 29.0,
// Q6_K 30.8 vs 33.7 tok/s; 12 KiB slower still). Into L2: 2 KiB ahead (AMD EPYC Zen 4,
// bench_cpu_kernels 1B model decode, 2 threads: Q4_K 49.3 at 2 KiB, 46.3 at 8, 50.7 at 32).
inline int64_t prefetch_ahead() { return g_prefetch_l2 ? 2048 : 4096; }


// One token's activation. Q8_0 (for Q8_0, Q4_0, Q5_0, IQ4_NL weights): K quants, then per 32-element
// group d_x and −zero·Σq; Q8_1 (Q4_1, Q5_1): d_x and the block's s = d_x·Σq. Q8_K (Q4_K, Q5_K, Q6_K,
// IQ4_XS): the blocks' quants, and per super-block d_x and 16 ints: per 32-element group Σq (Q4_K,
// Q5_K) or −128·Σq (IQ4_XS), 8 used, or −32·Σq per 16 (Q6_K).
struct PanelAct {
    const int8_t* q;
    const float* d;
    const int32_t* corr;
    const float* s;  // Q8_1 (for Q4_1, Q5_1 weights), in corr's place: per group the block's s = d_x·Σq
};

int64_t panel_act_bytes(int64_t K) { return (K + 8 * (K / 32) + 64 * (K / 256) + 63) / 64 * 64; }

void prepare_panel_acts(Type type, const uint8_t* x, int64_t K, int64_t n_tokens, uint8_t* mem, PanelAct* out) {
    for (int64_t t = 0; t < n_tokens; t++) {
        auto q = reinterpret_cast<int8_t*>(mem + t * panel_act_bytes(K));
        auto d = reinterpret_cast<float*>(q + K);
        auto corr = reinterpret_cast<int32_t*>(d + K / 32);
        auto sum = reinterpret_cast<float*>(d + K / 32);
        out[t] = {q, d, corr, sum};
        if (activation_type(type) == Type::Q8_K) {
            auto blk = reinterpret_cast<const gguf::block_q8_K*>(x + t * bytes_per_row(Type::Q8_K, K));
            for (int64_t i = 0; i < K / 256; i++) {
                std::memcpy(q + 256 * i, blk[i].qs, 256);
                d[i] = blk[i].d;
                for (int j = 0; j < 16; j++) {
                    const int32_t sum32 = j < 8 ? blk[i].bsums[2 * j] + blk[i].bsums[2 * j + 1] : 0;  // Σq of group j of 32
                    corr[16 * i + j] = type == Type::Q6_K ? -32 * blk[i].bsums[j] : type == Type::IQ4_XS ? -128 * sum32 : sum32;
                }
            }
            continue;
        }
        if (activation_type(type) == Type::Q8_1) {
            auto blk = reinterpret_cast<const gguf::block_q8_1*>(x + t * bytes_per_row(Type::Q8_1, K));
            for (int64_t g = 0; g < K / 32; g++) {
                std::memcpy(q + 32 * g, blk[g].qs, 32);
                d[g] = half_to_float(blk[g].d), sum[g] = half_to_float(blk[g].s);
            }
            continue;
        }
        // the codes are u = q + 8 (Q4_0), q + 16 (Q5_0), q + 128 (Q8_0, IQ4_NL's codebook)
        const int zero = quant_layout(type)->zero;
        auto blk = reinterpret_cast<const gguf::block_q8_0*>(x + t * bytes_per_row(Type::Q8_0, K));
        for (int64_t g = 0; g < K / 32; g++) {
            const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[g].qs));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * g), qv);
            d[g] = half_to_float(blk[g].d);
            corr[g] = -zero * _mm512_reduce_add_epi32(_mm512_madd_epi16(_mm512_cvtepi8_epi16(qv), _mm512_set1_epi16(1)));
        }
    }
}

// acc += dpbusd(w, the 4 bytes at q broadcast): the broadcast folded into the instruction ({1to16}), one
// macro-op instead of a broadcast load and the product (GCC does not fold it from the intrinsics).
inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int8_t* q) {
    asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(q)));
    return acc;
}
inline __m512i low_nibbles(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
inline __m512i high_nibbles(__m512i v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }
inline __m512 halves16(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }

// The 6-bit scales and mins of a Q4_K panel's super-block (its 256 bytes of meta) as bytes [group][16 rows].
inline void q4_k_scales_mins(const uint8_t* meta, uint8_t sc[128], uint8_t mn[128]) {
    const __m512i lo0 = _mm512_loadu_si512(meta + 64), lo1 = _mm512_loadu_si512(meta + 128), hi = _mm512_loadu_si512(meta + 192);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    _mm512_store_si512(sc, _mm512_or_si512(low_nibbles(lo0), _mm512_and_si512(_mm512_slli_epi16(hi, 4), m30)));
    _mm512_store_si512(sc + 64, _mm512_or_si512(low_nibbles(lo1), _mm512_and_si512(hi, m30)));
    _mm512_store_si512(mn, _mm512_or_si512(high_nibbles(lo0), _mm512_and_si512(_mm512_slli_epi16(hi, 2), m30)));
    _mm512_store_si512(mn + 64, _mm512_or_si512(high_nibbles(lo1), _mm512_and_si512(_mm512_srli_epi16(hi, 2), m30)));
}

// Q6_K codes of quad k of a window: top bits 2k, 2k+1 of each byte of h moved to bits 4, 5.
inline __m512i q6_k_top(__m512i h, int k) {
    const __m512i s = k == 0 ? _mm512_slli_epi16(h, 4) : k == 1 ? _mm512_slli_epi16(h, 2) : k == 2 ? h : _mm512_srli_epi16(h, 2);
    return _mm512_and_si512(s, _mm512_set1_epi8(0x30));
}

// Bit k (0-7) of each byte of h at bit 4, the rest zero: the fifth bits of Q5_K and Q5_0/Q5_1 codes.
inline __m512i fifth_bit(__m512i h, int k) {
    const __m512i s = k < 4 ? _mm512_slli_epi16(h, 4 - k) : k == 4 ? h : _mm512_srli_epi16(h, k - 4);
    return _mm512_and_si512(s, _mm512_set1_epi8(0x10));
}

// The scales (ls − 32) of group g of an IQ4_XS panel's super-block, 16 rows: nibble g % 2 of
// scales_l[g / 2] (its 16 bytes at `low`), bits 2g, 2g + 1 of the rows' scales_h (`high`) on top.
inline __m512i iq4_xs_scales(const uint8_t* low, __m512i high, int g) {
    const __m512i l = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(low)));
    const __m512i ls = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(l, 4 * (g % 2)), _mm512_set1_epi32(15)),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(high, 2 * g), _mm512_set1_epi32(3)), 4));
    return _mm512_sub_epi32(ls, _mm512_set1_epi32(32));
}

// ---- P panels × N tokens per type; `acc[q][t]` gets panel q's 16 rows for token t -----------------
// Decode runs 3 or 4 panels side by side (2 for two tokens): their loads are independent streams and
// their products independent chains, which keeps more of the weights in flight than one panel at a time.
// Measured (Intel Xeon AMX, prefetch into L1, 2 threads, bench_cpu_kernels' 1B shapes from memory, panels
// alternating in one process): Q4_K 37 model tok/s with 1 panel, 40 with 2, 42 with 3 or 4, 47 for a
// loop that only reads the panels; Q6_K, Q8_0, Q4_0 gain 5-12%, 3 panels at least as fast as 4. On the
// AMD EPYC Zen 4 (prefetch into L2), 4 panels: Q4_K 52.6 vs 46.0 (3) tok/s, Q4_0 56.5 vs 48.0, Q6_K 33.8
// vs 26.4, Q8_0 32.0 vs 29.4 (medians of 3 alternating rounds); 6 and 8 panels slower than 4.

// The types of one scale per 32-element group: per group Q8_0 8 words of bytes (q + 128); the others
// 4 words whose low nibbles are elements 0-15 and high nibbles 16-31 (IQ4_NL's through its codebook),
// Q5_0 and Q5_1 then a word of fifth bits. After all codes per group the 16 rows' fp16 scales d (Q4_1,
// Q5_1: then their fp16 mins m).
template <int P, int N, Type T>
void tile_block32(const uint8_t* const* panel, int64_t K, const PanelAct* x, __m512 (&acc)[P][N]) {
    constexpr bool kNibbles = T != Type::Q8_0, kFifth = T == Type::Q5_0 || T == Type::Q5_1;
    constexpr bool kMin = T == Type::Q4_1 || T == Type::Q5_1;
    constexpr int kWords = !kNibbles ? 8 : kFifth ? 5 : 4, kMetaBytes = kMin ? 64 : 32;  // per group
    const int64_t metas = kPanelRows * K * kWords / 8;
    const __m512i table = iq4nl_table();
    for (int64_t g = 0; g < K / 32; g++) {
        const int64_t codes = g * kWords * 64;
        // two chains (Q8_0: even and odd words; nibbles: low and high), as in tile_q4_k_q5_k
        __m512i dot[P][N][2], fifth[P];
#pragma GCC unroll 4
        for (int q = 0; q < P; q++) {
            prefetch_lines(panel[q] + codes + prefetch_ahead(), kWords);  // the hardware prefetcher alone leaves the loads waiting
            if constexpr (kFifth) fifth[q] = _mm512_loadu_si512(panel[q] + codes + 256);
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) dot[q][t][0] = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(x[t].corr[g]), dot[q][t][1] = _mm512_setzero_si512();
        }
#pragma GCC unroll 8
        for (int k = 0; k < (kNibbles ? 4 : 8); k++)
#pragma GCC unroll 4
            for (int q = 0; q < P; q++) {
                const __m512i c = _mm512_loadu_si512(panel[q] + codes + 64 * k);  // aligned in device buffers
                __m512i lo = c, hi = c;
                if constexpr (kNibbles) lo = low_nibbles(c), hi = high_nibbles(c);
                if constexpr (kFifth) lo = _mm512_or_si512(lo, fifth_bit(fifth[q], k)), hi = _mm512_or_si512(hi, fifth_bit(fifth[q], 4 + k));
                if constexpr (T == Type::IQ4_NL) lo = _mm512_shuffle_epi8(table, lo), hi = _mm512_shuffle_epi8(table, hi);
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) {
                    const int8_t* xq = x[t].q + 32 * g + 4 * k;
                    if constexpr (kNibbles) {
                        dot[q][t][0] = dpbusd_bcast(dot[q][t][0], lo, xq);
                        dot[q][t][1] = dpbusd_bcast(dot[q][t][1], hi, xq + 16);
                    } else {
                        dot[q][t][k % 2] = dpbusd_bcast(dot[q][t][k % 2], c, xq);
                    }
                }
            }
#pragma GCC unroll 4
        for (int q = 0; q < P; q++) {
            const uint8_t* meta = panel[q] + metas + kMetaBytes * g;
            if (kNibbles && (kMin || g % 2 == 0)) prefetch_lines(meta + 2048, 1);
            const __m512 s = halves16(meta);
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) {
                acc[q][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(dot[q][t][0], dot[q][t][1])), _mm512_mul_ps(s, _mm512_set1_ps(x[t].d[g])), acc[q][t]);
                if constexpr (kMin) acc[q][t] = _mm512_fmadd_ps(halves16(meta + 32), _mm512_set1_ps(x[t].s[g]), acc[q][t]);
            }
        }
    }
}

// IQ4_XS: per 32 elements 4 words of nibbles (low: elements 0-15, high: 16-31) through the codebook;
// per super-block after all codes d[16], scales_l[4][16], scales_h[16] (packed.cpp).
template <int P, int N>
void tile_iq4_xs(const uint8_t* const* panel, int64_t K, const PanelAct* x, __m512 (&acc)[P][N]) {
    const int64_t metas = kPanelRows * K / 2;
    const __m512i table = iq4nl_table();
    for (int64_t i = 0; i < K / 256; i++) {
        __m512 super[P][N];
        __m512i high[P];  // scales_h of the 16 rows
#pragma GCC unroll 4
        for (int q = 0; q < P; q++) {
            const uint8_t* meta = panel[q] + metas + 128 * i;
            prefetch_lines(meta + 4 * 128, 2);
            high[q] = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + 96)));
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) super[q][t] = _mm512_setzero_ps();
        }
#pragma GCC unroll 1
        for (int g = 0; g < 8; g++) {
            const int64_t codes = (8 * i + g) * 4 * 64;
            __m512i dot[P][N][2];
#pragma GCC unroll 4
            for (int q = 0; q < P; q++) {
                prefetch_lines(panel[q] + codes + prefetch_ahead(), 4);
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) dot[q][t][0] = _mm512_set1_epi32(x[t].corr[16 * i + g]), dot[q][t][1] = _mm512_setzero_si512();
            }
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
#pragma GCC unroll 4
                for (int q = 0; q < P; q++) {
                    const __m512i c = _mm512_loadu_si512(panel[q] + codes + 64 * k);
                    const __m512i lo = _mm512_shuffle_epi8(table, low_nibbles(c)), hi = _mm512_shuffle_epi8(table, high_nibbles(c));
#pragma GCC unroll 4
                    for (int t = 0; t < N; t++) {
                        const int8_t* xq = x[t].q + 256 * i + 32 * g + 4 * k;
                        dot[q][t][0] = dpbusd_bcast(dot[q][t][0], lo, xq);
                        dot[q][t][1] = dpbusd_bcast(dot[q][t][1], hi, xq + 16);
                    }
                }
#pragma GCC unroll 4
            for (int q = 0; q < P; q++) {
                const __m512 s = _mm512_cvtepi32_ps(iq4_xs_scales(panel[q] + metas + 128 * i + 32 + 16 * (g / 2), high[q], g));
#pragma GCC unroll 4
                for (int t = 0; t < N; t++)
                    super[q][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(dot[q][t][0], dot[q][t][1])), s, super[q][t]);
            }
        }
#pragma GCC unroll 4
        for (int q = 0; q < P; q++) {
            const __m512 d = halves16(panel[q] + metas + 128 * i);
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) acc[q][t] = _mm512_fmadd_ps(super[q][t], _mm512_mul_ps(d, _mm512_set1_ps(x[t].d[i])), acc[q][t]);
        }
    }
}

// Q4_K and Q5_K (FIVE): per 64 elements 8 words (low nibbles group 2c, high 2c + 1), Q5_K then 2
// words of fifth bits; per super-block after all codes 256 bytes of d, dmin and the 6-bit scales and
// mins split in nibbles and top bits (packed.cpp).
template <int P, int N, bool FIVE>
void tile_q4_k_q5_k(const uint8_t* const* panel, int64_t K, const PanelAct* x, __m512 (&acc)[P][N]) {
    constexpr int kWords = FIVE ? 10 : 8;  // per 64 elements
    const int64_t metas = kPanelRows * K * kWords / 16;
    alignas(64) uint8_t sc[P][128], mn[P][128];  // [group][16 rows]
    for (int64_t i = 0; i < K / 256; i++) {
        __m512 super[P][N];
#pragma GCC unroll 4
        for (int q = 0; q < P; q++) {
            const uint8_t* meta = panel[q] + metas + 256 * i;
            prefetch_lines(meta + 4 * 256, 4);
            q4_k_scales_mins(meta, sc[q], mn[q]);
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) super[q][t] = _mm512_setzero_ps();
        }
#pragma GCC unroll 1
        for (int c = 0; c < 4; c++) {
            const int64_t codes = (4 * i + c) * kWords * 64;
            // two chains per sum (even and odd words): a chain of 8 dependent products would bound the loop
            __m512i dlo[P][N][2], dhi[P][N][2];
            __m512i h0[P], h1[P];
#pragma GCC unroll 4
            for (int q = 0; q < P; q++) {
                prefetch_lines(panel[q] + codes + prefetch_ahead(), kWords);
                if constexpr (FIVE) h0[q] = _mm512_loadu_si512(panel[q] + codes + 512), h1[q] = _mm512_loadu_si512(panel[q] + codes + 576);
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) dlo[q][t][0] = dhi[q][t][0] = dlo[q][t][1] = dhi[q][t][1] = _mm512_setzero_si512();
            }
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++)
#pragma GCC unroll 4
                for (int q = 0; q < P; q++) {
                    const __m512i v = _mm512_loadu_si512(panel[q] + codes + 64 * k);
                    __m512i lo, hv;
                    if constexpr (FIVE) {
                        lo = _mm512_or_si512(low_nibbles(v), fifth_bit(h0[q], k));
                        hv = _mm512_or_si512(high_nibbles(v), fifth_bit(h1[q], k));
                    } else {  // the high nibbles in place (16 × their value): their scale carries the 1/16 (exact)
                        lo = low_nibbles(v), hv = _mm512_and_si512(v, _mm512_set1_epi8(-16));
                    }
#pragma GCC unroll 4
                    for (int t = 0; t < N; t++) {
                        const int8_t* xq = x[t].q + 256 * i + 64 * c + 4 * k;
                        dlo[q][t][k % 2] = dpbusd_bcast(dlo[q][t][k % 2], lo, xq);
                        dhi[q][t][k % 2] = dpbusd_bcast(dhi[q][t][k % 2], hv, xq + 32);
                    }
                }
#pragma GCC unroll 4
            for (int q = 0; q < P; q++) {
                const __m512 s_lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc[q] + 32 * c))));
                __m512 s_hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc[q] + 32 * c + 16))));
                if constexpr (!FIVE) s_hi = _mm512_mul_ps(s_hi, _mm512_set1_ps(1.0f / 16));
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) {
                    super[q][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(dlo[q][t][0], dlo[q][t][1])), s_lo, super[q][t]);
                    super[q][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(dhi[q][t][0], dhi[q][t][1])), s_hi, super[q][t]);
                }
            }
        }
        // mins: Σ_j m_j · Σq_j per row, then d·d_x·super − dmin·d_x·mins
#pragma GCC unroll 4
        for (int q = 0; q < P; q++) {
            __m512 mins[N];
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) mins[t] = _mm512_setzero_ps();
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) {
                const __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(mn[q] + 16 * j))));
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) mins[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(static_cast<float>(x[t].corr[16 * i + j])), mins[t]);
            }
            const uint8_t* meta = panel[q] + metas + 256 * i;
            const __m512 d = halves16(meta), dmin = halves16(meta + 32);
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) {
                const __m512 dx = _mm512_set1_ps(x[t].d[i]);
                acc[q][t] = _mm512_fmadd_ps(super[q][t], _mm512_mul_ps(d, dx), acc[q][t]);
                acc[q][t] = _mm512_fnmadd_ps(mins[t], _mm512_mul_ps(dmin, dx), acc[q][t]);
            }
        }
    }
}

// Q6_K: per 32 elements 4 words of low nibbles (low: elements 0-15, high: 16-31) and 2 words of top
// bits (bits 2L of word h: the 4 elements 16h + 4L + i); per super-block after all codes the int8
// scales [16 groups][16 rows] and d[16].
template <int P, int N>
void tile_q6_k(const uint8_t* const* panel, int64_t K, const PanelAct* x, __m512 (&acc)[P][N]) {
    const int64_t metas = kPanelRows * K * 3 / 4;
    for (int64_t i = 0; i < K / 256; i++) {
        __m512 super[P][N];
#pragma GCC unroll 4
        for (int q = 0; q < P; q++) {
            prefetch_lines(panel[q] + metas + 288 * i + 4 * 288, 5);
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) super[q][t] = _mm512_setzero_ps();
        }
#pragma GCC unroll 1
        for (int w = 0; w < 8; w++) {
            const int64_t codes = (8 * i + w) * 6 * 64;
            __m512i da[P][N], db[P][N];
#pragma GCC unroll 4
            for (int q = 0; q < P; q++) {
                prefetch_lines(panel[q] + codes + prefetch_ahead(), 6);
#pragma GCC unroll 4
                for (int t = 0; t < N; t++)
                    da[q][t] = _mm512_set1_epi32(x[t].corr[16 * i + 2 * w]), db[q][t] = _mm512_set1_epi32(x[t].corr[16 * i + 2 * w + 1]);
            }
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++)
#pragma GCC unroll 4
                for (int q = 0; q < P; q++) {
                    const uint8_t* cw = panel[q] + codes;
                    const __m512i v = _mm512_loadu_si512(cw + 64 * k);
                    const __m512i a = _mm512_or_si512(low_nibbles(v), q6_k_top(_mm512_loadu_si512(cw + 256), k));
                    const __m512i b = _mm512_or_si512(high_nibbles(v), q6_k_top(_mm512_loadu_si512(cw + 320), k));
#pragma GCC unroll 4
                    for (int t = 0; t < N; t++) {
                        const int8_t* xq = x[t].q + 256 * i + 32 * w + 4 * k;
                        da[q][t] = dpbusd_bcast(da[q][t], a, xq);
                        db[q][t] = dpbusd_bcast(db[q][t], b, xq + 16);
                    }
                }
#pragma GCC unroll 4
            for (int q = 0; q < P; q++) {
                const uint8_t* meta = panel[q] + metas + 288 * i;
                const __m512 sa = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 32 * w))));
                const __m512 sb = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 32 * w + 16))));
#pragma GCC unroll 4
                for (int t = 0; t < N; t++) {
                    super[q][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(da[q][t]), sa, super[q][t]);
                    super[q][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(db[q][t]), sb, super[q][t]);
                }
            }
        }
#pragma GCC unroll 4
        for (int q = 0; q < P; q++) {
            const __m512 d = halves16(panel[q] + metas + 288 * i + 256);
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) acc[q][t] = _mm512_fmadd_ps(super[q][t], _mm512_mul_ps(d, _mm512_set1_ps(x[t].d[i])), acc[q][t]);
        }
    }
}

// Panels of rows [r0, r1) × N tokens, P panels at a time while P are left, then two, then one; whole
// panels are computed, the rows `keep` selects stored. One function per type: with the four tiles
// inlined into one, GCC's allocation of one tile's registers depended on the others (the Q8_0 tile's
// second chain cost Q4_K decode a third of its speed).
template <int P, int N, Type T>
void panel_rows(const Matmul& m, const PanelAct* x, float* y, int64_t r0, int64_t r1) {
    const size_t panel_bytes = kPanelRows * bytes_per_row(m.type, m.n_cols);
    const int64_t p_end = (r1 + kPanelRows - 1) / kPanelRows;
    int64_t p = r0 / kPanelRows;
    auto run = [&](auto tile_panels) {
        constexpr int Q = decltype(tile_panels)::value;
        const uint8_t* panels[Q];
        __m512 acc[Q][N];
#pragma GCC unroll 4
        for (int q = 0; q < Q; q++) {
            panels[q] = static_cast<const uint8_t*>(m.w) + (p + q) * panel_bytes;
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) acc[q][t] = _mm512_setzero_ps();
        }
        if constexpr (T == Type::Q4_K || T == Type::Q5_K) tile_q4_k_q5_k<Q, N, T == Type::Q5_K>(panels, m.n_cols, x, acc);
        else if constexpr (T == Type::Q6_K) tile_q6_k<Q, N>(panels, m.n_cols, x, acc);
        else if constexpr (T == Type::IQ4_XS) tile_iq4_xs<Q, N>(panels, m.n_cols, x, acc);
        else tile_block32<Q, N, T>(panels, m.n_cols, x, acc);
        for (int q = 0; q < Q; q++, p++) {
            const int64_t first = p * kPanelRows;
            const int64_t lo = r0 > first ? r0 - first : 0, hi = r1 - first < kPanelRows ? r1 - first : kPanelRows;
            const auto keep = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
#pragma GCC unroll 4
            for (int t = 0; t < N; t++) _mm512_mask_storeu_ps(y + first + t * m.y_stride, keep, acc[q][t]);
        }
    };
    if constexpr (P > 1)
        while (p_end - p >= P) run(std::integral_constant<int, P>());
    if constexpr (P > 2)
        if (p_end - p >= 2) run(std::integral_constant<int, 2>());
    while (p < p_end) run(std::integral_constant<int, 1>());
}

// Up to 4 of the n tokens left at x.
template <Type T>
void panel_tokens(const Matmul& m, const PanelAct* x, float* y, int64_t r0, int64_t r1, int64_t n) {
    switch (n) {
        case 1:  // 4 panels where the weights are prefetched into L2, 3 into L1 (the tiles' comment)
            if (g_prefetch_l2) panel_rows<4, 1, T>(m, x, y, r0, r1);
            else panel_rows<3, 1, T>(m, x, y, r0, r1);
            break;
        case 2: panel_rows<2, 2, T>(m, x, y, r0, r1); break;
        case 3: panel_rows<1, 3, T>(m, x, y, r0, r1); break;
        default: panel_rows<1, 4, T>(m, x, y, r0, r1); break;
    }
}

}  // namespace

void packed_to_panel(Type type, const uint8_t* panel, int64_t K, int64_t k0, int64_t k_len, const Panel& p, bool signed_codes) {
    const __m512i zero = _mm512_set1_epi8(static_cast<char>(signed_codes ? quant_layout(type)->zero : 0));
    auto put = [&](int64_t dword, __m512i v) { _mm512_store_si512(p.codes + 64 * dword, _mm512_sub_epi8(v, zero)); };
    if (type == Type::Q8_0) {  // the codes are already in the matrix-matrix order
        if (signed_codes)
            for (int64_t i = 0; i < kPanelRows * k_len / 64; i++) put(i, _mm512_loadu_si512(panel + kPanelRows * k0 + 64 * i));
        else
            std::memcpy(p.codes, panel + kPanelRows * k0, kPanelRows * k_len);
        for (int64_t g = 0; g < k_len / 32; g++) {
            _mm512_store_ps(p.s + 16 * g, halves16(panel + kPanelRows * K + 32 * (k0 / 32 + g)));
            _mm512_store_ps(p.o + 16 * g, _mm512_setzero_ps());
        }
    } else if (quant_layout(type)->group == 32 && gguf::type_traits(type).block_size == 32) {  // Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL
        const bool iq4 = type == Type::IQ4_NL, fifth = type == Type::Q5_0 || type == Type::Q5_1;
        const bool min = type == Type::Q4_1 || type == Type::Q5_1;
        const int words = fifth ? 5 : 4, meta_bytes = min ? 64 : 32;  // per group
        const __m512i table = iq4nl_table();
        for (int64_t g = 0; g < k_len / 32; g++) {
            const uint8_t* codes = panel + words * 64 * (k0 / 32 + g);
            const __m512i h = fifth ? _mm512_loadu_si512(codes + 256) : _mm512_setzero_si512();
            for (int k = 0; k < 4; k++) {
                const __m512i v = _mm512_loadu_si512(codes + 64 * k);
                const __m512i lo = _mm512_or_si512(low_nibbles(v), fifth_bit(h, k)), hi = _mm512_or_si512(high_nibbles(v), fifth_bit(h, 4 + k));
                put(8 * g + k, iq4 ? _mm512_shuffle_epi8(table, lo) : lo), put(8 * g + 4 + k, iq4 ? _mm512_shuffle_epi8(table, hi) : hi);
            }
            const uint8_t* meta = panel + kPanelRows * K * words / 8 + meta_bytes * (k0 / 32 + g);
            _mm512_store_ps(p.s + 16 * g, halves16(meta));
            _mm512_store_ps(p.o + 16 * g, min ? halves16(meta + 32) : _mm512_setzero_ps());
        }
    } else if (type == Type::Q4_K || type == Type::Q5_K) {
        const bool five = type == Type::Q5_K;
        const int words = five ? 10 : 8;  // per 64 elements
        alignas(64) uint8_t sc[128], mn[128];
        for (int64_t i = 0; i < k_len / 256; i++) {
            const uint8_t* meta = panel + kPanelRows * K * words / 16 + 256 * (k0 / 256 + i);
            q4_k_scales_mins(meta, sc, mn);
            const __m512 d = halves16(meta), dmin = halves16(meta + 32);
            for (int j = 0; j < 8; j++) {
                const __m512 s = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sc + 16 * j))));
                const __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(mn + 16 * j))));
                _mm512_store_ps(p.s + 16 * (8 * i + j), _mm512_mul_ps(d, s));
                _mm512_store_ps(p.o + 16 * (8 * i + j), _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(dmin, m)));
            }
            for (int c = 0; c < 4; c++) {
                const uint8_t* codes = panel + (4 * (k0 / 256 + i) + c) * words * 64;
                const __m512i h0 = five ? _mm512_loadu_si512(codes + 512) : _mm512_setzero_si512();
                const __m512i h1 = five ? _mm512_loadu_si512(codes + 576) : _mm512_setzero_si512();
                for (int k = 0; k < 8; k++) {
                    const __m512i v = _mm512_loadu_si512(codes + 64 * k);
                    put(64 * i + 16 * c + k, _mm512_or_si512(low_nibbles(v), fifth_bit(h0, k)));
                    put(64 * i + 16 * c + 8 + k, _mm512_or_si512(high_nibbles(v), fifth_bit(h1, k)));
                }
            }
        }
    } else if (type == Type::IQ4_XS) {
        const __m512i table = iq4nl_table();
        for (int64_t i = 0; i < k_len / 256; i++) {
            const uint8_t* meta = panel + kPanelRows * K / 2 + 128 * (k0 / 256 + i);
            const __m512 d = halves16(meta);
            const __m512i high = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(meta + 96)));
            for (int g = 0; g < 8; g++) {
                _mm512_store_ps(p.s + 16 * (8 * i + g), _mm512_mul_ps(d, _mm512_cvtepi32_ps(iq4_xs_scales(meta + 32 + 16 * (g / 2), high, g))));
                _mm512_store_ps(p.o + 16 * (8 * i + g), _mm512_setzero_ps());
                const uint8_t* codes = panel + (8 * (k0 / 256 + i) + g) * 256;
                for (int k = 0; k < 4; k++) {
                    const __m512i v = _mm512_loadu_si512(codes + 64 * k);
                    put(64 * i + 8 * g + k, _mm512_shuffle_epi8(table, low_nibbles(v)));
                    put(64 * i + 8 * g + 4 + k, _mm512_shuffle_epi8(table, high_nibbles(v)));
                }
            }
        }
    } else {  // Q6_K
        for (int64_t i = 0; i < k_len / 256; i++) {
            const uint8_t* meta = panel + kPanelRows * K * 3 / 4 + 288 * (k0 / 256 + i);
            const __m512 d = halves16(meta + 256);
            for (int g = 0; g < 16; g++) {
                const __m512 s = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(meta + 16 * g))));
                _mm512_store_ps(p.s + 16 * (16 * i + g), _mm512_mul_ps(d, s));
                _mm512_store_ps(p.o + 16 * (16 * i + g), _mm512_setzero_ps());
            }
            for (int w = 0; w < 8; w++) {
                const uint8_t* codes = panel + (8 * (k0 / 256 + i) + w) * 384;
                const __m512i h0 = _mm512_loadu_si512(codes + 256), h1 = _mm512_loadu_si512(codes + 320);
                for (int k = 0; k < 4; k++) {
                    const __m512i v = _mm512_loadu_si512(codes + 64 * k);
                    put(64 * i + 8 * w + k, _mm512_or_si512(low_nibbles(v), q6_k_top(h0, k)));
                    put(64 * i + 8 * w + 4 + k, _mm512_or_si512(high_nibbles(v), q6_k_top(h1, k)));
                }
            }
        }
    }
}

void gemv_packed(const Matmul& m, int64_t r0, int64_t r1) {
    const int64_t K = m.n_cols;
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, m.n_tokens * (panel_act_bytes(K) + sizeof(PanelAct))));
    auto acts = reinterpret_cast<PanelAct*>(mem + m.n_tokens * panel_act_bytes(K));
    prepare_panel_acts(m.type, static_cast<const uint8_t*>(m.x), K, m.n_tokens, mem, acts);
    for (int64_t t = 0; t < m.n_tokens; t += 4) {
        float* y = m.y + t * m.y_stride;
        switch (m.type) {
            case Type::Q4_0: panel_tokens<Type::Q4_0>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
            case Type::Q4_1: panel_tokens<Type::Q4_1>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
            case Type::Q5_0: panel_tokens<Type::Q5_0>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
            case Type::Q5_1: panel_tokens<Type::Q5_1>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
            case Type::Q4_K: panel_tokens<Type::Q4_K>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
            case Type::Q5_K: panel_tokens<Type::Q5_K>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
            case Type::IQ4_NL: panel_tokens<Type::IQ4_NL>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
            case Type::IQ4_XS: panel_tokens<Type::IQ4_XS>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
            case Type::Q6_K: panel_tokens<Type::Q6_K>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
            default: panel_tokens<Type::Q8_0>(m, acts + t, y, r0, r1, m.n_tokens - t); break;
        }
    }
}

}  // namespace cpu_kernels::avx512
