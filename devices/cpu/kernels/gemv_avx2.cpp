// AVX2 products of quantized weights: lanes along the row, 32 codes per ymm, several rows and up to
// 4 tokens per pass over the weights. Without vpdpbusd the int8 dot is vpmaddubsw + vpmaddwd; codes up
// to 127 multiply activations directly (no int16 overflow), the types with codes up to 255 (zero point
// 128: q8_0, iq4_nl, iq4_xs) go through the signed form w = u − 128 with the sign moved onto the
// activation, as ggml does.
#include "devices/cpu/kernels/avx2_impl.h"
#include "devices/cpu/kernels/scalar_impl.h"

namespace cpu_kernels::avx2 {

using gguf::Type;

namespace {

// One token's activation in the lane view: lane l covers elements [4l, 4l+4); per lane d_x, and
// −zero·Σq (int32) or d_x·Σq (float; Q8_1: its fp16 s spread over the group's 8 lanes).
struct LaneAct {
    const int8_t* q;
    const float* d;
    const void* zero_or_sum;
};

void prepare_lane_acts(Type type, const uint8_t* x, int64_t K, int64_t n_tokens, uint8_t* mem, LaneAct* out) {
    const QuantLayout& layout = *quant_layout(type);
    const Type act = activation_type(type);
    const size_t row_bytes = *gguf::row_bytes(act, K);
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t* row = x + t * row_bytes;
        auto q = reinterpret_cast<int8_t*>(mem + t * 3 * K);
        auto d = reinterpret_cast<float*>(q + K);
        auto zs = reinterpret_cast<float*>(d + K / 4);
        out[t] = {q, d, zs};
        for (int64_t c = 0; c < K / 32; c++) {  // one 32-element chunk: one block of Q8_0/Q8_1, 1/8 of Q8_K
            __m256i qv;
            float dx, s_field = 0.0f;
            if (act == Type::Q8_K) {
                const uint8_t* blk = row + (32 * c / gguf::QK_K) * sizeof(gguf::block_q8_K);
                qv = _mm256_loadu_si256((const __m256i*)(blk + 4 + 32 * c % gguf::QK_K));
                std::memcpy(&dx, blk, 4);
            } else {
                const bool q8_1 = act == Type::Q8_1;
                const uint8_t* blk = row + c * (q8_1 ? 36 : 34);
                qv = _mm256_loadu_si256((const __m256i*)(blk + (q8_1 ? 4 : 2)));
                dx = half_to_float(load_u16(blk));
                if (q8_1) s_field = half_to_float(load_u16(blk + 2));
            }
            const __m256i lane_sum = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, qv), ones16);
            _mm256_storeu_si256((__m256i*)(q + 32 * c), qv);
            _mm256_storeu_ps(d + 8 * c, _mm256_set1_ps(dx));
            if (!layout.has_min)
                _mm256_storeu_si256((__m256i*)(zs + 8 * c), _mm256_mullo_epi32(lane_sum, _mm256_set1_epi32(-layout.zero)));
            else if (act == Type::Q8_1)
                _mm256_storeu_ps(zs + 8 * c, _mm256_set1_ps(s_field * 0.125f));
            else
                _mm256_storeu_ps(zs + 8 * c, _mm256_mul_ps(_mm256_set1_ps(dx), _mm256_cvtepi32_ps(lane_sum)));
        }
    }
}

// Scales of the 8 lanes of chunk c: one group of 32, or two of 16.
template <int kGroup>
__m256 lane_scales(const float* s, int c) {
    if constexpr (kGroup == 32) return _mm256_set1_ps(s[c]);
    return _mm256_set_m128(_mm_set1_ps(s[2 * c + 1]), _mm_set1_ps(s[2 * c]));
}

// R rows × N tokens; kSigned: zero point 128, multiplied in signed form.
template <class D, int R, int N, bool kMin, bool kSigned, int kGroup>
void gemv_tile(const Matmul& m, const LaneAct* x, int64_t t0, int64_t r0, size_t row_bytes) {
    const uint8_t* w = static_cast<const uint8_t*>(m.w) + r0 * row_bytes;
    constexpr int kChunks = D::kUnit / 32;
    const int64_t n_units = m.n_cols / D::kUnit;
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[R][N];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n_units; i++) {
        float s[R][16], o[R][16];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const uint8_t* unit = w + r * row_bytes + i * D::kBpb;
            _mm_prefetch(reinterpret_cast<const char*>(unit + R * row_bytes), _MM_HINT_T0);  // the next tile
            D::unit(unit, s[r], o[r]);
        }
#pragma GCC unroll 8
        for (int c = 0; c < kChunks; c++) {
            const int64_t chunk = i * kChunks + c;
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                const __m256i u = D::codes(w + r * row_bytes + i * D::kBpb, c);
                const __m256 sl = lane_scales<kGroup>(s[r], c);
#pragma GCC unroll 8
                for (int t = 0; t < N; t++) {
                    const LaneAct& xt = x[t0 + t];
                    const __m256i q = _mm256_loadu_si256((const __m256i*)(xt.q + 32 * chunk));
                    __m256i dot;
                    if constexpr (kSigned) {
                        const __m256i ws = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
                        dot = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(ws), _mm256_sign_epi8(q, ws)), ones16);
                    } else {
                        dot = _mm256_madd_epi16(_mm256_maddubs_epi16(u, q), ones16);
                        if constexpr (!kMin)
                            dot = _mm256_add_epi32(dot, _mm256_loadu_si256((const __m256i*)(static_cast<const int32_t*>(xt.zero_or_sum) + 8 * chunk)));
                    }
                    const __m256 dl = _mm256_loadu_ps(xt.d + 8 * chunk);
                    acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(sl, dl), acc[r][t]);
                    if constexpr (kMin) {
                        const __m256 sums = _mm256_loadu_ps(static_cast<const float*>(xt.zero_or_sum) + 8 * chunk);
                        acc[r][t] = _mm256_fmadd_ps(lane_scales<kGroup>(o[r], c), sums, acc[r][t]);
                    }
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) m.y[(t0 + t) * m.y_stride + r0 + r] = hsum(acc[r][t]);
}

template <class D, int N, bool kMin, bool kSigned, int kGroup>
void gemv_rows(const Matmul& m, const LaneAct* x, int64_t t0, int64_t r0, int64_t r1) {
    const size_t row_bytes = *gguf::row_bytes(m.type, m.n_cols);
    constexpr int R = N == 1 ? 4 : N == 2 ? 2 : 1;
    int64_t r = r0;
    for (; r + R <= r1; r += R) gemv_tile<D, R, N, kMin, kSigned, kGroup>(m, x, t0, r, row_bytes);
    for (; r < r1; r++) gemv_tile<D, 1, N, kMin, kSigned, kGroup>(m, x, t0, r, row_bytes);
}

template <class D, bool kMin, bool kSigned, int kGroup>
void gemv(const Matmul& m, const LaneAct* x, int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < m.n_tokens; t += 4) switch (m.n_tokens - t) {
            case 1: gemv_rows<D, 1, kMin, kSigned, kGroup>(m, x, t, r0, r1); break;
            case 2: gemv_rows<D, 2, kMin, kSigned, kGroup>(m, x, t, r0, r1); break;
            case 3: gemv_rows<D, 3, kMin, kSigned, kGroup>(m, x, t, r0, r1); break;
            default: gemv_rows<D, 4, kMin, kSigned, kGroup>(m, x, t, r0, r1); break;
        }
}

}  // namespace

void matmul_quant(const Matmul& m, int64_t r0, int64_t r1) {
    const QuantLayout& layout = *quant_layout(m.type);
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, m.n_tokens * (3 * m.n_cols + sizeof(LaneAct))));
    auto acts = reinterpret_cast<LaneAct*>(mem + m.n_tokens * 3 * m.n_cols);
    prepare_lane_acts(m.type, static_cast<const uint8_t*>(m.x), m.n_cols, m.n_tokens, mem, acts);
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
