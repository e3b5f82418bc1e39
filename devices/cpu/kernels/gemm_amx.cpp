// AMX tiles for the matrix-matrix products (prefill). Quantized weights: one tile instruction multiplies
// 16 tokens' activations of one group (A, signed) by the group's slice of a packed 16-row panel (B, its
// VNNI layout already) into 16 × 16 int32 dot products, which AVX-512 then scales and accumulates. F16
// and BF16 weights: bf16 tile products summed in f32 inside the C tiles over a whole column slice.
#include "devices/cpu/kernels/avx512_impl.h"

namespace cpu_kernels::avx512::amx {

namespace {

constexpr int kBlockTokens = 16;  // rows of an A tile and of a C tile

// Tokens are taken 16 at a time; per block: quants [group][16 tokens][group bytes] (one group of a
// block is one A tile, contiguous), then d_x [group][16] and d_x·Σq [group][16] (for types with mins).
size_t block_bytes(int64_t K, int group) { return static_cast<size_t>(kBlockTokens * K + 2 * 4 * kBlockTokens * (K / group)); }

// Palette 1's 64-byte configuration: bytes per row and rows of each tile. tmm0, tmm2: A (16 tokens ×
// group bytes); tmm1, tmm3: B (group/4 rows × 16 weight rows × 4 bytes); tmm4-7: C (16 × 16 int32).
struct alignas(64) TileConfig {
    uint8_t palette = 1;
    uint8_t start_row = 0;
    uint8_t reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};

    constexpr explicit TileConfig(int group) {
        const auto g = static_cast<uint8_t>(group);
        for (int a : {0, 2}) rows[a] = kBlockTokens, colsb[a] = g;
        for (int b : {1, 3}) rows[b] = static_cast<uint8_t>(g / 4), colsb[b] = 64;
        for (int c : {4, 5, 6, 7}) rows[c] = kBlockTokens, colsb[c] = 64;
    }
};
static_assert(sizeof(TileConfig) == 64);

// Tile configuration is per-thread state: each thread loads it on first use, and again when the group
// size changes (64: every tile 16 rows × 64 bytes, the F16/BF16 tiles). (The configurations are constants in memory: GCC 12 drops stores into a stack buffer
// whose only reader is ldtilecfg.)
void configure(int group) {
    static constexpr TileConfig kGroup32{32}, kGroup64{64};
    thread_local int configured_group = 0;
    if (configured_group == group) return;
    _tile_loadconfig(group == 32 ? &kGroup32 : &kGroup64);
    configured_group = group;
}

// The dot products of groups g, g + 1 (panel groups j, j + 1) of a block of tokens, into out[0], out[1],
// through C tiles 4, 5 or (kHigh) 6, 7. (Tile numbers are immediates spelled into the instructions.)
template <int kGroup, bool kHigh>
inline void dot_pair(const Panel& p, int64_t j, const uint8_t* block, int64_t g, int32_t (*out)[kBlockTokens][16]) {
    constexpr int64_t kCodeBytes = kGroup / 4 * 64;  // one group of the panel: a B tile
    _tile_loadd(0, block + g * kBlockTokens * kGroup, kGroup);
    _tile_loadd(1, p.codes + j * kCodeBytes, 64);
    _tile_loadd(2, block + (g + 1) * kBlockTokens * kGroup, kGroup);
    _tile_loadd(3, p.codes + (j + 1) * kCodeBytes, 64);
    if constexpr (kHigh) {
        _tile_zero(6);
        _tile_zero(7);
        _tile_dpbssd(6, 0, 1);
        _tile_dpbssd(7, 2, 3);
        _tile_stored(6, out[0], 64);
        _tile_stored(7, out[1], 64);
    } else {
        _tile_zero(4);
        _tile_zero(5);
        _tile_dpbssd(4, 0, 1);
        _tile_dpbssd(5, 2, 3);
        _tile_stored(4, out[0], 64);
        _tile_stored(5, out[1], 64);
    }
}

// Up to 8 groups of a 16-token block (their tile products in dots[group][token][row]), scaled token by
// token into acc: per group acc[t] += dot·s·d_x (+ o·d_x·Σq); or, for Q8_K activations (kSuper: the 8
// groups are one super-block, whose d_x is one), the groups' dot·s summed and multiplied by d_x once,
// each group's o·d_x·Σq added first. The AVX-512 kernel's arithmetic in its order, so the same bits.
// Meanwhile issue(q) starts the tile products of pair q of the next chunk (q < next_pairs), one pair
// every 4 tokens, so that the tile unit works while the vector units scale.
template <bool kSuper, bool kMin, int kCount, class Issue>
inline void scale_chunk(const int32_t (*dots)[kBlockTokens][16], const float* s, const float* o, const float* d,
                        const float* m, __m512 acc[kBlockTokens], int next_pairs, Issue&& issue) {
#pragma GCC unroll 16
    for (int t = 0; t < kBlockTokens; t++) {
        if (t % 4 == 0 && t / 4 < next_pairs) issue(t / 4);
        __m512 super = _mm512_setzero_ps();
#pragma GCC unroll 8
        for (int g = 0; g < kCount; g++) {
            const __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(dots[g][t]));
            if (kSuper)
                super = _mm512_fmadd_ps(dot, _mm512_load_ps(s + 16 * g), super);
            else
                acc[t] = _mm512_fmadd_ps(dot, _mm512_mul_ps(_mm512_load_ps(s + 16 * g), _mm512_set1_ps(d[kBlockTokens * g + t])), acc[t]);
            if (kMin) acc[t] = _mm512_fmadd_ps(_mm512_load_ps(o + 16 * g), _mm512_set1_ps(m[kBlockTokens * g + t]), acc[t]);
        }
        if (kSuper) acc[t] = _mm512_fmadd_ps(super, _mm512_set1_ps(d[t]), acc[t]);
    }
}

// 16 panel rows × n_tokens over groups [g0, g0 + n_groups) (an even count; whole super-blocks for
// kSuper) of 32-element groups, in chunks of 8 groups per 16-token block: the tile products of the
// next chunk go to memory while this chunk's are scaled.
template <bool kSuper, bool kMin>
void tiles(const Panel& p, int64_t g0, int64_t n_groups, const uint8_t* acts, int64_t n_tokens, int64_t K, float* y,
           int64_t y_stride, int n_rows, bool first, const uint8_t* ahead, int64_t ahead_bytes) {
    constexpr int kGroup = 32, kChunk = 8;
    configure(kGroup);
    const int64_t n_chunks = (n_groups + kChunk - 1) / kChunk;
    // Lines of `ahead` per chunk, spread over all the chunks of all token blocks.
    const int64_t n_steps = (n_tokens + kBlockTokens - 1) / kBlockTokens * n_chunks;
    const int64_t lines_per_step = n_steps ? (ahead_bytes / 64 + n_steps - 1) / n_steps : 0;
    int64_t ahead_done = 0;
    const __mmask16 keep = static_cast<__mmask16>((1u << n_rows) - 1);
    const int64_t all_groups = K / kGroup;
    alignas(64) int32_t dots[2][kChunk][kBlockTokens][16];  // [chunk parity][group][token][row]
    auto pairs_of = [&](int64_t c) { return static_cast<int>((n_groups - c * kChunk < kChunk ? n_groups - c * kChunk : kChunk) / 2); };
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kBlockTokens) {
        const int n_block = static_cast<int>(n_tokens - t0 < kBlockTokens ? n_tokens - t0 : kBlockTokens);
        const uint8_t* block = acts + (t0 / kBlockTokens) * block_bytes(K, kGroup);
        const auto d = reinterpret_cast<const float*>(block + kBlockTokens * K);
        const float* m = d + kBlockTokens * all_groups;
        float* yt = y + t0 * y_stride;
        __m512 acc[kBlockTokens];
#pragma GCC unroll 16
        for (int t = 0; t < kBlockTokens; t++)
            acc[t] = first || t >= n_block ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(keep, yt + t * y_stride);
        auto issue = [&](int64_t c, int q) {  // pair q of chunk c into dots[c & 1] (C tiles alternate)
            const int64_t j = c * kChunk + 2 * q;
            if (q & 1)
                dot_pair<kGroup, true>(p, j, block, g0 + j, &dots[c & 1][2 * q]);
            else
                dot_pair<kGroup, false>(p, j, block, g0 + j, &dots[c & 1][2 * q]);
        };
        for (int q = 0; q < pairs_of(0); q++) issue(0, q);
        for (int64_t c = 0; c < n_chunks; c++) {
            for (int64_t l = 0; l < lines_per_step && ahead_done < ahead_bytes; l++, ahead_done += 64)
                _mm_prefetch(reinterpret_cast<const char*>(ahead + ahead_done), _MM_HINT_T1);
            const int64_t j0 = c * kChunk, gs = g0 + j0;  // first group in the panel, in the activations
            const int next_pairs = c + 1 < n_chunks ? pairs_of(c + 1) : 0;
            auto issue_next = [&](int q) { issue(c + 1, q); };
            auto scale = [&]<int kCount>() {
                scale_chunk<kSuper, kMin, kCount>(dots[c & 1], p.s + 16 * j0, p.o + 16 * j0, d + kBlockTokens * gs,
                                                  m + kBlockTokens * gs, acc, next_pairs, issue_next);
            };
            if constexpr (kSuper) {
                scale.template operator()<8>();
            } else {
                switch (pairs_of(c)) {
                    case 4: scale.template operator()<8>(); break;
                    case 3: scale.template operator()<6>(); break;
                    case 2: scale.template operator()<4>(); break;
                    default: scale.template operator()<2>(); break;
                }
            }
        }
        for (int t = 0; t < n_block; t++) _mm512_mask_storeu_ps(yt + t * y_stride, keep, acc[t]);
    }
}

// ---- F16 / BF16 weights ----------------------------------------------------------------------------
//
// Tiles of this part are all 16 rows × 64 bytes (configuration 64): C tiles 0, 1 (16 tokens × 16 weight
// rows, f32), A tiles 2, 3 (16 tokens × 32 bf16: the high and low parts), B tiles 4-7 (16 pairs of
// columns × 16 weight rows × 2 bf16: high and low parts of two 16-row halves of a 32-row panel).

constexpr int64_t kFloatRows = 32, kFloatSlice = 1024, kTileBytes = 1024;

// 32 values (f16 or bf16) from src as their bf16 high and low parts, in order: dword j holds values
// 2j and 2j + 1, as a row of an A tile or a weight row's pairs for a B tile. BF16 has no low part.
template <bool kF16>
inline void split32(const uint16_t* src, __m512i& hi, __m512i& lo) {
    if constexpr (kF16) {
        const __m512 a = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
        const __m512 b = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 16)));
        hi = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(b, a));
        const auto widen = [](__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); };
        const __m512 ha = widen(_mm512_castsi512_si256(hi)), hb = widen(_mm512_extracti64x4_epi64(hi, 1));
        lo = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_sub_ps(b, hb), _mm512_sub_ps(a, ha)));  // exact
    } else {
        hi = _mm512_loadu_si512(src);
        lo = _mm512_setzero_si512();
    }
}

// Activations of columns [k0, k0 + n) as A tiles: [16-token block][32-column step][part] (kParts parts).
template <bool kF16>
void float_acts(const Matmul& m, int64_t k0, int64_t n, uint8_t* out) {
    constexpr int kParts = kF16 ? 2 : 1;
    const int64_t steps = n / 32;
    const auto x = static_cast<const uint16_t*>(m.x);
    for (int64_t t0 = 0; t0 < m.n_tokens; t0 += kBlockTokens)
        for (int64_t j = 0; j < steps; j++) {
            uint8_t* tile = out + ((t0 / kBlockTokens) * steps + j) * kParts * kTileBytes;
            for (int t = 0; t < kBlockTokens; t++) {
                __m512i hi = _mm512_setzero_si512(), lo = hi;
                if (t0 + t < m.n_tokens) split32<kF16>(x + (t0 + t) * m.n_cols + k0 + 32 * j, hi, lo);
                _mm512_store_si512(tile + 64 * t, hi);
                if (kF16) _mm512_store_si512(tile + kTileBytes + 64 * t, lo);
            }
        }
}

// Rows [r, r + n_rows) (≤ 32) of columns [k0, k0 + n) as B tiles: [step][half][part]. Row i's 16 pairs
// of a step are one vector; transposing 16 of them gives the tile (row p = pair p of the 16 rows).
template <bool kF16>
void float_panel(const Matmul& m, int64_t r, int n_rows, int64_t k0, int64_t n, uint8_t* out) {
    constexpr int kParts = kF16 ? 2 : 1;
    const auto w = static_cast<const uint16_t*>(m.w);
    for (int64_t j = 0; j < n / 32; j++)
        for (int half = 0; half < 2; half++) {
            __m512 hi[16], lo[16];
            for (int i = 0; i < 16; i++) {
                __m512i h = _mm512_setzero_si512(), l = h;
                if (16 * half + i < n_rows) split32<kF16>(w + (r + 16 * half + i) * m.n_cols + k0 + 32 * j, h, l);
                hi[i] = _mm512_castsi512_ps(h), lo[i] = _mm512_castsi512_ps(l);
            }
            uint8_t* tile = out + (2 * j + half) * kParts * kTileBytes;
            transpose16(hi);
            for (int p = 0; p < 16; p++) _mm512_store_ps(tile + 64 * p, hi[p]);
            if constexpr (kF16) {
                transpose16(lo);
                for (int p = 0; p < 16; p++) _mm512_store_ps(tile + kTileBytes + 64 * p, lo[p]);
            }
        }
}

// y (16 tokens × 32 rows of the panel) = or += the slice's sums; the two halves alternate so that
// consecutive tile products go to different C tiles.
template <bool kF16>
void float_tiles(const uint8_t* acts, const uint8_t* panel, int64_t steps, float* y, int64_t y_stride, int n_rows,
                 int n_tokens, bool first) {
    constexpr int kParts = kF16 ? 2 : 1;
    _tile_zero(0);
    _tile_zero(1);
    for (int64_t j = 0; j < steps; j++) {
        const uint8_t* a = acts + j * kParts * kTileBytes;
        const uint8_t* b = panel + 2 * j * kParts * kTileBytes;
        _tile_loadd(2, a, 64);
        _tile_loadd(4, b, 64);
        _tile_loadd(6, b + kParts * kTileBytes, 64);
        _tile_dpbf16ps(0, 2, 4);
        _tile_dpbf16ps(1, 2, 6);
        if constexpr (kF16) {
            _tile_loadd(3, a + kTileBytes, 64);
            _tile_loadd(5, b + kTileBytes, 64);
            _tile_loadd(7, b + 3 * kTileBytes, 64);
            _tile_dpbf16ps(0, 2, 5);
            _tile_dpbf16ps(1, 2, 7);
            _tile_dpbf16ps(0, 3, 4);
            _tile_dpbf16ps(1, 3, 6);
            _tile_dpbf16ps(0, 3, 5);
            _tile_dpbf16ps(1, 3, 7);
        }
    }
    alignas(64) float sums[2][kBlockTokens][16];
    _tile_stored(0, sums[0], 64);
    _tile_stored(1, sums[1], 64);
    for (int half = 0; half < 2; half++) {
        const int rows = n_rows - 16 * half;
        if (rows <= 0) break;
        const __mmask16 keep = static_cast<__mmask16>(rows >= 16 ? 0xFFFF : (1u << rows) - 1);
        for (int t = 0; t < n_tokens; t++) {
            float* yt = y + t * y_stride + 16 * half;
            const __m512 v = _mm512_load_ps(sums[half][t]);
            _mm512_mask_storeu_ps(yt, keep, first ? v : _mm512_add_ps(v, _mm512_maskz_loadu_ps(keep, yt)));
        }
    }
}

template <bool kF16>
void gemm_float_type(const Matmul& m, int64_t r0, int64_t r1) {
    constexpr int kParts = kF16 ? 2 : 1;
    const int64_t K = m.n_cols, blocks = (m.n_tokens + kBlockTokens - 1) / kBlockTokens;
    const int64_t kc = K < kFloatSlice ? K : kFloatSlice;
    auto acts = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, blocks * (kc / 32) * kParts * kTileBytes));
    auto panel = static_cast<uint8_t*>(scratch(ScratchSlot::WEIGHTS, (kc / 32) * 2 * kParts * kTileBytes));
    configure(64);
    for (int64_t k0 = 0; k0 < K; k0 += kc) {
        const int64_t n = K - k0 < kc ? K - k0 : kc, steps = n / 32;
        float_acts<kF16>(m, k0, n, acts);
        for (int64_t r = r0; r < r1; r += kFloatRows) {
            const int n_rows = static_cast<int>(r1 - r < kFloatRows ? r1 - r : kFloatRows);
            float_panel<kF16>(m, r, n_rows, k0, n, panel);
            for (int64_t b = 0; b < blocks; b++) {
                const int n_tokens = static_cast<int>(m.n_tokens - b * kBlockTokens < kBlockTokens ? m.n_tokens - b * kBlockTokens : kBlockTokens);
                float_tiles<kF16>(acts + b * steps * kParts * kTileBytes, panel, steps,
                                  m.y + b * kBlockTokens * m.y_stride + r, m.y_stride, n_rows, n_tokens, k0 == 0);
            }
        }
    }
}

}  // namespace

void gemm_float(const Matmul& m, int64_t r0, int64_t r1) {
    if (m.type == gguf::Type::F16)
        gemm_float_type<true>(m, r0, r1);
    else
        gemm_float_type<false>(m, r0, r1);
}

size_t acts_bytes(int64_t n_tokens, int64_t K, int group) {
    return static_cast<size_t>((n_tokens + kBlockTokens - 1) / kBlockTokens) * block_bytes(K, group);
}

void prepare_acts(gguf::Type act, const uint8_t* x, int64_t n_tokens, int64_t K, int group, bool has_min, uint8_t* mem) {
    const int64_t n_groups = K / group;
    const size_t row_bytes = *gguf::row_bytes(act, K);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kBlockTokens) {
        uint8_t* block = mem + (t0 / kBlockTokens) * block_bytes(K, group);
        auto d = reinterpret_cast<float*>(block + kBlockTokens * K);
        float* m = d + kBlockTokens * n_groups;
        for (int t = 0; t < kBlockTokens; t++) {
            if (t0 + t >= n_tokens) {  // padding tokens: zero quants and scales
                for (int64_t g = 0; g < n_groups; g++) {
                    std::memset(block + (g * kBlockTokens + t) * group, 0, static_cast<size_t>(group));
                    d[g * kBlockTokens + t] = m[g * kBlockTokens + t] = 0.0f;
                }
                continue;
            }
            const uint8_t* row = x + (t0 + t) * row_bytes;
            if (act == gguf::Type::Q8_K) {  // 256-element blocks; d_x·Σq from the 16-element sums
                for (int64_t g = 0; g < n_groups; g++) {
                    auto blk = reinterpret_cast<const gguf::block_q8_K*>(row) + g * group / gguf::QK_K;
                    const int64_t j = g % (gguf::QK_K / group);
                    std::memcpy(block + (g * kBlockTokens + t) * group, blk->qs + j * group, static_cast<size_t>(group));
                    d[g * kBlockTokens + t] = blk->d;
                    int32_t sum = 0;
                    if (has_min)
                        for (int i = 0; i < group / 16; i++) sum += blk->bsums[j * group / 16 + i];
                    m[g * kBlockTokens + t] = blk->d * static_cast<float>(sum);
                }
                continue;
            }
            // Q8_0 and Q8_1: one 32-element block per group (d, [d·Σq,] quants)
            const bool q8_1 = act == gguf::Type::Q8_1;
            const int bpb = q8_1 ? 36 : 34;
            for (int64_t g = 0; g < n_groups; g++) {
                const uint8_t* blk = row + g * bpb;
                const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + (q8_1 ? 4 : 2)));
                _mm256_store_si256(reinterpret_cast<__m256i*>(block + (g * kBlockTokens + t) * group), q);
                d[g * kBlockTokens + t] = half_to_float(load_u16(blk));
                float sum = 0.0f;
                if (has_min)
                    sum = q8_1 ? half_to_float(load_u16(blk + 2))
                               : d[g * kBlockTokens + t] * static_cast<float>(_mm512_reduce_add_epi32(
                                                               _mm512_madd_epi16(_mm512_cvtepi8_epi16(q), _mm512_set1_epi16(1))));
                m[g * kBlockTokens + t] = sum;
            }
        }
    }
}

void make_signed(const Panel& p, int64_t k_len, int zero) {
    const __m512i z = _mm512_set1_epi8(static_cast<char>(zero));
    for (int64_t i = 0; i < 16 * k_len; i += 64) {
        uint8_t* c = p.codes + i;
        _mm512_store_si512(c, _mm512_sub_epi8(_mm512_load_si512(c), z));
    }
}

void gemm_tokens(const Panel& p, int64_t g0, int64_t n_groups, const uint8_t* acts, int64_t n_tokens, int64_t K,
                 bool has_min, bool super, float* y, int64_t y_stride, int n_rows, bool first, const uint8_t* ahead,
                 int64_t ahead_bytes) {
    auto run = [&]<bool kSuper, bool kMin>() {
        tiles<kSuper, kMin>(p, g0, n_groups, acts, n_tokens, K, y, y_stride, n_rows, first, ahead, ahead_bytes);
    };
    if (super)
        has_min ? run.template operator()<true, true>() : run.template operator()<true, false>();
    else
        has_min ? run.template operator()<false, true>() : run.template operator()<false, false>();
}

}  // namespace cpu_kernels::avx512::amx
