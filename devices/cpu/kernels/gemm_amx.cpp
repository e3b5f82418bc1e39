// AMX tiles for the quantized matrix-matrix products (prefill): one tile instruction multiplies 16
// tokens' activations of one group (A, signed) by the group's slice of a packed 16-row panel (B, its
// VNNI layout already) into 16 × 16 int32 dot products, which AVX-512 then scales and accumulates.
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
// size changes. (The configurations are constants in memory: GCC 12 drops stores into a stack buffer
// whose only reader is ldtilecfg.)
void configure(int group) {
    static constexpr TileConfig kGroup16{16}, kGroup32{32};
    thread_local int configured_group = 0;
    if (configured_group == group) return;
    _tile_loadconfig(group == 16 ? &kGroup16 : &kGroup32);
    configured_group = group;
}

// acc[t] += dot[t] · s · d_x[t] (+ o · (d_x·Σq)[t]): the AVX-512 kernel's arithmetic, in its order.
template <bool kMin>
inline void scale_group(const int32_t (*dot)[16], const float* s, const float* o, const float* d, const float* m,
                        __m512 acc[kBlockTokens]) {
    const __m512 sv = _mm512_load_ps(s);
#pragma GCC unroll 16
    for (int t = 0; t < kBlockTokens; t++)
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(dot[t])), _mm512_mul_ps(sv, _mm512_set1_ps(d[t])), acc[t]);
    if (kMin) {
        const __m512 ov = _mm512_load_ps(o);
#pragma GCC unroll 16
        for (int t = 0; t < kBlockTokens; t++) acc[t] = _mm512_fmadd_ps(ov, _mm512_set1_ps(m[t]), acc[t]);
    }
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

template <int kGroup, bool kMin>
void tiles(const Panel& p, int64_t g0, int64_t n_groups, const uint8_t* acts, int64_t n_tokens, int64_t K, float* y,
           int64_t y_stride, int n_rows, bool first, const uint8_t* ahead, int64_t ahead_bytes) {
    configure(kGroup);
    // Lines of `ahead` per step of two groups, spread over all the steps of all token blocks.
    const int64_t n_steps = (n_tokens + kBlockTokens - 1) / kBlockTokens * (n_groups / 2);
    const int64_t lines_per_step = n_steps ? (ahead_bytes / 64 + n_steps - 1) / n_steps : 0;
    int64_t ahead_done = 0;
    const __mmask16 keep = static_cast<__mmask16>((1u << n_rows) - 1);
    const int64_t all_groups = K / kGroup;
    alignas(64) int32_t dots[2][2][kBlockTokens][16];  // [step parity][group of the pair][token][row]
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
        // Two groups per step (slices hold whole 64-element units, so n_groups is even), pipelined: the
        // tiles of the next step are multiplied and stored while this step's results are scaled, so
        // the vector loads do not wait for the tile stores.
        dot_pair<kGroup, false>(p, 0, block, g0, dots[0]);
        for (int64_t j = 0; j < n_groups; j += 2) {
            const int parity = static_cast<int>(j / 2) & 1;
            if (j + 2 < n_groups) {  // C tiles alternate too: tiles are not renamed
                if (parity)
                    dot_pair<kGroup, false>(p, j + 2, block, g0 + j + 2, dots[0]);
                else
                    dot_pair<kGroup, true>(p, j + 2, block, g0 + j + 2, dots[1]);
            }
            for (int64_t l = 0; l < lines_per_step && ahead_done < ahead_bytes; l++, ahead_done += 64)
                _mm_prefetch(reinterpret_cast<const char*>(ahead + ahead_done), _MM_HINT_T1);
            const int64_t g = g0 + j;
            for (int h = 0; h < 2; h++)
                scale_group<kMin>(dots[parity][h], p.s + 16 * (j + h), p.o + 16 * (j + h), d + kBlockTokens * (g + h),
                                  m + kBlockTokens * (g + h), acc);
        }
        for (int t = 0; t < n_block; t++) _mm512_mask_storeu_ps(yt + t * y_stride, keep, acc[t]);
    }
}

}  // namespace

size_t acts_bytes(int64_t n_tokens, int64_t K, int group) {
    return static_cast<size_t>((n_tokens + kBlockTokens - 1) / kBlockTokens) * block_bytes(K, group);
}

void prepare_acts(const GroupAct* x, int64_t n_tokens, int64_t K, int group, bool has_min, uint8_t* mem) {
    const int64_t n_groups = K / group;
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kBlockTokens) {
        uint8_t* block = mem + (t0 / kBlockTokens) * block_bytes(K, group);
        auto d = reinterpret_cast<float*>(block + kBlockTokens * K);
        float* m = d + kBlockTokens * n_groups;
        for (int t = 0; t < kBlockTokens; t++) {
            const bool real = t0 + t < n_tokens;  // padding tokens: zero quants and scales
            const GroupAct* a = x + t0 + t;
            for (int64_t g = 0; g < n_groups; g++) {
                uint8_t* q = block + (g * kBlockTokens + t) * group;
                if (real)
                    std::memcpy(q, a->q + g * group, static_cast<size_t>(group));
                else
                    std::memset(q, 0, static_cast<size_t>(group));
                d[g * kBlockTokens + t] = real ? a->d[g] : 0.0f;
                m[g * kBlockTokens + t] = real && has_min ? static_cast<const float*>(a->zero_or_sum)[g] : 0.0f;
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
                 int group, bool has_min, float* y, int64_t y_stride, int n_rows, bool first, const uint8_t* ahead,
                 int64_t ahead_bytes) {
    auto run = [&]<int kGroup, bool kMin>() {
        tiles<kGroup, kMin>(p, g0, n_groups, acts, n_tokens, K, y, y_stride, n_rows, first, ahead, ahead_bytes);
    };
    if (group == 32)
        has_min ? run.template operator()<32, true>() : run.template operator()<32, false>();
    else
        has_min ? run.template operator()<16, true>() : run.template operator()<16, false>();
}

}  // namespace cpu_kernels::avx512::amx
