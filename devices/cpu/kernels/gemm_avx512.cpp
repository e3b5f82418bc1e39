// AVX-512 matrix-matrix products of quantized weights (prefill). Lanes run across rows: 16 rows are
// decoded once into a panel where one zmm holds 4 consecutive codes of each row, so one vpdpbusd
// with a broadcast 4-byte slice of a token's activation advances 16 dot products, and each panel
// serves every token. Scales are applied once per group (16 or 32 elements) per token.
#include "devices/cpu/kernels/avx512_impl.h"

namespace cpu_kernels::avx512 {

using gguf::Type;

namespace {

constexpr int kPanelRows = 16;
constexpr int kTileTokens = 8;

// One token's activation per group: the quants, d_x, and −zero·Σq (int32) or d_x·Σq (float).
struct GroupAct {
    const int8_t* q;
    const float* d;
    const void* zero_or_sum;
};

// In-register transpose of a 16×16 matrix of int32 (the float transpose moves lanes, whatever they hold).
void transpose16(__m512i r[16]) {
    __m512 f[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) f[i] = _mm512_castsi512_ps(r[i]);
    avx512::transpose16(f);
#pragma GCC unroll 16
    for (int i = 0; i < 16; i++) r[i] = _mm512_castps_si512(f[i]);
}

template <class D>
void pack_panel(const uint8_t* w, size_t row_bytes, int n_rows, int64_t K, int group, const Panel& p) {
    constexpr int kChunks = D::kUnit / 64;
    const size_t unit_bytes = D::kUnit == 64 ? 2 * D::kBpb : D::kBpb;
    const int groups_per_unit = D::kUnit / group;
    alignas(64) float tmp[2][16];
    for (int64_t i = 0; i < K / D::kUnit; i++) {
        for (int r = 0; r < kPanelRows; r++) {
            float* s = p.s + i * groups_per_unit * 16 + r;
            float* o = p.o + i * groups_per_unit * 16 + r;
            if (r < n_rows) {
                const UnitScales us = D::unit(w + r * row_bytes + i * unit_bytes);
                _mm512_store_ps(tmp[0], us.s);
                _mm512_store_ps(tmp[1], us.o);
                for (int g = 0; g < groups_per_unit; g++) s[16 * g] = tmp[0][g], o[16 * g] = tmp[1][g];
            } else {
                for (int g = 0; g < groups_per_unit; g++) s[16 * g] = 0.0f, o[16 * g] = 0.0f;
            }
        }
        for (int c = 0; c < kChunks; c++) {
            __m512i rows[16];
#pragma GCC unroll 16
            for (int r = 0; r < kPanelRows; r++)
                rows[r] = r < n_rows ? D::codes(w + r * row_bytes + i * unit_bytes, c) : _mm512_setzero_si512();
            transpose16(rows);
            uint8_t* dst = p.codes + (i * kChunks + c) * 16 * 64;
#pragma GCC unroll 16
            for (int k = 0; k < 16; k++) _mm512_store_si512(dst + 64 * k, rows[k]);
        }
    }
}

// Integer dot products of group j of the panel (16 rows) with group g of N tokens' activations,
// starting from the zero-point correction.
template <int N, bool kMin, int kGroup>
inline void group_dots(const Panel& p, int64_t j, int64_t g, const GroupAct* x, __m512i dot[N]) {
#pragma GCC unroll 8
    for (int t = 0; t < N; t++)
        dot[t] = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(static_cast<const int32_t*>(x[t].zero_or_sum)[g]);
    const uint8_t* a = p.codes + j * (kGroup / 4) * 64;
#pragma GCC unroll 8
    for (int k = 0; k < kGroup / 4; k++) {
        const __m512i codes = _mm512_load_si512(a + 64 * k);
#pragma GCC unroll 8
        for (int t = 0; t < N; t++)
            dot[t] = _mm512_dpbusd_epi32(dot[t], codes, _mm512_set1_epi32(static_cast<int>(load_u32(
                                                            reinterpret_cast<const uint8_t*>(x[t].q) + g * kGroup + 4 * k))));
    }
}

// 16 panel rows × N tokens; the panel holds groups [g0, g0 + n_groups) of its rows. Adds to y unless
// `first`. kSuper: the activations are Q8_K, whose d_x is one per 256 elements, so the group sums are
// scaled by the weights' scales alone and by d_x once per super-block.
template <int N, bool kMin, int kGroup, bool kSuper>
void gemm_tile(const Panel& p, int64_t g0, int64_t n_groups, const GroupAct* x, float* y, int64_t y_stride,
               int n_rows, bool first) {
    const __mmask16 keep = static_cast<__mmask16>((1u << n_rows) - 1);
    __m512 acc[N];
#pragma GCC unroll 8
    for (int t = 0; t < N; t++) acc[t] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(keep, y + t * y_stride);
    constexpr int64_t per_super = kSuper ? 256 / kGroup : 1;
    for (int64_t j0 = 0; j0 < n_groups; j0 += per_super) {
        __m512 super[N];
#pragma GCC unroll 8
        for (int t = 0; t < N; t++) super[t] = _mm512_setzero_ps();
        for (int64_t j = j0; j < j0 + per_super; j++) {
            const int64_t g = g0 + j;  // in the activations; j in the panel
            __m512i dot[N];
            group_dots<N, kMin, kGroup>(p, j, g, x, dot);
            const __m512 s = _mm512_load_ps(p.s + 16 * j);
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) {
                if (kSuper)
                    super[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[t]), s, super[t]);
                else
                    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[t]), _mm512_mul_ps(s, _mm512_set1_ps(x[t].d[g])), acc[t]);
            }
            if (kMin) {
                const __m512 o = _mm512_load_ps(p.o + 16 * j);
#pragma GCC unroll 8
                for (int t = 0; t < N; t++)
                    acc[t] = _mm512_fmadd_ps(o, _mm512_set1_ps(static_cast<const float*>(x[t].zero_or_sum)[g]), acc[t]);
            }
        }
        if (kSuper)
#pragma GCC unroll 8
            for (int t = 0; t < N; t++) acc[t] = _mm512_fmadd_ps(super[t], _mm512_set1_ps(x[t].d[g0 + j0]), acc[t]);
    }
#pragma GCC unroll 8
    for (int t = 0; t < N; t++) _mm512_mask_storeu_ps(y + t * y_stride, keep, acc[t]);
}

template <bool kMin, int kGroup, bool kSuper>
void gemm_tokens(const Panel& p, int64_t g0, int64_t n_groups, const GroupAct* x, int64_t n_tokens, float* y,
                 int64_t y_stride, int n_rows, bool first) {
    int64_t t = 0;
    for (; t + kTileTokens <= n_tokens; t += kTileTokens)
        gemm_tile<kTileTokens, kMin, kGroup, kSuper>(p, g0, n_groups, x + t, y + t * y_stride, y_stride, n_rows, first);
    float* yt = y + t * y_stride;
    switch (n_tokens - t) {
#define TINYLLM_TAIL(n) \
        case n: gemm_tile<n, kMin, kGroup, kSuper>(p, g0, n_groups, x + t, yt, y_stride, n_rows, first); break;
        TINYLLM_TAIL(7) TINYLLM_TAIL(6) TINYLLM_TAIL(5) TINYLLM_TAIL(4) TINYLLM_TAIL(3) TINYLLM_TAIL(2) TINYLLM_TAIL(1)
#undef TINYLLM_TAIL
        default: break;
    }
}

// The activations of every token per group (format activation_type(type)), in `mem`:
// per token K quants, then n_groups d_x and n_groups −zero·Σq or d_x·Σq.
void prepare_group_acts(Type type, const uint8_t* x, int64_t K, int64_t n_tokens, uint8_t* mem, GroupAct* out) {
    const gguf::CodeLayout& layout = *quant_layout(type);
    const Type act = activation_type(type);
    const size_t row_bytes = bytes_per_row(act, K);
    const int64_t group = layout.group, n_groups = K / group;
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t* row = x + t * row_bytes;
        auto q = reinterpret_cast<int8_t*>(mem + t * (K + 8 * n_groups));
        auto d = reinterpret_cast<float*>(q + K);
        float* s = d + n_groups;
        auto corr = reinterpret_cast<int32_t*>(s);
        out[t] = {q, d, s};
        if (act == Type::Q8_K) {
            for (int64_t b = 0; b < K / gguf::QK_K; b++) {
                auto blk = reinterpret_cast<const gguf::block_q8_K*>(row) + b;
                std::memcpy(q + b * gguf::QK_K, blk->qs, gguf::QK_K);
                for (int64_t j = 0; j < gguf::QK_K / group; j++) {
                    const int64_t g = b * (gguf::QK_K / group) + j;
                    int32_t sum = 0;
                    for (int64_t i = 0; i < group / 16; i++) sum += blk->bsums[j * group / 16 + i];
                    d[g] = blk->d;
                    if (layout.has_min)
                        s[g] = blk->d * static_cast<float>(sum);
                    else
                        corr[g] = -layout.zero * sum;
                }
            }
            continue;
        }
        const bool q8_1 = act == Type::Q8_1;  // Q8_0 and Q8_1: one group per block
        const int bpb = q8_1 ? 36 : 34;
        for (int64_t g = 0; g < n_groups; g++) {
            const uint8_t* blk = row + g * bpb;
            const __m256i qv = _mm256_loadu_si256((const __m256i*)(blk + (q8_1 ? 4 : 2)));
            _mm256_storeu_si256((__m256i*)(q + 32 * g), qv);
            const int32_t sum = _mm512_reduce_add_epi32(_mm512_madd_epi16(_mm512_cvtepi8_epi16(qv), _mm512_set1_epi16(1)));
            d[g] = half_to_float(load_u16(blk));
            if (!layout.has_min)
                corr[g] = -layout.zero * sum;
            else
                s[g] = q8_1 ? half_to_float(load_u16(blk + 2)) : d[g] * static_cast<float>(sum);
        }
    }
}

}  // namespace

void gemm_quant(const Matmul& m, int64_t r0, int64_t r1) {
    const gguf::CodeLayout& layout = *quant_layout(m.type);
    const int64_t K = m.n_cols, group = layout.group, n_groups = K / group;
    const size_t row_bytes = bytes_per_row(m.type, K);

    // On AMX the activations go from their rows straight into 16-token tiles; else into per-token
    // groups. 16-element groups (q2_K, q3_K, q6_K) stay on AVX-512: a tile product per 16 columns does
    // not pay for storing and scaling its results (bench_cpu_kernels: 0.5-0.8× on 100M shapes; 1.0×
    // with super-block scaling). They are prepared once per thread and product: the thread's later row
    // ranges of the same product (m.acts_key) find them in the scratch slot.
    const bool amx = amx_active() && group == 32;
    const size_t acts_bytes = amx ? amx::acts_bytes(m.n_tokens, K, static_cast<int>(group))
                                  : m.n_tokens * (K + 8 * n_groups + sizeof(GroupAct));
    bool kept = false;
    auto acts = static_cast<uint8_t*>(scratch_keyed(ScratchSlot::ACTIVATIONS, acts_bytes, m.acts_key, kept));
    uint8_t* amx_acts = acts;
    auto groups = reinterpret_cast<GroupAct*>(acts + m.n_tokens * (K + 8 * n_groups));
    if (!kept && amx)
        amx::prepare_acts(activation_type(m.type), static_cast<const uint8_t*>(m.x), m.n_tokens, K, static_cast<int>(group),
                          layout.has_min, amx_acts);
    else if (!kept)
        prepare_group_acts(m.type, static_cast<const uint8_t*>(m.x), K, m.n_tokens, acts, groups);

    // Columns in slices of kc, so that the slice of every token's activations stays in L2 while all
    // panels pass over it; each slice of a panel is packed once.
    const bool super = activation_type(m.type) == Type::Q8_K;
    with_decoder(m.type, [&]<class D>() {
        const int64_t kc = K <= 2048 ? K : 1024;  // a multiple of every unit (64, 256)
        const int64_t slice_groups = kc / group, unit_bytes = D::kUnit == 64 ? 2 * D::kBpb : D::kBpb;
        auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::WEIGHTS, 16 * kc + 2 * 64 * slice_groups));
        for (int64_t k0 = 0; k0 < K; k0 += kc) {
            const int64_t k_len = K - k0 < kc ? K - k0 : kc, g0 = k0 / group, k_groups = k_len / group;
            const Panel panel{mem, reinterpret_cast<float*>(mem + 16 * kc),
                              reinterpret_cast<float*>(mem + 16 * kc + 64 * slice_groups)};
            for (int64_t r = r0; r < r1; r += kPanelRows) {
                const int n_rows = static_cast<int>(r1 - r < kPanelRows ? r1 - r : kPanelRows);
                const uint8_t* w = static_cast<const uint8_t*>(m.w) + r * row_bytes + (k0 / D::kUnit) * unit_bytes;
                // AMX multiplies signed codes: the zero point comes off as the panel is unpacked
                if (m.packed)
                    packed_to_panel(m.type, static_cast<const uint8_t*>(m.w) + (r / kPanelRows) * kPanelRows * row_bytes, K, k0,
                                    k_len, panel, amx);
                else
                    pack_panel<D>(w, row_bytes, n_rows, k_len, static_cast<int>(group), panel);
                if (amx && !m.packed && layout.zero) amx::make_signed(panel, k_len, layout.zero);
                const bool first = k0 == 0;
                float* y = m.y + r;
                if (amx) {
                    // The next panel's slice streams in from memory while this one's tiles run.
                    const uint8_t* ahead = nullptr;
                    int64_t ahead_bytes = 0;
                    if (m.packed && r + kPanelRows < r1) {
                        const int64_t begin = panel_code_bytes(m.type, k0);
                        ahead = static_cast<const uint8_t*>(m.w) + (r / kPanelRows + 1) * kPanelRows * row_bytes + begin;
                        ahead_bytes = panel_code_bytes(m.type, k0 + k_len) - begin;
                    }
                    amx::gemm_tokens(panel, g0, k_groups, amx_acts, m.n_tokens, K, layout.has_min, super, y, m.y_stride, n_rows,
                                     first, ahead, ahead_bytes);
                    continue;
                }
                auto run = [&]<bool kMin, int kGroup, bool kSuper>() {
                    gemm_tokens<kMin, kGroup, kSuper>(panel, g0, k_groups, groups, m.n_tokens, y, m.y_stride, n_rows, first);
                };
                if (!super)  // Q8_0 / Q8_1 activations: 32-element groups
                    layout.has_min ? run.template operator()<true, 32, false>() : run.template operator()<false, 32, false>();
                else if (group == 32)
                    layout.has_min ? run.template operator()<true, 32, true>() : run.template operator()<false, 32, true>();
                else
                    layout.has_min ? run.template operator()<true, 16, true>() : run.template operator()<false, 16, true>();
            }
        }
    });
}

}  // namespace cpu_kernels::avx512
