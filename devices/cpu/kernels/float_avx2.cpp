// AVX2 products of F32, F16 and BF16 weights with activations of the same type: converted to f32 and
// multiplied with FMA, lanes along the row, several rows and up to 4 tokens per pass over the weights.
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

template <Type T, int R, int N>
void gemv_tile(const Matmul& m, int64_t t0, int64_t r0) {
    const int64_t K = m.n_cols, row_bytes = K * elem_bytes<T>(), K8 = K / 8 * 8;
    const auto w = static_cast<const uint8_t*>(m.w) + r0 * row_bytes;
    const auto x = static_cast<const uint8_t*>(m.x) + t0 * row_bytes;
    __m256 acc[R][N];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t c = 0; c < K8; c += 8) {
        __m256 xv[N];
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) xv[t] = load8<T>(x + t * row_bytes, c);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            if (c % 32 == 0) _mm_prefetch(reinterpret_cast<const char*>(w + (R + r) * row_bytes + c * elem_bytes<T>()), _MM_HINT_T0);
            const __m256 wv = load8<T>(w + r * row_bytes, c);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) {
            float sum = hsum(acc[r][t]);
            for (int64_t c = K8; c < K; c++) sum += load1<T>(w + r * row_bytes, c) * load1<T>(x + t * row_bytes, c);
            m.y[(t0 + t) * m.y_stride + r0 + r] = sum;
        }
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

}  // namespace

void matmul_float(const Matmul& m, int64_t r0, int64_t r1) {
    switch (m.type) {
        case Type::F32: gemv<Type::F32>(m, r0, r1); break;
        case Type::F16: gemv<Type::F16>(m, r0, r1); break;
        default: gemv<Type::BF16>(m, r0, r1); break;
    }
}

}  // namespace cpu_kernels::avx2
