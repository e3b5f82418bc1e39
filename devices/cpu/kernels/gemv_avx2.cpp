// AVX2 products of quantized weights: lanes along the row, 32 codes per ymm, several rows and up to
// 4 tokens per pass over the weights (the same structure as gemv_avx512.cpp). Without vpdpbusd the
// int8 dot is vpmaddubsw + vpmaddwd; codes up to 127 multiply activations directly (no int16
// overflow), the types with codes up to 255 (zero point 128: q8_0, iq4_nl, iq4_xs) go through the
// signed form w = u − 128 with the sign moved onto the activation, as ggml does.
#include "devices/cpu/kernels/avx2_impl.h"

namespace cpu_kernels::avx2 {

using gguf::Type;

namespace {

// Σ over 32 codes × quants in 8 int32 lanes. kSigned: the codes have zero point 128.
template <bool kSigned>
inline __m256i dot32(__m256i u, const int8_t* q) {
    const __m256i qv = _mm256_loadu_si256((const __m256i*)q), ones = _mm256_set1_epi16(1);
    if constexpr (kSigned) {
        const __m256i w = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(qv, w)), ones);
    }
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, qv), ones);
}

inline float hsum128(__m128 v) {
    v = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}

// ---- 32-element block types -------------------------------------------------------------------

// R rows × N tokens, four blocks at a time; the per-group term is summed in a 4-lane accumulator
// (none for zero point 128, which the signed dot handles).
template <class D, int R, int N, bool kMin, bool kSigned>
void gemv_tile_32(const Matmul& m, const LaneAct* x, int64_t r0, size_t row_bytes) {
    const uint8_t* w = static_cast<const uint8_t*>(m.w) + r0 * row_bytes;
    const int64_t n_blocks = m.n_cols / 32;
    __m256 acc[R][N];
    __m128 acc_group[R][N];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) acc[r][t] = _mm256_setzero_ps(), acc_group[r][t] = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= n_blocks; b += 4) {
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t* blk = w + r * row_bytes + b * D::kBpb;
            _mm_prefetch(reinterpret_cast<const char*>(blk + R * row_bytes), _MM_HINT_T0);  // the next tile
            _mm_prefetch(reinterpret_cast<const char*>(blk + R * row_bytes + 64), _MM_HINT_T0);
            const __m128 sc = four_halves(blk, D::kBpb);
            __m128 sd[N];
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) {
                sd[t] = _mm_mul_ps(sc, _mm_loadu_ps(x[t].d + b));
                if (!kSigned)
                    acc_group[r][t] = _mm_fmadd_ps(kMin ? four_halves(blk + 2, D::kBpb) : sc, _mm_loadu_ps(x[t].s + b), acc_group[r][t]);
            }
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const __m256i u = D::codes(blk + i * D::kBpb);
#pragma GCC unroll 8
                for (int t = 0; t < N; t++) {
                    const __m256 scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(sd[t]), _mm256_set1_epi32(i));
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32<kSigned>(u, x[t].q + 32 * (b + i))), scale, acc[r][t]);
                }
            }
        }
    }
    for (; b < n_blocks; b++)  // 1-3 blocks left
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t* blk = w + r * row_bytes + b * D::kBpb;
            const float sc = half_to_float(load_u16(blk));
            const __m256i u = D::codes(blk);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) {
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32<kSigned>(u, x[t].q + 32 * b)), _mm256_set1_ps(sc * x[t].d[b]), acc[r][t]);
                if (!kSigned)
                    acc_group[r][t] = _mm_add_ss(acc_group[r][t], _mm_set_ss((kMin ? half_to_float(load_u16(blk + 2)) : sc) * x[t].s[b]));
            }
        }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) m.y[t * m.y_stride + r0 + r] = hsum(acc[r][t]) + hsum128(acc_group[r][t]);
}

// ---- 256-element super-block types ------------------------------------------------------------

// Scales of the 8 lanes of chunk c: one group of 32, or two of 16.
template <int kGroup>
inline __m256 lane_scales(const __m256 s[2], int c) {
    if constexpr (kGroup == 32) return _mm256_permutevar8x32_ps(s[0], _mm256_set1_epi32(c));
    const int g = 2 * (c % 4);
    return _mm256_permutevar8x32_ps(s[c / 4], _mm256_setr_epi32(g, g, g, g, g + 1, g + 1, g + 1, g + 1));
}

template <class D, int R, int N, bool kMin, bool kSigned, int kGroup>
void gemv_tile_256(const Matmul& m, const LaneAct* x, int64_t r0, size_t row_bytes) {
    const uint8_t* w = static_cast<const uint8_t*>(m.w) + r0 * row_bytes;
    __m256 acc[R][N];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < m.n_cols / 256; i++) {
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t* blk = w + r * row_bytes + i * D::kBpb;
            for (int p = 0; p < D::kBpb; p += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + R * row_bytes + p), _MM_HINT_T0);
            const UnitScales us = D::unit(blk);
            __m256 super[N];
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) super[t] = _mm256_setzero_ps();
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m256i u = D::codes(blk, c);
                const __m256 s = lane_scales<kGroup>(us.s, c);
#pragma GCC unroll 8
                for (int t = 0; t < N; t++)
                    super[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32<kSigned>(u, x[t].q + 256 * i + 32 * c)), s, super[t]);
            }
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) {
                acc[r][t] = _mm256_fmadd_ps(super[t], _mm256_set1_ps(x[t].d[i]), acc[r][t]);
                if (!kSigned) {  // the per-group term
                    const __m256* g = kMin ? us.o : us.s;
                    acc[r][t] = _mm256_fmadd_ps(g[0], _mm256_loadu_ps(x[t].s + 16 * i), acc[r][t]);
                    if (kGroup == 16) acc[r][t] = _mm256_fmadd_ps(g[1], _mm256_loadu_ps(x[t].s + 16 * i + 8), acc[r][t]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) m.y[t * m.y_stride + r0 + r] = hsum(acc[r][t]);
}

template <class D, int N, bool kMin, bool kSigned, int kGroup>
void gemv_rows(const Matmul& m, const LaneAct* x, int64_t r0, int64_t r1) {
    const size_t row_bytes = bytes_per_row(m.type, m.n_cols);
    constexpr int R = N == 1 ? 4 : N == 2 ? 2 : 1;
    auto tile = [&]<int kRows>(int64_t r) {
        if constexpr (D::kUnit == 256)
            gemv_tile_256<D, kRows, N, kMin, kSigned, kGroup>(m, x, r, row_bytes);
        else
            gemv_tile_32<D, kRows, N, kMin, kSigned>(m, x, r, row_bytes);
    };
    int64_t r = r0;
    for (; r + R <= r1; r += R) tile.template operator()<R>(r);
    for (; r < r1; r++) tile.template operator()<1>(r);
}

template <class D, bool kMin, bool kSigned, int kGroup>
void gemv(const Matmul& m, const LaneAct* acts, int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < m.n_tokens; t += 4) {
        Matmul part = m;
        part.y = m.y + t * m.y_stride;
        switch (m.n_tokens - t) {
            case 1: gemv_rows<D, 1, kMin, kSigned, kGroup>(part, acts + t, r0, r1); break;
            case 2: gemv_rows<D, 2, kMin, kSigned, kGroup>(part, acts + t, r0, r1); break;
            case 3: gemv_rows<D, 3, kMin, kSigned, kGroup>(part, acts + t, r0, r1); break;
            default: gemv_rows<D, 4, kMin, kSigned, kGroup>(part, acts + t, r0, r1); break;
        }
    }
}

}  // namespace

void matmul_quant(const Matmul& m, int64_t r0, int64_t r1) {
    const gguf::CodeLayout& layout = *quant_layout(m.type);
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, m.n_tokens * (lane_act_bytes(m.n_cols) + sizeof(LaneAct))));
    auto acts = reinterpret_cast<LaneAct*>(mem + m.n_tokens * lane_act_bytes(m.n_cols));
    prepare_lane_acts(m.type, false, static_cast<const uint8_t*>(m.x), m.n_cols, m.n_tokens, mem, acts);
    with_decoder(m.type, [&]<class D>() {
        if (layout.zero == 128)
            gemv<D, false, true, 32>(m, acts, r0, r1);
        else if (layout.has_min && layout.group == 32)
            gemv<D, true, false, 32>(m, acts, r0, r1);
        else if (layout.has_min)
            gemv<D, true, false, 16>(m, acts, r0, r1);
        else if (layout.group == 32)
            gemv<D, false, false, 32>(m, acts, r0, r1);
        else
            gemv<D, false, false, 16>(m, acts, r0, r1);
    });
}

}  // namespace cpu_kernels::avx2
