// AVX-512 matrix-vector products of quantized weights (decode: 1-4 tokens). Lanes run along the row:
// each 64-element chunk is decoded to codes, vpdpbusd multiplies them with the activation quants
// into 16 int32 lanes, and the per-lane scales turn them into floats. Several rows at once keep the
// multiply units busy while the weights stream in from memory.
#include "devices/cpu/kernels/avx512_impl.h"

namespace cpu_kernels::avx512 {

using gguf::Type;

void prepare_lane_acts(Type type, const uint8_t* x, int64_t K, int64_t n_tokens, uint8_t* mem, LaneAct* out) {
    const QuantLayout& layout = *quant_layout(type);
    const Type act = activation_type(type);
    const size_t row_bytes = *gguf::row_bytes(act, K);
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i neg_zero = _mm512_set1_epi32(-layout.zero);
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t* row = x + t * row_bytes;
        auto q = reinterpret_cast<int8_t*>(mem + t * lane_act_bytes(K));
        auto d = reinterpret_cast<float*>(q + K);
        auto zs = reinterpret_cast<float*>(d + K / 4);
        out[t] = {q, d, zs};
        for (int64_t c = 0; c < K / 64; c++) {
            __m512i qv;
            __m512 dv, sv = _mm512_setzero_ps();
            if (act == Type::Q8_K) {
                const uint8_t* blk = row + (64 * c / gguf::QK_K) * sizeof(gguf::block_q8_K);
                qv = _mm512_loadu_si512(blk + 4 + 64 * c % gguf::QK_K);
                float dk;
                std::memcpy(&dk, blk, 4);
                dv = _mm512_set1_ps(dk);
            } else {  // Q8_0 (34-byte blocks) or Q8_1 (36): two blocks per chunk
                const int bpb = act == Type::Q8_1 ? 36 : 34, qoff = act == Type::Q8_1 ? 4 : 2;
                const uint8_t* b0 = row + 2 * c * bpb;
                qv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i*)(b0 + qoff))),
                                        _mm256_loadu_si256((const __m256i*)(b0 + bpb + qoff)), 1);
                dv = spread(lane_groups(32, 0), two_scales(load_u16(b0), load_u16(b0 + bpb)));
                if (act == Type::Q8_1)  // ggml uses the stored s = fp16(d·Σq): 1/8 of it in each of the 8 lanes
                    sv = _mm512_mul_ps(spread(lane_groups(32, 0), two_scales(load_u16(b0 + 2), load_u16(b0 + bpb + 2))),
                                       _mm512_set1_ps(0.125f));
            }
            const __m512i lane_sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, qv);
            _mm512_storeu_si512(q + 64 * c, qv);
            _mm512_storeu_ps(d + 16 * c, dv);
            if (!layout.has_min)
                _mm512_storeu_si512(zs + 16 * c, _mm512_mullo_epi32(lane_sum, neg_zero));
            else if (act == Type::Q8_1)
                _mm512_storeu_ps(zs + 16 * c, sv);
            else
                _mm512_storeu_ps(zs + 16 * c, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(lane_sum)));
        }
    }
}

namespace {

// R rows × N tokens. acc[r][t] holds 16 partial sums of y[t][row r]. (The loops over rows and tokens
// must unroll, or the accumulators live on the stack.)
template <class D, int R, int N, bool kMin>
void gemv_tile(const Matmul& m, const LaneAct* acts, int64_t t0, int64_t r0, size_t row_bytes, int group) {
    const uint8_t* w = static_cast<const uint8_t*>(m.w) + r0 * row_bytes;
    constexpr int kChunks = D::kUnit / 64;
    const size_t unit_bytes = D::kUnit == 64 ? 2 * D::kBpb : D::kBpb;
    const int64_t n_units = m.n_cols / D::kUnit;
    __m512 acc[R][N];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) acc[r][t] = _mm512_setzero_ps();

    for (int64_t i = 0; i < n_units; i++) {
        UnitScales us[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t* unit = w + r * row_bytes + i * unit_bytes;
            // Rows are short (1-5 KB): too short for the hardware prefetcher to ramp up on each. Fetch
            // the same place R rows ahead, which the next tile reads.
            _mm_prefetch(reinterpret_cast<const char*>(unit + R * row_bytes), _MM_HINT_T0);
            us[r] = D::unit(unit);
        }
#pragma GCC unroll 4
        for (int c = 0; c < kChunks; c++) {
            const __m512i groups = lane_groups(group, c);
            const int64_t chunk = i * kChunks + c;  // 64-element chunk index in the row
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const uint8_t* unit = w + r * row_bytes + i * unit_bytes;
                const __m512i u = D::codes(unit, c);
                const __m512 s = spread(groups, us[r].s);
#pragma GCC unroll 8
                for (int t = 0; t < N; t++) {
                    const LaneAct& x = acts[t0 + t];
                    const __m512i q = _mm512_loadu_si512(x.q + 64 * chunk);
                    const __m512 d = _mm512_loadu_ps(x.d + 16 * chunk);
                    if (kMin) {
                        const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, q);
                        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(s, d), acc[r][t]);
                        const __m512 xs = _mm512_loadu_ps(static_cast<const float*>(x.zero_or_sum) + 16 * chunk);
                        acc[r][t] = _mm512_fmadd_ps(spread(groups, us[r].o), xs, acc[r][t]);
                    } else {
                        const __m512i corr = _mm512_loadu_si512(static_cast<const int32_t*>(x.zero_or_sum) + 16 * chunk);
                        const __m512i dot = _mm512_dpbusd_epi32(corr, u, q);
                        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(s, d), acc[r][t]);
                    }
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) m.y[(t0 + t) * m.y_stride + r0 + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <class D, int N, bool kMin>
void gemv_rows(const Matmul& m, const LaneAct* acts, int64_t t0, int64_t r0, int64_t r1, int group) {
    const size_t row_bytes = *gguf::row_bytes(m.type, m.n_cols);
    constexpr int R = N == 1 ? 4 : N == 2 ? 3 : 2;
    int64_t r = r0;
    for (; r + R <= r1; r += R) gemv_tile<D, R, N, kMin>(m, acts, t0, r, row_bytes, group);
    for (; r < r1; r++) gemv_tile<D, 1, N, kMin>(m, acts, t0, r, row_bytes, group);
}

template <class D, bool kMin>
void gemv_tokens(const Matmul& m, const LaneAct* acts, int64_t t0, int n, int64_t r0, int64_t r1, int group) {
    switch (n) {
        case 1: gemv_rows<D, 1, kMin>(m, acts, t0, r0, r1, group); break;
        case 2: gemv_rows<D, 2, kMin>(m, acts, t0, r0, r1, group); break;
        case 3: gemv_rows<D, 3, kMin>(m, acts, t0, r0, r1, group); break;
        default: gemv_rows<D, 4, kMin>(m, acts, t0, r0, r1, group); break;
    }
}

}  // namespace

void gemv_quant(const Matmul& m, const LaneAct* acts, int64_t t0, int n, int64_t r0, int64_t r1) {
    const QuantLayout& layout = *quant_layout(m.type);
    with_decoder(m.type, [&]<class D>() {
        if (layout.has_min)
            gemv_tokens<D, true>(m, acts, t0, n, r0, r1, layout.group);
        else
            gemv_tokens<D, false>(m, acts, t0, n, r0, r1, layout.group);
    });
}

}  // namespace cpu_kernels::avx512
