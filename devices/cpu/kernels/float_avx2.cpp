// AVX2 products of F32, F16 and BF16 weights with activations of the same type: converted to f32 and
// multiplied with FMA, lanes along the row, a row at a time and up to 4 tokens per pass over the weights
// (decode), or 16 rows packed across lanes and 6 tokens per pass (prefill, below).
#include "devices/cpu/kernels/avx2_impl.h"

namespace cpu_kernels::avx2 {

using gguf::Type;

namespace {

template <Type T>
constexpr int64_t elem_bytes() {
    return T == Type::F32 ? 4 : 2;
}

template <Type T>
__m256 load8(const uint8_t* row, int64_t c) {
    if constexpr (T == Type::F32) return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
    if constexpr (T == Type::F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

template <Type T>
float load1(const uint8_t* row, int64_t c) {
    if constexpr (T == Type::F32) return reinterpret_cast<const float*>(row)[c];
    const uint16_t h = load_u16(row + 2 * c);
    if constexpr (T == Type::F16) return half_to_float(h);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Row r × N tokens: a row at a time, S chains along it, the row's loads shared by the tokens. Four rows
// side by side ran slower from memory on the AMD EPYC Zen 4 (1B F16 decode matmuls, 1 thread, `--isa
// avx2`: 9.9-10.4 tok/s vs 12.7-14.1), as with AVX-512 (float_avx512.cpp).
template <Type T, int N>
void gemv_row(const Matmul& m, int64_t t0, int64_t r) {
    constexpr int S = 4;
    const int64_t K = m.n_cols, K8 = K / 8 * 8, row_bytes = K * elem_bytes<T>();
    const auto w = static_cast<const uint8_t*>(m.w) + r * row_bytes;
    const auto x = static_cast<const uint8_t*>(m.x) + t0 * row_bytes;
    __m256 acc[N][S];
#pragma GCC unroll 8
    for (int t = 0; t < N; t++)
#pragma GCC unroll 8
        for (int j = 0; j < S; j++) acc[t][j] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 8 * S <= K; c += 8 * S) {
        prefetch_lines(w + row_bytes + c * elem_bytes<T>(), 8 * S * elem_bytes<T>() / 64);
#pragma GCC unroll 8
        for (int j = 0; j < S; j++) {
            const __m256 wv = load8<T>(w, c + 8 * j);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) acc[t][j] = _mm256_fmadd_ps(wv, load8<T>(x + t * row_bytes, c + 8 * j), acc[t][j]);
        }
    }
    for (; c < K8; c += 8) {
        const __m256 wv = load8<T>(w, c);
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) acc[t][0] = _mm256_fmadd_ps(wv, load8<T>(x + t * row_bytes, c), acc[t][0]);
    }
#pragma GCC unroll 8
    for (int t = 0; t < N; t++) {
        __m256 v = acc[t][0];
#pragma GCC unroll 8
        for (int j = 1; j < S; j++) v = _mm256_add_ps(v, acc[t][j]);
        float sum = hsum(v);
        for (int64_t k = K8; k < K; k++) sum += load1<T>(w, k) * load1<T>(x + t * row_bytes, k);
        m.y[(t0 + t) * m.y_stride + r] = sum;
    }
}

template <Type T>
void gemv(const Matmul& m, int64_t r0, int64_t r1) {
    by_4_tokens(m.n_tokens, [&](auto n, int64_t t) {
        for (int64_t r = r0; r < r1; r++) gemv_row<T, decltype(n)::value>(m, t, r);
    });
}

// ---- prefill ---------------------------------------------------------------------------------------
//
// From kGemmMinTokens tokens on: 16 rows converted to f32 and packed across the lanes of two vectors
// per column, then per column 2 panel loads and N broadcast activations feed 2N FMAs. Each output is
// one FMA chain along its row in column order, as in the AVX-512 kernel (float_avx512.cpp), so prefill
// products of float weights are bit-identical on both variants. (The row kernels summed 8 lanes per row
// and then across them: in random-kimi-linear F16 that flipped a near-tied expert choice away from
// llama.cpp's, 2.4 sigma on the golden logits.)

constexpr int64_t kGemmMinTokens = 8;
constexpr int kPanelRows = 16, kTileTokens = 6;  // 12 accumulators, 2 panel vectors, a broadcast

// Vector i of the result is lane i of each input.
inline void transpose8(__m256 (&v)[8]) {
    __m256 t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]), t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {  // u[4i + j]: lane j (and j + 4) of rows 4i to 4i + 3
        u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) v[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20), v[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
}

// Columns [c0, c0 + n) of n_rows ≤ 16 rows into `panel` as [n][16 rows] floats; missing rows are zero.
template <Type T>
void pack_panel(const uint8_t* w, int64_t row_bytes, int n_rows, int64_t c0, int64_t n, float* panel) {
    const int64_t n8 = n / 8 * 8;
    for (int half = 0; half < 2; half++) {
        for (int64_t c = 0; c < n8; c += 8) {
            __m256 v[8];
#pragma GCC unroll 8
            for (int r = 0; r < 8; r++) v[r] = 8 * half + r < n_rows ? load8<T>(w + (8 * half + r) * row_bytes, c0 + c) : _mm256_setzero_ps();
            transpose8(v);
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) _mm256_store_ps(panel + (c + k) * kPanelRows + 8 * half, v[k]);
        }
        for (int64_t c = n8; c < n; c++)
            for (int r = 0; r < 8; r++) {
                const int row = 8 * half + r;
                panel[c * kPanelRows + row] = row < n_rows ? load1<T>(w + row * row_bytes, c0 + c) : 0.0f;
            }
    }
}

// 16 panel rows × N tokens over n columns; x[t] points at column c0 of token t's f32 activations.
// Continues the sums in y unless `first`.
template <int N>
void gemm_tile(const float* panel, int64_t n, const float* const* x, float* y, int64_t y_stride, int n_rows, bool first) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i keep0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_rows), lanes), keep1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_rows - 8), lanes);
    __m256 acc0[N], acc1[N];
#pragma GCC unroll 8
    for (int t = 0; t < N; t++) {
        acc0[t] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(y + t * y_stride, keep0);
        acc1[t] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(y + t * y_stride + 8, keep1);
    }
    for (int64_t k = 0; k < n; k++) {
        const __m256 a0 = _mm256_load_ps(panel + kPanelRows * k), a1 = _mm256_load_ps(panel + kPanelRows * k + 8);
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) {
            const __m256 xv = _mm256_broadcast_ss(x[t] + k);
            acc0[t] = _mm256_fmadd_ps(a0, xv, acc0[t]);
            acc1[t] = _mm256_fmadd_ps(a1, xv, acc1[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < N; t++) {
        _mm256_maskstore_ps(y + t * y_stride, keep0, acc0[t]);
        _mm256_maskstore_ps(y + t * y_stride + 8, keep1, acc1[t]);
    }
}

void gemm_tokens(const float* panel, int64_t n, const float* const* x, int64_t n_tokens, float* y, int64_t y_stride, int n_rows,
                 bool first) {
    int64_t t = 0;
    for (; t + kTileTokens <= n_tokens; t += kTileTokens) gemm_tile<kTileTokens>(panel, n, x + t, y + t * y_stride, y_stride, n_rows, first);
    float* yt = y + t * y_stride;
    switch (n_tokens - t) {
        case 5: gemm_tile<5>(panel, n, x + t, yt, y_stride, n_rows, first); break;
        case 4: gemm_tile<4>(panel, n, x + t, yt, y_stride, n_rows, first); break;
        case 3: gemm_tile<3>(panel, n, x + t, yt, y_stride, n_rows, first); break;
        case 2: gemm_tile<2>(panel, n, x + t, yt, y_stride, n_rows, first); break;
        case 1: gemm_tile<1>(panel, n, x + t, yt, y_stride, n_rows, first); break;
        default: break;
    }
}

// Column slices of kc keep every token's slice of activations in L2 while the panels pass over it;
// F16 and BF16 activations are converted to f32 once per slice (the broadcasts read them as f32).
template <Type T>
void gemm(const Matmul& m, int64_t r0, int64_t r1) {
    const int64_t K = m.n_cols, kc = K <= 1024 ? K : 512, row_bytes = K * elem_bytes<T>();
    const int64_t kc8 = (kc + 7) / 8 * 8;
    auto panel = static_cast<float*>(scratch(ScratchSlot::WEIGHTS, sizeof(float) * kPanelRows * kc8));
    const size_t conv_bytes = T == Type::F32 ? 0 : sizeof(float) * kc8 * m.n_tokens;
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, conv_bytes + sizeof(float*) * m.n_tokens));
    auto x = reinterpret_cast<const float**>(mem + conv_bytes);
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t n = K - k0 < kc ? K - k0 : kc, n8 = n / 8 * 8;
        for (int64_t t = 0; t < m.n_tokens; t++) {
            const uint8_t* row = static_cast<const uint8_t*>(m.x) + t * row_bytes;
            if constexpr (T == Type::F32) {
                x[t] = reinterpret_cast<const float*>(row) + k0;
            } else {
                auto f = reinterpret_cast<float*>(mem) + t * kc8;
                for (int64_t c = 0; c < n8; c += 8) _mm256_store_ps(f + c, load8<T>(row, k0 + c));
                for (int64_t c = n8; c < n; c++) f[c] = load1<T>(row, k0 + c);
                x[t] = f;
            }
        }
        for (int64_t r = r0; r < r1; r += kPanelRows) {
            const int n_rows = static_cast<int>(r1 - r < kPanelRows ? r1 - r : kPanelRows);
            pack_panel<T>(static_cast<const uint8_t*>(m.w) + r * row_bytes, row_bytes, n_rows, k0, n, panel);
            gemm_tokens(panel, n, x, m.n_tokens, m.y + r, m.y_stride, n_rows, k0 == 0);
        }
    }
}

}  // namespace

void matmul_float(const Matmul& m, int64_t r0, int64_t r1) {
    const bool prefill = m.n_tokens >= kGemmMinTokens;
    switch (m.type) {
        case Type::F32: prefill ? gemm<Type::F32>(m, r0, r1) : gemv<Type::F32>(m, r0, r1); break;
        case Type::F16: prefill ? gemm<Type::F16>(m, r0, r1) : gemv<Type::F16>(m, r0, r1); break;
        default: prefill ? gemm<Type::BF16>(m, r0, r1) : gemv<Type::BF16>(m, r0, r1); break;
    }
}

}  // namespace cpu_kernels::avx2
