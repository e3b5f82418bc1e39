// AVX-512 matrix-vector products of quantized weights (decode: 1-4 tokens). Lanes run along the row:
// each 64-element chunk is decoded to codes, vpdpbusd multiplies them with the activation quants
// into 16 int32 lanes, and per-lane scales turn them into floats. Decode streams the weights from
// memory, so the work per weight byte is kept small: scales are built four blocks (or one
// super-block) at a time, Q8_K's activation scale and the mins are applied once per super-block,
// several rows share each activation load, and the rows of the next tile are prefetched.
#include "devices/cpu/kernels/avx512_impl.h"

namespace cpu_kernels::avx512 {

using gguf::Type;

namespace {

// The integer dot of 64 codes with 64 activation quants.
inline __m512i dot64(__m512i codes, const LaneAct& x, int64_t chunk) {
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, _mm512_loadu_si512(x.q + 64 * chunk));
}

// ---- 32-element block types (Q8_0 / Q8_1 activations) ------------------------------------------

// R rows × N tokens. Four blocks at a time: their four scales, multiplied by the four activation
// scales, are spread over the lanes of two chunks; the per-group terms (mins or zero point) are summed
// in a separate 4-lane accumulator.
template <class D, int R, int N, bool kMin>
void gemv_tile_32(const Matmul& m, const LaneAct* x, int64_t r0, size_t row_bytes) {
    const uint8_t* w = static_cast<const uint8_t*>(m.w) + r0 * row_bytes;
    const int64_t n_blocks = m.n_cols / 32;
    const __m512i lanes01 = lane_groups(32, 0), lanes23 = lane_groups(32, 1);
    __m512 acc[R][N];
    __m128 acc_min[R][N];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) acc[r][t] = _mm512_setzero_ps(), acc_min[r][t] = _mm_setzero_ps();

    int64_t b = 0;
    for (; b + 4 <= n_blocks; b += 4) {
        __m128 d4[N], s4[N];
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) d4[t] = _mm_loadu_ps(x[t].d + b), s4[t] = _mm_loadu_ps(x[t].s + b);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t* blk = w + r * row_bytes + b * D::kBpb;
            // rows are short (1-5 KB): too short for the hardware prefetcher to ramp up on each; fetch
            // the same place R rows ahead, which the next tile reads
            _mm_prefetch(reinterpret_cast<const char*>(blk + R * row_bytes), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(blk + R * row_bytes + 64), _MM_HINT_T0);
            const __m128 sc = D::scales4(blk);
            __m512 sd[N];
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) {
                sd[t] = _mm512_castps128_ps512(_mm_mul_ps(sc, d4[t]));
                acc_min[r][t] = _mm_fmadd_ps(kMin ? D::mins4(blk) : sc, s4[t], acc_min[r][t]);
            }
            const __m512i u01 = D::codes(blk, 0), u23 = D::codes(blk + 2 * D::kBpb, 0);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) {
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot64(u01, x[t], b / 2)), spread(lanes01, sd[t]), acc[r][t]);
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot64(u23, x[t], b / 2 + 1)), spread(lanes23, sd[t]), acc[r][t]);
            }
        }
    }
    for (; b < n_blocks; b += 2) {  // 1-3 blocks left; a lone last block is paired with itself against zero quants
        const int64_t b1 = b + 1 < n_blocks ? b + 1 : b;
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t* row = w + r * row_bytes;
            const UnitScales us{two_scales(load_u16(row + b * D::kBpb), load_u16(row + b1 * D::kBpb)), _mm512_setzero_ps()};
            const __m512i u = D::codes2(row + b * D::kBpb, row + b1 * D::kBpb);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) {
                const __m512 dl = spread(lanes01, _mm512_castps128_ps512(_mm_loadu_ps(x[t].d + b)));
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot64(u, x[t], b / 2)), _mm512_mul_ps(spread(lanes01, us.s), dl), acc[r][t]);
                const int off = kMin ? 2 : 0;  // the min, or the scale (times −zero·d·Σq in s)
                const float m0 = half_to_float(load_u16(row + b * D::kBpb + off)), m1 = half_to_float(load_u16(row + b1 * D::kBpb + off));
                const float s1 = b1 != b ? x[t].s[b1] : 0.0f;
                acc_min[r][t] = _mm_add_ps(acc_min[r][t], _mm_set_ss(m0 * x[t].s[b] + m1 * s1));
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) {
            float sum = _mm512_reduce_add_ps(acc[r][t]);
            const __m128 h = _mm_add_ps(acc_min[r][t], _mm_movehl_ps(acc_min[r][t], acc_min[r][t]));
            sum += _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
            m.y[t * m.y_stride + r0 + r] = sum;
        }
}

// ---- 256-element super-block types (Q8_K activations) -----------------------------------------

// R rows × N tokens. Per super-block the chunks' lanes are scaled by the weights' group scales only;
// the activation scale multiplies the super-block's sum once, and the per-group terms (mins or zero
// point) meet the activation's group sums in one vector product.
template <class D, int R, int N, bool kMin, int kGroup>
void gemv_tile_256(const Matmul& m, const LaneAct* x, int64_t r0, size_t row_bytes) {
    const uint8_t* w = static_cast<const uint8_t*>(m.w) + r0 * row_bytes;
    __m512 acc[R][N];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < m.n_cols / 256; i++) {
        UnitScales us[R];
        __m512 super[R][N];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t* blk = w + r * row_bytes + i * D::kBpb;
            for (int p = 0; p < D::kBpb; p += 64)  // the next tile's rows (see gemv_tile_32)
                _mm_prefetch(reinterpret_cast<const char*>(blk + R * row_bytes + p), _MM_HINT_T0);
            us[r] = D::unit(blk);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) super[r][t] = _mm512_setzero_ps();
        }
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512i groups = gemv_lane_groups<D>(kGroup, c);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const __m512i u = gemv_codes<D>(w + r * row_bytes + i * D::kBpb, c);
                const __m512 s = spread(groups, us[r].s);
#pragma GCC unroll 8
                for (int t = 0; t < N; t++)
                    super[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot64(u, x[t], 4 * i + c)), s, super[r][t]);
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) {
                acc[r][t] = _mm512_fmadd_ps(super[r][t], _mm512_set1_ps(x[t].d[i]), acc[r][t]);
                acc[r][t] = _mm512_fmadd_ps(kMin ? us[r].o : us[r].s, _mm512_loadu_ps(x[t].s + 16 * i), acc[r][t]);
            }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) m.y[t * m.y_stride + r0 + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <class D, int N, bool kMin, int kGroup>
void gemv_rows(const Matmul& m, const LaneAct* x, int64_t r0, int64_t r1) {
    const size_t row_bytes = bytes_per_row(m.type, m.n_cols);
    constexpr int R = N == 1 ? 4 : N == 2 ? 3 : 2;
    auto tile = [&]<int kRows>(int64_t r) {
        if constexpr (D::kUnit == 256)
            gemv_tile_256<D, kRows, N, kMin, kGroup>(m, x, r, row_bytes);
        else
            gemv_tile_32<D, kRows, N, kMin>(m, x, r, row_bytes);
    };
    int64_t r = r0;
    for (; r + R <= r1; r += R) tile.template operator()<R>(r);
    for (; r < r1; r++) tile.template operator()<1>(r);
}

template <class D, bool kMin, int kGroup>
void gemv_tokens(const Matmul& m, const LaneAct* acts, int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < m.n_tokens; t += 4) {
        Matmul part = m;
        part.y = m.y + t * m.y_stride;
        switch (m.n_tokens - t) {
            case 1: gemv_rows<D, 1, kMin, kGroup>(part, acts + t, r0, r1); break;
            case 2: gemv_rows<D, 2, kMin, kGroup>(part, acts + t, r0, r1); break;
            case 3: gemv_rows<D, 3, kMin, kGroup>(part, acts + t, r0, r1); break;
            default: gemv_rows<D, 4, kMin, kGroup>(part, acts + t, r0, r1); break;
        }
    }
}

}  // namespace

void gemv_quant(const Matmul& m, int64_t r0, int64_t r1) {
    const gguf::CodeLayout& layout = *quant_layout(m.type);
    const int64_t K = m.n_cols;
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, m.n_tokens * (lane_act_bytes(K) + sizeof(LaneAct))));
    auto acts = reinterpret_cast<LaneAct*>(mem + m.n_tokens * lane_act_bytes(K));
    with_decoder(m.type, [&]<class D>() {
        prepare_lane_acts(m.type, gemv_interleaved<D>(), static_cast<const uint8_t*>(m.x), K, m.n_tokens, mem, acts);
        if (layout.has_min && layout.group == 32)
            gemv_tokens<D, true, 32>(m, acts, r0, r1);
        else if (layout.has_min)
            gemv_tokens<D, true, 16>(m, acts, r0, r1);
        else if (layout.group == 32)
            gemv_tokens<D, false, 32>(m, acts, r0, r1);
        else
            gemv_tokens<D, false, 16>(m, acts, r0, r1);
    });
}

}  // namespace cpu_kernels::avx512
