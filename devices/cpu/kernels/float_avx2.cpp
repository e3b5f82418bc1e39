// AVX2 products of F32, F16 and BF16 weights with activations of the same type: converted to f32 and
// multiplied with FMA, lanes along the row, several rows and up to 4 tokens per pass over the weights
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
// y[t · y_stride + r] gets the sums (`add`: added to it). kPrefetch: the next R rows are read from
// memory meanwhile (decode streams the weights; prefill's tiles are in cache).
template <Type T, int R, int N, bool kPrefetch>
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
            if (kPrefetch && c % 32 == 0) prefetch_lines(w + (R + r) * w_stride + c * elem_bytes<T>(), 1);
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

template <Type T, int R, int N>
void gemv_tile(const Matmul& m, int64_t t0, int64_t r0) {
    const int64_t row_bytes = m.n_cols * elem_bytes<T>();
    tile<T, R, N, true>(static_cast<const uint8_t*>(m.w) + r0 * row_bytes, row_bytes, static_cast<const uint8_t*>(m.x) + t0 * row_bytes,
                        row_bytes, m.n_cols, m.y + t0 * m.y_stride + r0, m.y_stride, false);
}

template <Type T, int N>
void gemv_rows(const Matmul& m, int64_t t0, int64_t r0, int64_t r1) {
    constexpr int R = N == 1 ? 4 : N == 2 ? 2 : 1;
    int64_t r = r0;
    for (; r + R <= r1; r += R) gemv_tile<T, R, N>(m, t0, r);
    for (; r < r1; r++) gemv_tile<T, 1, N>(m, t0, r);
}

template <Type T>
void gemv(const Matmul& m, int64_t r0, int64_t r1) {
    for (int64_t t = 0; t < m.n_tokens; t += 4) switch (m.n_tokens - t) {
            case 1: gemv_rows<T, 1>(m, t, r0, r1); break;
            case 2: gemv_rows<T, 2>(m, t, r0, r1); break;
            case 3: gemv_rows<T, 3>(m, t, r0, r1); break;
            default: gemv_rows<T, 4>(m, t, r0, r1); break;
        }
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
        tile<Type::F32, R, N, false>(reinterpret_cast<const uint8_t*>(w), 4 * kSlice, reinterpret_cast<const uint8_t*>(x + t * K), 4 * K, len,
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
