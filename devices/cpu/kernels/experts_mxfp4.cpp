// MXFP4 expert weights against Q8_0 activations (ggml's vec_dot_mxfp4_q8_0 pairing): integer sums of
// FP4 codes (doubled E2M1 values) times int8 per 32-block, scaled by both block scales. The AVX2 tile
// decodes each weight block once for up to four tokens.
#include "devices/cpu/kernels/ops_impl.h"
#include "gguf/blocks.h"

#include <immintrin.h>

#include <cstring>
#include <vector>

namespace cpu_kernels {

namespace {

constexpr int8_t FP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// E8M0 exponent as 2^(e-128), ggml's "half" convention (the FP4 table holds doubled values).
struct E8m0Table {
    float v[256];
    E8m0Table() {
        for (int e = 0; e < 256; e++) {
            uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
            std::memcpy(&v[e], &bits, 4);
        }
    }
};
const E8m0Table E8M0;

using Block = gguf::block_mxfp4;
using XBlock = gguf::block_q8_0;

void tile_scalar(const uint8_t* w, int64_t w_row, int64_t n, const uint8_t* const* x, int64_t count, int64_t nb, float* y) {
    for (int64_t r = 0; r < n; r++) {
        auto wb = reinterpret_cast<const Block*>(w + r * w_row);
        for (int64_t j = 0; j < count; j++) {
            auto xb = reinterpret_cast<const XBlock*>(x[j]);
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int32_t s = 0;
                for (int i = 0; i < 16; i++) s += FP4[wb[b].qs[i] & 15] * xb[b].qs[i] + FP4[wb[b].qs[i] >> 4] * xb[b].qs[i + 16];
                sum += gguf::f16_to_f32(xb[b].d) * E8M0.v[wb[b].e] * float(s);
            }
            y[j * n + r] = sum;
        }
    }
}

__attribute__((target("avx2,fma,f16c"))) inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// R weight rows against T tokens: the 16-entry table is one register, so a byte shuffle decodes 16
// codes at once; each decoded block serves T tokens and each activation block R rows.
template <int R, int T>
__attribute__((target("avx2,fma,f16c"))) void block_avx2(const Block* const* wb, const XBlock* const* xb, const float* xd, int64_t nb,
                                                       float* y, int64_t y_stride) {
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(FP4)), low4 = _mm_set1_epi8(0x0f);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][T];
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i wv[R], wabs[R];
        __m256 wd[R];
        for (int r = 0; r < R; r++) {
            __m128i codes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[r][b].qs));
            wv[r] = _mm256_set_m128i(_mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(codes, 4), low4)),
                                     _mm_shuffle_epi8(table, _mm_and_si128(codes, low4)));
            wabs[r] = _mm256_sign_epi8(wv[r], wv[r]);
            wd[r] = _mm256_set1_ps(E8M0.v[wb[r][b].e]);
        }
        for (int t = 0; t < T; t++) {
            __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[t][b].qs));
            __m256 d = _mm256_broadcast_ss(xd + t * nb + b);
            for (int r = 0; r < R; r++) {
                // maddubs wants unsigned × signed: move w's sign onto x.
                __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(xv, wv[r])), ones);
                acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(wd[r], d), _mm256_cvtepi32_ps(sums), acc[r][t]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) y[t * y_stride + r] = hsum(acc[r][t]);
}

// Rows in pairs, tokens in fours; xd holds each token's block scales as floats (count, nb).
__attribute__((target("avx2,fma,f16c")))
void tile_avx2(const uint8_t* w, int64_t w_row, int64_t n, const uint8_t* const* x, int64_t count, int64_t nb, float* y) {
    thread_local std::vector<float> xd;
    xd.resize(size_t(count * nb));
    auto xb = reinterpret_cast<const XBlock* const*>(x);
    for (int64_t j = 0; j < count; j++)
        for (int64_t b = 0; b < nb; b++) xd[size_t(j * nb + b)] = _cvtsh_ss(xb[j][b].d);
    for (int64_t r = 0; r < n; r += 2) {
        const Block* wb[2] = {reinterpret_cast<const Block*>(w + r * w_row), reinterpret_cast<const Block*>(w + (r + 1) * w_row)};
        bool pair = r + 1 < n;
        int64_t j = 0;
        for (; j + 4 <= count; j += 4)
            pair ? block_avx2<2, 4>(wb, xb + j, xd.data() + j * nb, nb, y + j * n + r, n)
                 : block_avx2<1, 4>(wb, xb + j, xd.data() + j * nb, nb, y + j * n + r, n);
        for (; j < count; j++)
            pair ? block_avx2<2, 1>(wb, xb + j, xd.data() + j * nb, nb, y + j * n + r, n)
                 : block_avx2<1, 1>(wb, xb + j, xd.data() + j * nb, nb, y + j * n + r, n);
    }
}

}  // namespace

void mxfp4_q8_0_tile(const uint8_t* w, int64_t w_row, int64_t n, const uint8_t* const* x, int64_t count, int64_t n_blocks, float* y) {
    static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    (avx2 ? tile_avx2 : tile_scalar)(w, w_row, n, x, count, n_blocks, y);
}

}  // namespace cpu_kernels
