// AVX2 matrix-matrix products of quantized weights (prefill). Per column slice, 8 weight rows are
// decoded once (from GGUF rows, or from half a packed panel: packed_avx2.cpp) into a Panel8 whose codes
// are [K/4 dwords][8 rows] (one ymm holds a dword of every row),
// which then meets the tokens' activations 4 tokens at a time: vpmaddubsw of a dword column by one
// broadcast dword of a token's quants advances 8 dot products. Codes of at most 6 bits sum several of
// those int16 products before vpmaddwd widens them; the codes with zero point 128 go through the signed
// form (|w| times the quants with w's sign), as the row kernels do. The group scale is applied once per
// 8 outputs instead of once per row and token, which made the row kernels about five instructions per
// 32 multiply-adds.
#include "devices/cpu/kernels/avx2_impl.h"

#include <algorithm>

namespace cpu_kernels::avx2 {

using gguf::Type;

namespace {

constexpr int kRows = 8, kTokens = 4;

// The largest code of a type whose codes are unsigned (zero point below 128): how many vpmaddubsw
// results (each at most 2·max·127) an int16 lane can sum.
int int16_sums(Type t) {
    const int max_code = t == Type::Q6_K ? 63 : t == Type::Q5_0 || t == Type::Q5_1 || t == Type::Q5_K ? 31 : 15;
    return 32767 / (2 * max_code * 127);
}

// Rows [0, n) of w (n ≤ 8; the others get scale 0) over columns [k0, k0 + len) into p; tmp holds 8·len
// bytes. D: the type's decoder (avx2_impl.h).
template <class D>
void pack8(const uint8_t* w, size_t row_bytes, int n, int64_t k0, int64_t len, int group, bool has_min, bool is_signed,
           const Panel8& p, uint8_t* tmp) {
    const int64_t groups = len / group;
    for (int r = 0; r < kRows; r++) {
        uint8_t* row = tmp + r * len;
        if (r >= n) {
            std::memset(row, is_signed ? 0x80 : 0, static_cast<size_t>(len));  // code zero after the flip below
            for (int64_t g = 0; g < groups; g++) p.s[8 * g + r] = p.o[8 * g + r] = 0.0f;
            continue;
        }
        const uint8_t* src = w + r * row_bytes;
        if constexpr (D::kUnit == 32) {
            for (int64_t b = 0; b < len / 32; b++) {
                const uint8_t* blk = src + (k0 / 32 + b) * D::kBpb;
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 32 * b), D::codes(blk));
                p.s[8 * b + r] = half_to_float(load_u16(blk));
                p.o[8 * b + r] = D::kMinField ? half_to_float(load_u16(blk + 2)) : 0.0f;
            }
        } else {
            const int per_unit = 256 / group;
            for (int64_t i = 0; i < len / 256; i++) {
                const uint8_t* blk = src + (k0 / 256 + i) * D::kBpb;
                const UnitScales us = D::unit(blk);
                alignas(32) float sv[16], ov[16];
                _mm256_store_ps(sv, us.s[0]), _mm256_store_ps(sv + 8, us.s[1]);
                _mm256_store_ps(ov, us.o[0]), _mm256_store_ps(ov + 8, us.o[1]);
                for (int j = 0; j < per_unit; j++) {
                    p.s[8 * (i * per_unit + j) + r] = sv[j];
                    p.o[8 * (i * per_unit + j) + r] = has_min ? ov[j] : 0.0f;
                }
                for (int c = 0; c < 8; c++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + 256 * i + 32 * c), D::codes(blk, c));
            }
        }
    }
    // dword column k of the 8 rows side by side (signed types: minus the zero point 128), 8 columns at a
    // time by an 8 × 8 transpose of dwords
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(is_signed ? 0x80 : 0));
    for (int64_t k = 0; k < len / 4; k += 8) {
        __m256i v[8], t[8], u[8];
        for (int r = 0; r < kRows; r++) v[r] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tmp + r * len + 4 * k)), flip);
        for (int i = 0; i < 4; i++) t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]), t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
        for (int i = 0; i < 2; i++)
            for (int h = 0; h < 2; h++) {
                u[4 * i + 2 * h] = _mm256_unpacklo_epi64(t[4 * i + h], t[4 * i + 2 + h]);
                u[4 * i + 2 * h + 1] = _mm256_unpackhi_epi64(t[4 * i + h], t[4 * i + 2 + h]);
            }
        // u[j] (j < 4) holds columns j and j + 4 of rows 0-3, u[4 + j] those of rows 4-7
        for (int j = 0; j < 4; j++) {
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(p.codes + 32 * (k + j)), _mm256_permute2x128_si256(u[j], u[4 + j], 0x20));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(p.codes + 32 * (k + 4 + j)), _mm256_permute2x128_si256(u[j], u[4 + j], 0x31));
        }
    }
}

// 8 panel rows × all tokens over the panel's groups [0, n_groups), which are the activations' groups
// [g0, g0 + n_groups); adds to y unless `first`. kSigned: codes with zero point 128 (no per-group term);
// kSums: int16 sums per vpmaddwd; kMin: the per-group term takes the mins o, else the scales s;
// kSuper: Q8_K activations (d_x per 256, the term's Σq per group in 16 per super-block).
template <int kGroup, bool kSigned, int kSums, bool kMin, bool kSuper>
void tokens8(const Panel8& p, int64_t g0, int64_t n_groups, const LaneAct* x, int64_t n_tokens, float* y, int64_t y_stride,
             int n_rows, bool first) {
    constexpr int kWords = kGroup / 4, kStep = kSums < kWords ? kSums : kWords;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i row_mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokens) {
        const int nt = static_cast<int>(std::min<int64_t>(kTokens, n_tokens - t0));
        const LaneAct* xt[kTokens];
#pragma GCC unroll 4
        for (int t = 0; t < kTokens; t++) xt[t] = &x[t0 + (t < nt ? t : 0)];  // past the end: token t0 again, not stored
        __m256 acc[kTokens];
#pragma GCC unroll 4
        for (int t = 0; t < kTokens; t++)
            acc[t] = first || t >= nt ? _mm256_setzero_ps() : _mm256_maskload_ps(y + (t0 + t) * y_stride, row_mask);
        for (int64_t g = 0; g < n_groups; g++) {
            const int64_t ga = g0 + g;  // the group in the activations
            const uint8_t* codes = p.codes + 32 * kWords * g;
            const uint8_t *x0 = reinterpret_cast<const uint8_t*>(xt[0]->q + ga * kGroup), *x1 = reinterpret_cast<const uint8_t*>(xt[1]->q + ga * kGroup);
            const uint8_t *x2 = reinterpret_cast<const uint8_t*>(xt[2]->q + ga * kGroup), *x3 = reinterpret_cast<const uint8_t*>(xt[3]->q + ga * kGroup);
            __m256i d0 = _mm256_setzero_si256(), d1 = d0, d2 = d0, d3 = d0;
#pragma GCC unroll 8
            for (int k0 = 0; k0 < kWords; k0 += kStep) {
                __m256i p0 = _mm256_setzero_si256(), p1 = p0, p2 = p0, p3 = p0;
#pragma GCC unroll 8
                for (int k = k0; k < k0 + kStep; k++) {
                    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32 * k));
                    auto bcast = [k](const uint8_t* xq) { return _mm256_set1_epi32(static_cast<int>(load_u32(xq + 4 * k))); };
                    if constexpr (kSigned) {
                        const __m256i a = _mm256_abs_epi8(c);
                        d0 = _mm256_add_epi32(d0, _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(bcast(x0), c)), ones));
                        d1 = _mm256_add_epi32(d1, _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(bcast(x1), c)), ones));
                        d2 = _mm256_add_epi32(d2, _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(bcast(x2), c)), ones));
                        d3 = _mm256_add_epi32(d3, _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_sign_epi8(bcast(x3), c)), ones));
                        asm("" : "+x"(d0), "+x"(d1), "+x"(d2), "+x"(d3));
                    } else {
                        p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(c, bcast(x0)));
                        p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(c, bcast(x1)));
                        p2 = _mm256_add_epi16(p2, _mm256_maddubs_epi16(c, bcast(x2)));
                        p3 = _mm256_add_epi16(p3, _mm256_maddubs_epi16(c, bcast(x3)));
                        // in order: GCC otherwise sums the 8 words' products as a tree, every product live at once
                        asm("" : "+x"(p0), "+x"(p1), "+x"(p2), "+x"(p3));
                    }
                }
                if constexpr (!kSigned) {
                    d0 = _mm256_add_epi32(d0, _mm256_madd_epi16(p0, ones)), d1 = _mm256_add_epi32(d1, _mm256_madd_epi16(p1, ones));
                    d2 = _mm256_add_epi32(d2, _mm256_madd_epi16(p2, ones)), d3 = _mm256_add_epi32(d3, _mm256_madd_epi16(p3, ones));
                }
            }
            const __m256i dot[kTokens] = {d0, d1, d2, d3};
            const __m256 s = _mm256_loadu_ps(p.s + 8 * g);
            const int64_t term_at = kSuper ? ga / (256 / kGroup) * 16 + ga % (256 / kGroup) : ga;
#pragma GCC unroll 4
            for (int t = 0; t < kTokens; t++) {
                const float dx = xt[t]->d[kSuper ? ga * kGroup / 256 : ga];
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[t]), _mm256_mul_ps(s, _mm256_set1_ps(dx)), acc[t]);
                if constexpr (!kSigned)
                    acc[t] = _mm256_fmadd_ps(kMin ? _mm256_loadu_ps(p.o + 8 * g) : s, _mm256_set1_ps(xt[t]->s[term_at]), acc[t]);
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < kTokens; t++)
            if (t < nt) _mm256_maskstore_ps(y + (t0 + t) * y_stride, row_mask, acc[t]);
    }
}

}  // namespace

void gemm_quant(const Matmul& m, int64_t r0, int64_t r1) {
    const gguf::CodeLayout& layout = *quant_layout(m.type);
    const int64_t K = m.n_cols, group = layout.group;
    const size_t row_bytes = bytes_per_row(m.type, K);
    const bool is_signed = layout.zero == 128, super = activation_type(m.type) == Type::Q8_K;

    // The activations once per thread and product (Matmul::acts_key), as the AVX-512 kernels keep them.
    bool kept = false;
    const size_t act_bytes = static_cast<size_t>(m.n_tokens * (lane_act_bytes(K) + static_cast<int64_t>(sizeof(LaneAct))));
    auto mem = static_cast<uint8_t*>(scratch_keyed(ScratchSlot::ACTIVATIONS, act_bytes, m.acts_key, kept));
    auto acts = reinterpret_cast<LaneAct*>(mem + m.n_tokens * lane_act_bytes(K));
    if (!kept) prepare_lane_acts(m.type, false, static_cast<const uint8_t*>(m.x), K, m.n_tokens, mem, acts);

    // Columns in slices of kc: the slice of every token's activations stays in L2 while the panels pass.
    const int64_t kc = K <= 2048 ? K : 1024;
    const int64_t slice_groups = kc / group;
    auto wmem = static_cast<uint8_t*>(scratch(ScratchSlot::WEIGHTS, static_cast<size_t>(2 * kRows * kc + 2 * 4 * kRows * slice_groups)));
    const Panel8 panel{wmem, reinterpret_cast<float*>(wmem + kRows * kc), reinterpret_cast<float*>(wmem + kRows * kc) + kRows * slice_groups};
    uint8_t* tmp = wmem + kRows * kc + 2 * 4 * kRows * slice_groups;
    const int sums = is_signed ? 1 : int16_sums(m.type);
    with_decoder(m.type, [&]<class D>() {
        for (int64_t k0 = 0; k0 < K; k0 += kc) {
            const int64_t len = std::min(kc, K - k0), n_groups = len / group;
            for (int64_t r = r0; r < r1; r += kRows) {
                const int n = static_cast<int>(std::min<int64_t>(kRows, r1 - r));
                if (m.packed)  // whole panels (matmul_avx2.cpp)
                    panel_to_panel8(m.type, static_cast<const uint8_t*>(m.w) + r / kPanelRows * kPanelRows * row_bytes, static_cast<int>(r % kPanelRows / kRows),
                                    K, k0, len, panel);
                else
                    pack8<D>(static_cast<const uint8_t*>(m.w) + r * row_bytes, row_bytes, n, k0, len, static_cast<int>(group), layout.has_min,
                             is_signed, panel, tmp);
                const bool first = k0 == 0;
                float* y = m.y + r;
                auto run = [&]<int kGroup, bool kSigned, int kSums, bool kMin, bool kSuper>() {
                    tokens8<kGroup, kSigned, kSums, kMin, kSuper>(panel, k0 / group, n_groups, acts, m.n_tokens, y, m.y_stride, n, first);
                };
                if (is_signed)  // Q8_0, IQ4_NL (Q8_0 activations), IQ4_XS (Q8_K)
                    super ? run.template operator()<32, true, 1, false, true>() : run.template operator()<32, true, 1, false, false>();
                else if (group == 16)  // Q2_K (mins), Q3_K, Q6_K
                    layout.has_min ? run.template operator()<16, false, 2, true, true>() : run.template operator()<16, false, 2, false, true>();
                else if (super)  // Q4_K, Q5_K
                    sums >= 8 ? run.template operator()<32, false, 8, true, true>() : run.template operator()<32, false, 4, true, true>();
                else if (layout.has_min)  // Q4_1, Q5_1
                    sums >= 8 ? run.template operator()<32, false, 8, true, false>() : run.template operator()<32, false, 4, true, false>();
                else  // Q4_0, Q5_0
                    sums >= 8 ? run.template operator()<32, false, 8, false, false>() : run.template operator()<32, false, 4, false, false>();
            }
        }
    });
}

}  // namespace cpu_kernels::avx2
