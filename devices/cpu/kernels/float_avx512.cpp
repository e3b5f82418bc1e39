// AVX-512 products of F32, F16 and BF16 weights with activations of the same type, in f32 with FMA
// (BF16 pairs through vdpbf16ps for few tokens). Few tokens: lanes along the row, a row at a time.
// More tokens: 32 rows packed across lanes, one broadcast activation per two FMAs.
#include "devices/cpu/kernels/avx512_impl.h"

#include <type_traits>

namespace cpu_kernels::avx512 {

using gguf::Type;

namespace {

// From this many tokens on, packing 32 rows into f32 pays for itself (bench_cpu_kernels --prefill T).
constexpr int64_t kGemmMinTokens = 8;

// 16 floats of row `p` (type t) from column c; `mask` keeps the first columns when c is near the end.
template <Type T>
__m512 load16(const void* p, int64_t c, __mmask16 mask) {
    if constexpr (T == Type::F32) return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(p) + c);
    const __m256i h = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(p) + c);
    if constexpr (T == Type::F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));  // bf16 → f32
}

template <Type T>
constexpr int64_t elem_bytes() {
    return T == Type::F32 ? 4 : 2;
}

// ---- few tokens --------------------------------------------------------------------------------

// Row r × N tokens: a row at a time, S chains along it, the row's loads shared by the tokens (so a token's
// sums do not depend on how many tokens share the pass). Several rows side by side (4 before) read as many
// streams at once and ran a third slower from memory on the AMD EPYC Zen 4 (1B F16 decode, 1 thread,
// bench_cpu_kernels' matmuls: 8.8-10.0 tok/s with 4 rows, 7.1-7.5 with 2, 12.4-13.1 with one; llama.cpp's
// F16 dot product is also one row at a time).
template <Type T, int N>
void gemv_row(const Matmul& m, int64_t t0, int64_t r) {
    constexpr int S = 4;
    const int64_t K = m.n_cols, row_bytes = K * elem_bytes<T>();
    const auto w = static_cast<const uint8_t*>(m.w) + r * row_bytes;
    const auto x = static_cast<const uint8_t*>(m.x) + t0 * row_bytes;  // activations: same type and length
    __m512 acc[N][S];
#pragma GCC unroll 8
    for (int t = 0; t < N; t++)
#pragma GCC unroll 8
        for (int j = 0; j < S; j++) acc[t][j] = _mm512_setzero_ps();
    constexpr int64_t step = T == Type::BF16 ? 32 : 16;
    auto at = [&](int64_t c, int j, auto mask) __attribute__((always_inline)) {
        if constexpr (T == Type::BF16) {
            const __m512i wv = _mm512_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(w) + c);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) {
                const __m512i xv = _mm512_maskz_loadu_epi16(mask, reinterpret_cast<const uint16_t*>(x + t * row_bytes) + c);
                acc[t][j] = _mm512_dpbf16_ps(acc[t][j], (__m512bh)xv, (__m512bh)wv);
            }
        } else {
            const __m512 wv = load16<T>(w, c, mask);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) acc[t][j] = _mm512_fmadd_ps(wv, load16<T>(x + t * row_bytes, c, mask), acc[t][j]);
        }
    };
    using Mask = std::conditional_t<T == Type::BF16, __mmask32, __mmask16>;
    int64_t c = 0;
    for (; c + S * step <= K; c += S * step) {
        prefetch_lines(w + row_bytes + c * elem_bytes<T>(), S * step * elem_bytes<T>() / 64);  // the next row
#pragma GCC unroll 8
        for (int j = 0; j < S; j++) at(c + j * step, j, static_cast<Mask>(~Mask(0)));
    }
    for (; c < K; c += step) {
        const int64_t left = K - c;
        at(c, 0, left >= step ? static_cast<Mask>(~Mask(0)) : static_cast<Mask>((Mask(1) << left) - 1));
    }
#pragma GCC unroll 8
    for (int t = 0; t < N; t++) {
        __m512 sum = acc[t][0];
#pragma GCC unroll 8
        for (int j = 1; j < S; j++) sum = _mm512_add_ps(sum, acc[t][j]);
        m.y[(t0 + t) * m.y_stride + r] = _mm512_reduce_add_ps(sum);
    }
}

template <Type T>
void gemv(const Matmul& m, int64_t r0, int64_t r1) {
    by_4_tokens(m.n_tokens, [&](auto n, int64_t t) {
        for (int64_t r = r0; r < r1; r++) gemv_row<T, decltype(n)::value>(m, t, r);
    });
}

// ---- many tokens -------------------------------------------------------------------------------

constexpr int kPanelRows = 32, kTileTokens = 8;

// Columns [c0, c0 + n) of n_rows ≤ 32 rows into `panel` as [n][32 rows] floats: two 16-row halves
// per column, so one column is two aligned vectors. Missing rows and columns are zero.
template <Type T>
void pack_panel(const uint8_t* w, int64_t row_bytes, int n_rows, int64_t c0, int64_t n, float* panel) {
    for (int half = 0; half < 2; half++)
        for (int64_t c = 0; c < n; c += 16) {
            const __mmask16 mask = n - c >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - c)) - 1);
            __m512 v[16];
#pragma GCC unroll 16
            for (int r = 0; r < 16; r++) {
                const int row = 16 * half + r;
                v[r] = row < n_rows ? load16<T>(w + row * row_bytes, c0 + c, mask) : _mm512_setzero_ps();
            }
            transpose16(v);
#pragma GCC unroll 16
            for (int k = 0; k < 16; k++) _mm512_store_ps(panel + (c + k) * 32 + 16 * half, v[k]);
        }
}

// 32 panel rows × N tokens over n columns; x[t] points at column c0 of token t's f32 activations.
// Adds to y unless `first`. Per column: two panel loads and N broadcasts feed 2N FMAs.
template <int N>
void gemm_tile(const float* panel, int64_t n, const float* const* x, float* y, int64_t y_stride, int n_rows,
               bool first) {
    const __mmask16 keep0 = static_cast<__mmask16>(n_rows >= 16 ? 0xFFFF : (1u << n_rows) - 1);
    const __mmask16 keep1 = static_cast<__mmask16>(n_rows <= 16 ? 0 : n_rows >= 32 ? 0xFFFF : (1u << (n_rows - 16)) - 1);
    __m512 acc0[N], acc1[N];
#pragma GCC unroll 8
    for (int t = 0; t < N; t++) {
        acc0[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(keep0, y + t * y_stride);
        acc1[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(keep1, y + t * y_stride + 16);
    }
    for (int64_t k = 0; k < n; k++) {
        const __m512 a0 = _mm512_load_ps(panel + 32 * k), a1 = _mm512_load_ps(panel + 32 * k + 16);
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) {
            const __m512 xv = _mm512_set1_ps(x[t][k]);
            acc0[t] = _mm512_fmadd_ps(a0, xv, acc0[t]);
            acc1[t] = _mm512_fmadd_ps(a1, xv, acc1[t]);
        }
    }
#pragma GCC unroll 8
    for (int t = 0; t < N; t++) {
        _mm512_mask_storeu_ps(y + t * y_stride, keep0, acc0[t]);
        _mm512_mask_storeu_ps(y + t * y_stride + 16, keep1, acc1[t]);
    }
}

void gemm_tokens(const float* panel, int64_t n, const float* const* x, int64_t n_tokens, float* y, int64_t y_stride,
                 int n_rows, bool first) {
    int64_t t = 0;
    for (; t + kTileTokens <= n_tokens; t += kTileTokens)
        gemm_tile<kTileTokens>(panel, n, x + t, y + t * y_stride, y_stride, n_rows, first);
    float* yt = y + t * y_stride;
    switch (n_tokens - t) {
#define TINYLLM_TAIL(k) \
        case k: gemm_tile<k>(panel, n, x + t, yt, y_stride, n_rows, first); break;
        TINYLLM_TAIL(7) TINYLLM_TAIL(6) TINYLLM_TAIL(5) TINYLLM_TAIL(4) TINYLLM_TAIL(3) TINYLLM_TAIL(2) TINYLLM_TAIL(1)
#undef TINYLLM_TAIL
        default: break;
    }
}

// Column slices of kc keep every token's slice of activations in L2 while the panels pass over it.
// F16 and BF16 activations are converted to f32 once per slice (a broadcast needs them in memory as
// f32). BF16 could use vdpbf16ps, but on some CPUs it runs at a quarter of the FMA rate.
template <Type T>
void gemm(const Matmul& m, int64_t r0, int64_t r1) {
    const int64_t K = m.n_cols, kc = K <= 1024 ? K : 512, row_bytes = K * elem_bytes<T>();
    const int64_t kc16 = (kc + 15) / 16 * 16;
    auto panel = static_cast<float*>(scratch(ScratchSlot::WEIGHTS, sizeof(float) * 32 * kc16));
    const size_t conv_bytes = T == Type::F32 ? 0 : sizeof(float) * kc16 * m.n_tokens;
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, conv_bytes + sizeof(float*) * m.n_tokens));
    auto x = reinterpret_cast<const float**>(mem + conv_bytes);
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t n = K - k0 < kc ? K - k0 : kc;
        for (int64_t t = 0; t < m.n_tokens; t++) {
            const uint8_t* row = static_cast<const uint8_t*>(m.x) + t * row_bytes;
            if constexpr (T == Type::F32) {
                x[t] = reinterpret_cast<const float*>(row) + k0;
            } else {
                auto f = reinterpret_cast<float*>(mem) + t * kc16;
                for (int64_t c = 0; c < n; c += 16)
                    _mm512_store_ps(f + c, load16<T>(row, k0 + c, n - c >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (n - c)) - 1)));
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

template <Type T>
void matmul_type(const Matmul& m, int64_t r0, int64_t r1) {
    if (T != Type::F32 && m.n_tokens >= kGemmMinTokens && m.n_cols % 32 == 0 && amx_active())
        amx::gemm_float(m, r0, r1);
    else if (m.n_tokens >= kGemmMinTokens)
        gemm<T>(m, r0, r1);
    else
        gemv<T>(m, r0, r1);
}

}  // namespace

void matmul_float(const Matmul& m, int64_t r0, int64_t r1) {
    switch (m.type) {
        case Type::F32: matmul_type<Type::F32>(m, r0, r1); break;
        case Type::F16: matmul_type<Type::F16>(m, r0, r1); break;
        default: matmul_type<Type::BF16>(m, r0, r1); break;
    }
}

}  // namespace cpu_kernels::avx512
