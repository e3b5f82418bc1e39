// AVX-512 matrix-vector products over Q8_0 weights packed as panels of 16 rows (kernels.h). Lanes run
// across the panel's rows: one aligned 64-byte load holds 4 columns of 16 rows, and vpdpbusd with one
// broadcast 4-byte slice of a token's quants advances all 16 dot products. The weights stream front to
// back as one sequence, with about a fifth of the instructions per byte of the row-wise kernel.
#include "devices/cpu/kernels/avx512_impl.h"

namespace cpu_kernels::avx512 {

using gguf::Type;

namespace {
// Prefetch distance along a panel: 8 KiB ahead (16 groups of 32 columns). Measured on the 100M decode
// (paired A/B): 8 KiB beat 2, 4 and 16 KiB; fetching every line of a group beat every other line.
constexpr int64_t kPrefetchAhead = 8192;

// One token's Q8_0 activation unpacked: K quants, then per 32-element group d_x and −128·Σq (the codes
// are stored as q + 128).
struct PanelAct {
    const int8_t* q;
    const float* d;
    const int32_t* corr;
};

int64_t panel_act_bytes(int64_t K) { return (K + 8 * (K / 32) + 63) / 64 * 64; }

void prepare_panel_acts(const uint8_t* x, int64_t K, int64_t n_tokens, uint8_t* mem, PanelAct* out) {
    const int64_t n_groups = K / 32;
    for (int64_t t = 0; t < n_tokens; t++) {
        auto blk = reinterpret_cast<const gguf::block_q8_0*>(x + t * bytes_per_row(Type::Q8_0, K));
        auto q = reinterpret_cast<int8_t*>(mem + t * panel_act_bytes(K));
        auto d = reinterpret_cast<float*>(q + K);
        auto corr = reinterpret_cast<int32_t*>(d + n_groups);
        out[t] = {q, d, corr};
        for (int64_t g = 0; g < n_groups; g++) {
            const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk[g].qs));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * g), qv);
            d[g] = half_to_float(blk[g].d);
            corr[g] = -128 * _mm512_reduce_add_epi32(_mm512_madd_epi16(_mm512_cvtepi8_epi16(qv), _mm512_set1_epi16(1)));
        }
    }
}

// Panel p × N tokens; stores the rows of the panel that `keep` selects.
template <int N>
void panel_tile(const uint8_t* panel, int64_t K, const PanelAct* x, float* y, int64_t y_stride, __mmask16 keep) {
    const int64_t n_groups = K / 32;
    const uint8_t* scales = panel + kPanelRows * K;
    __m512 acc[N];
#pragma GCC unroll 4
    for (int t = 0; t < N; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < n_groups; g++) {
        const uint8_t* codes = panel + g * 8 * 64;
        // later groups' codes: the hardware prefetcher alone leaves the loads waiting on memory
#pragma GCC unroll 8
        for (int l = 0; l < 8; l++) _mm_prefetch(reinterpret_cast<const char*>(codes + kPrefetchAhead + 64 * l), _MM_HINT_T0);
        __m512i dot[N];
#pragma GCC unroll 4
        for (int t = 0; t < N; t++) dot[t] = _mm512_set1_epi32(x[t].corr[g]);
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m512i c = _mm512_loadu_si512(codes + 64 * k);  // aligned in device buffers
#pragma GCC unroll 4
            for (int t = 0; t < N; t++)
                dot[t] = _mm512_dpbusd_epi32(dot[t], c, _mm512_set1_epi32(static_cast<int>(load_u32(reinterpret_cast<const uint8_t*>(x[t].q) + 32 * g + 4 * k))));
        }
        const __m512 s = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + 32 * g)));
#pragma GCC unroll 4
        for (int t = 0; t < N; t++) acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[t]), _mm512_mul_ps(s, _mm512_set1_ps(x[t].d[g])), acc[t]);
    }
#pragma GCC unroll 4
    for (int t = 0; t < N; t++) _mm512_mask_storeu_ps(y + t * y_stride, keep, acc[t]);
}

template <int N>
void panel_rows(const Matmul& m, const PanelAct* x, float* y, int64_t r0, int64_t r1) {
    const size_t panel_bytes = kPanelRows * bytes_per_row(Type::Q8_0, m.n_cols);
    for (int64_t p = r0 / kPanelRows; p * kPanelRows < r1; p++) {
        const int64_t first = p * kPanelRows;
        const int64_t lo = r0 > first ? r0 - first : 0, hi = r1 - first < kPanelRows ? r1 - first : kPanelRows;
        const auto keep = static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
        // rows outside [r0, r1) are computed and dropped: whole panels are one load per 4 columns
        panel_tile<N>(static_cast<const uint8_t*>(m.w) + p * panel_bytes, m.n_cols, x, y + first, m.y_stride, keep);
    }
}

}  // namespace

void gemv_packed(const Matmul& m, int64_t r0, int64_t r1) {
    const int64_t K = m.n_cols;
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, m.n_tokens * (panel_act_bytes(K) + sizeof(PanelAct))));
    auto acts = reinterpret_cast<PanelAct*>(mem + m.n_tokens * panel_act_bytes(K));
    prepare_panel_acts(static_cast<const uint8_t*>(m.x), K, m.n_tokens, mem, acts);
    for (int64_t t = 0; t < m.n_tokens; t += 4) {
        float* y = m.y + t * m.y_stride;
        switch (m.n_tokens - t) {
            case 1: panel_rows<1>(m, acts + t, y, r0, r1); break;
            case 2: panel_rows<2>(m, acts + t, y, r0, r1); break;
            case 3: panel_rows<3>(m, acts + t, y, r0, r1); break;
            default: panel_rows<4>(m, acts + t, y, r0, r1); break;
        }
    }
}

}  // namespace cpu_kernels::avx512
