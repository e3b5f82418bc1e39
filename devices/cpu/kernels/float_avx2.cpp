// AVX2 products of F32, F16 and BF16 weights with activations of the same type: converted to f32 and
// multiplied with FMA, lanes along the row, a row at a time and up to 4 tokens per pass over the weights
// (decode), or a slice of 4 rows converted once and 3 tokens per pass (prefill, below).
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

// R rows × N tokens over n_cols columns: w and x rows of type T `w_stride` and `x_stride` bytes apart;
// y[t · y_stride + r] gets the sums (`add`: added to it).
template <Type T, int R, int N>
void tile(const uint8_t* w, int64_t w_stride, const uint8_t* x, int64_t x_stride, int64_t n_cols, float* y, int64_t y_stride,
          bool add) {
    const int64_t K8 = n_cols / 8 * 8;
    __m256 acc[R][N];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t c = 0; c < K8; c += 8) {
        __m256 xv[N];
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) xv[t] = load8<T>(x + t * x_stride, c);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const __m256 wv = load8<T>(w + r * w_stride, c);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) {
            float sum = hsum(acc[r][t]);
            for (int64_t c = K8; c < n_cols; c++) sum += load1<T>(w + r * w_stride, c) * load1<T>(x + t * x_stride, c);
            y[t * y_stride + r] = add ? y[t * y_stride + r] + sum : sum;
        }
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
// The row kernels convert every weight and activation vector they load, once per 4 tokens: F16 prefill
// was bound by the conversions. From kGemmMinTokens tokens, the activations are converted to f32 once
// (per thread and product, Matmul::acts_key) and each column slice of 4 weight rows once; then 4 rows
// × 3 tokens per pass take 12 FMAs per 4 weight and 3 activation loads.

constexpr int64_t kGemmMinTokens = 5, kSlice = 1024, kTileRows = 4, kTileTokens = 3;

template <int R>
void gemm_rows(const float* w, const float* x, int64_t K, int64_t n_tokens, int64_t len, float* y, int64_t y_stride, bool first) {
    int64_t t = 0;
    auto run = [&]<int N>() {
        tile<Type::F32, R, N>(reinterpret_cast<const uint8_t*>(w), 4 * kSlice, reinterpret_cast<const uint8_t*>(x + t * K), 4 * K, len,
                              y + t * y_stride, y_stride, !first);
    };
    for (; t + kTileTokens <= n_tokens; t += kTileTokens) run.template operator()<kTileTokens>();
    for (; t < n_tokens; t++) run.template operator()<1>();
}

template <Type T>
void gemm(const Matmul& m, int64_t r0, int64_t r1) {
    const int64_t K = m.n_cols, row_bytes = K * elem_bytes<T>();
    bool kept = false;
    auto xf = static_cast<float*>(scratch_keyed(ScratchSlot::ACTIVATIONS, sizeof(float) * m.n_tokens * K, m.acts_key, kept));
    if (!kept)
        for (int64_t t = 0; t < m.n_tokens; t++)
            for (int64_t c = 0; c < K; c += 8) _mm256_storeu_ps(xf + t * K + c, load8<T>(static_cast<const uint8_t*>(m.x) + t * row_bytes, c));
    auto wf = static_cast<float*>(scratch(ScratchSlot::WEIGHTS, sizeof(float) * kTileRows * kSlice));
    for (int64_t k0 = 0; k0 < K; k0 += kSlice) {
        const int64_t len = K - k0 < kSlice ? K - k0 : kSlice;
        for (int64_t r = r0; r < r1; r += kTileRows) {
            const int n = static_cast<int>(r1 - r < kTileRows ? r1 - r : kTileRows);
            for (int i = 0; i < n; i++)
                for (int64_t c = 0; c < len; c += 8)
                    _mm256_storeu_ps(wf + i * kSlice + c, load8<T>(static_cast<const uint8_t*>(m.w) + (r + i) * row_bytes, k0 + c));
            float* y = m.y + r;
            if (n == kTileRows) gemm_rows<kTileRows>(wf, xf + k0, K, m.n_tokens, len, y, m.y_stride, k0 == 0);
            else
                for (int i = 0; i < n; i++) gemm_rows<1>(wf + i * kSlice, xf + k0, K, m.n_tokens, len, y + i, m.y_stride, k0 == 0);
        }
    }
}

}  // namespace

void matmul_float(const Matmul& m, int64_t r0, int64_t r1) {
    const bool prefill = m.n_tokens >= kGemmMinTokens && m.n_cols % 8 == 0;
    switch (m.type) {
        case Type::F32: prefill ? gemm<Type::F32>(m, r0, r1) : gemv<Type::F32>(m, r0, r1); break;
        case Type::F16: prefill ? gemm<Type::F16>(m, r0, r1) : gemv<Type::F16>(m, r0, r1); break;
        default: prefill ? gemm<Type::BF16>(m, r0, r1) : gemv<Type::BF16>(m, r0, r1); break;
    }
}

}  // namespace cpu_kernels::avx2
