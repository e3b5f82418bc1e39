// AVX-512 attention over a KV cache with an online softmax. The query heads that share a KV head
// (grouped-query) are processed together so each key and value row is read from memory once:
// - decode with 32/64/128-wide heads (attend_decode): blocks of 32 keys, rows converted straight into
//   registers for up to 4 heads at once, one horizontal-sum tree over (key, head) dot products;
// - prefill of whole tokens (attend_tile): tiles of query tokens over blocks of 64 keys converted and
//   transposed once into a small f32 tile;
// - any other dims (attend): 16 keys at a time through an f32 tile, 16 dot products reduced at once.
#include "devices/cpu/kernels/avx512_impl.h"

#include <cmath>
#include <utility>


namespace cpu_kernels::avx512 {

using gguf::Type;

namespace {

// Lane i of the result is the sum of the 16 lanes of v[i].
[[gnu::always_inline]] inline __m512 sum16(const __m512 v[16]) {
    __m512 a[8], b[4], c[2];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)  // per 128-bit lane: [v2i 0+2, v2i+1 0+2, v2i 1+3, v2i+1 1+3]
        a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {  // per 128-bit lane: the lane's sums of v4i .. v4i+3
        const __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
        b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0x88), _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], 0xdd));
    return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x88), _mm512_shuffle_f32x4(c[0], c[1], 0xdd));
}

__mmask16 tail_mask(int64_t left) { return left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1); }

constexpr int64_t kScratchSkew = 5 * 16;  // floats: 5 cache lines
// Prefill: query tokens sharing each converted block of keys and values, as many as keep their
// accumulators within kTileAccBytes (32 for 64-wide heads in groups of up to 8; converting a block costs
// about what 8 rows' dot products do, so 8 tokens spent a third of the time converting).
constexpr int kQueryTile = 32;
constexpr int64_t kTileAccBytes = 64 << 10;
constexpr int kKeyBlock = 64;           // prefill: keys per softmax update (decode: 16)

float max_f(float a, float b) { return a > b ? a : b; }  // inputs are never NaN; no libm call
float exp_f(float x) { return _mm512_cvtss_f32(exp_ps(_mm512_set1_ps(x))); }

// Chunk c (16 values) of a cached row as f32, as ggml dequantizes it: d·q (Q8_0); d·(u − 8) with value
// i of a block in the low nibble of byte i and value i + 16 in its high nibble (Q4_0).
template <Type T>
[[gnu::always_inline]] inline __m512 row_chunk(const uint8_t* row, int c) {
    if constexpr (T == Type::F32) {
        return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + 16 * c);
    } else if constexpr (T == Type::F16) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row) + c));
    } else if constexpr (T == Type::Q8_0) {
        const auto& b = reinterpret_cast<const gguf::block_q8_0*>(row)[c / 2];
        const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16 * (c % 2))));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(half_to_float(b.d)));
    } else {
        static_assert(T == Type::Q4_0);
        const auto& b = reinterpret_cast<const gguf::block_q4_0*>(row)[c / 2];
        const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)));
        const __m512i q = c % 2 ? _mm512_srli_epi32(u, 4) : _mm512_and_si512(u, _mm512_set1_epi32(15));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(8))), _mm512_set1_ps(half_to_float(b.d)));
    }
}

// n rows of Q8_0 / Q4_0 blocks (dim values each) into buf, rows `stride` floats apart.
template <Type T>
void decode_rows(const KvView& kv, int64_t hk, int64_t row0, int n, int64_t dim, float* buf, int64_t stride) {
    for (int j = 0; j < n; j++) {
        const uint8_t* row = kv.at(row0 + j, hk);
        for (int c = 0; c < dim / 16; c++) _mm512_store_ps(buf + j * stride + 16 * c, row_chunk<T>(row, c));
    }
}

// Rows row0 .. row0+n-1 of KV head hk as f32 rows `stride` floats apart: the cache itself for F32, else
// converted into buf (16·chunks floats per row, zero-padded; Q8_0 / Q4_0 a block of 32 at a time).
const float* cache_rows(const Attention& a, const KvView& kv, int64_t hk, int64_t row0, int n, int64_t dim, int64_t chunks,
                        float* buf, int64_t& stride) {
    if (a.kv_type == Type::F32) {
        stride = kv.pos_bytes / 4;
        return reinterpret_cast<const float*>(kv.at(row0, hk));
    }
    stride = 16 * chunks;
    if (a.kv_type == Type::Q8_0) {
        decode_rows<Type::Q8_0>(kv, hk, row0, n, dim, buf, stride);
    } else if (a.kv_type == Type::Q4_0) {
        decode_rows<Type::Q4_0>(kv, hk, row0, n, dim, buf, stride);
    } else {
        for (int j = 0; j < n; j++) {
            const uint16_t* h = reinterpret_cast<const uint16_t*>(kv.at(row0 + j, hk));
            for (int64_t c = 0; c < chunks; c++)
                _mm512_store_ps(buf + j * stride + 16 * c, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(dim - 16 * c), h + 16 * c)));
        }
    }
    return buf;
}

// The online-softmax state of one query head.
struct HeadState {
    float max, sum;
    float* acc;  // Dv (in 16-float chunks)
};

// f(0), f(1), ..., f(N-1), unrolled at compile time.
template <int N, class F>
[[gnu::always_inline]] inline void unrolled(F&& f) {
    [&]<int... I>(std::integer_sequence<int, I...>) { (f(I), ...); }(std::make_integer_sequence<int, N>{});
}

// The online-softmax update of one query head with a block of n_sub × 16 logits (lanes outside `valid`
// do not count), then the weighted value rows 0 .. n_keys-1 (rows outside `valid` get weight 0) into its
// accumulator. One maximum, one sum and one correction per block: the horizontal reductions cost as
// much as the block's dot products when a block is 16 keys.
template <int kVC>
[[gnu::always_inline]] inline void softmax_accumulate(const Attention& a, const __m512* scaled, const __mmask16* valid, int n_sub,
                                                      const float* v, int64_t v_stride, int n_keys, int64_t vc, HeadState& h) {
    __m512 logits[kKeyBlock / 16];
    __m512 top = _mm512_set1_ps(-INFINITY);
    for (int s = 0; s < n_sub; s++) {
        logits[s] = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid[s], scaled[s]);
        top = _mm512_max_ps(top, logits[s]);
    }
    const float new_max = max_f(h.max, _mm512_reduce_max_ps(top));
    alignas(64) float p[kKeyBlock];
    __m512 total = _mm512_setzero_ps();
    for (int s = 0; s < n_sub; s++) {
        const __m512 pv = _mm512_maskz_mov_ps(valid[s], exp_ps(_mm512_sub_ps(logits[s], _mm512_set1_ps(new_max))));
        _mm512_store_ps(p + 16 * s, pv);
        total = _mm512_add_ps(total, pv);
    }
    const float correction = exp_f(h.max - new_max);  // 0 on the first block (max = −∞)
    h.sum = h.sum * correction + _mm512_reduce_add_ps(total);
    h.max = new_max;
    if constexpr (kVC != 0) {
        __m512 acc[kVC];
        unrolled<kVC>([&](int c) { acc[c] = _mm512_mul_ps(_mm512_load_ps(h.acc + 16 * c), _mm512_set1_ps(correction)); });
        for (int j = 0; j < n_keys; j++) {
            const float* row = v + j * v_stride;
            const __m512 pj = _mm512_set1_ps(p[j]);
            unrolled<kVC>([&](int c) { acc[c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(row + 16 * c), acc[c]); });
        }
        unrolled<kVC>([&](int c) { _mm512_store_ps(h.acc + 16 * c, acc[c]); });
    } else {
        // 8 whole chunks at a time, each summed over the keys in order: 8 independent chains
        int64_t c = 0;
        for (; 16 * (c + 8) <= a.head_dim_v; c += 8) {
            __m512 acc[8];
            unrolled<8>([&](int i) { acc[i] = _mm512_mul_ps(_mm512_load_ps(h.acc + 16 * (c + i)), _mm512_set1_ps(correction)); });
            for (int j = 0; j < n_keys; j++) {
                const float* row = v + j * v_stride + 16 * c;
                const __m512 pj = _mm512_set1_ps(p[j]);
                unrolled<8>([&](int i) { acc[i] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(row + 16 * i), acc[i]); });
            }
            unrolled<8>([&](int i) { _mm512_store_ps(h.acc + 16 * (c + i), acc[i]); });
        }
        for (; c < vc; c++) {
            const __mmask16 mask = tail_mask(a.head_dim_v - 16 * c);
            __m512 acc = _mm512_mul_ps(_mm512_load_ps(h.acc + 16 * c), _mm512_set1_ps(correction));
            for (int j = 0; j < n_keys; j++) acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(mask, v + j * v_stride + 16 * c), acc);
            _mm512_store_ps(h.acc + 16 * c, acc);
        }
    }
}

// Query (t, h)'s output: its accumulator over the softmax denominator (with the sink, if any).
void finish_head(const Attention& a, int64_t t, int64_t h, const HeadState& st, int64_t vc) {
    float scale = 1.0f / st.sum;
    if (a.sinks) {  // the sink joins the denominator, carrying no value
        const float sink = a.sinks[h], new_max = max_f(st.max, sink);
        const float correction = exp_f(st.max - new_max);
        scale = correction / (st.sum * correction + exp_f(sink - new_max));
    }
    float* out = a.out + t * a.out_token_stride + h * a.out_head_stride;
    for (int64_t c = 0; c < vc; c++)
        _mm512_mask_storeu_ps(out + 16 * c, tail_mask(a.head_dim_v - 16 * c), _mm512_mul_ps(_mm512_load_ps(st.acc + 16 * c), _mm512_set1_ps(scale)));
}

// One block of nb ≤ 16 keys for one query head, any head dims (runtime loops with masks for the last
// chunk): logits, softmax update, value accumulation.
void attend_block(const Attention& a, const float* q, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                  int nb, int64_t kc, int64_t vc, HeadState& h) {
    // Chunk by chunk, the 16 keys' sums side by side: 16 independent chains, where one key at a time
    // waited on the FMA latency (36 dependent FMAs for MLA's 576-wide rows); each sum still runs over
    // the chunks in order, so the bits are the same.
    const float* rows[16];
    __m512 dots[16];
    unrolled<16>([&](int j) {
        rows[j] = k + (j < nb ? j : 0) * k_stride;  // past nb: a valid row, masked below
        dots[j] = _mm512_setzero_ps();
    });
    for (int64_t c = 0; c < kc; c++) {
        const __mmask16 mask = tail_mask(a.head_dim_k - 16 * c);
        const __m512 qc = _mm512_maskz_loadu_ps(mask, q + 16 * c);
        unrolled<16>([&](int j) { dots[j] = _mm512_fmadd_ps(qc, _mm512_maskz_loadu_ps(mask, rows[j] + 16 * c), dots[j]); });
    }
    const __mmask16 valid = tail_mask(nb);
    const __m512 scaled = _mm512_mul_ps(sum16(dots), _mm512_set1_ps(a.scale));
    softmax_accumulate<0>(a, &scaled, &valid, 1, v, v_stride, nb, vc, h);
}

// Query token t, heads [h_begin, h_end), any head dims (MLA's differ: 576 and 512), 16
// keys at a time. For each block of keys the KV heads are
// taken in turn: the block's K and V rows of one KV head are converted once and used by the query
// heads that share it, and consecutive KV heads' rows are neighbours in a position-major cache, so
// memory is read in order. mem: scratch for 16 K rows, 16 V rows and one accumulator per head.
void attend(const Attention& a, int64_t t, int64_t h_begin, int64_t h_end, float* mem) {
    const int64_t Dk = a.head_dim_k, Dv = a.head_dim_v, group = a.n_head / a.n_head_kv;
    const int64_t kc = (Dk + 15) / 16, vc = (Dv + 15) / 16;
    // The regions are kScratchSkew floats apart beyond their size: rows of K, V and the accumulators
    // at equal offsets modulo 4 KiB would make loads wait on unrelated stores (4K aliasing).
    float* kbuf = mem;
    float* vbuf = kbuf + 16 * 16 * kc + kScratchSkew;
    float* accs = vbuf + 16 * 16 * vc + kScratchSkew;
    HeadState* heads = reinterpret_cast<HeadState*>(accs + a.n_head * 16 * vc);
    for (int64_t h = h_begin; h < h_end; h++) {
        heads[h - h_begin] = {-INFINITY, 0.0f, accs + (h - h_begin) * 16 * vc};
        for (int64_t c = 0; c < 16 * vc; c++) heads[h - h_begin].acc[c] = 0.0f;
    }
    const int64_t pos = query_pos(a, t);
    const int64_t first = a.window > 0 ? (pos - a.window + 1 > 0 ? pos - a.window + 1 : 0) : 0;
    const int64_t hk_begin = h_begin / group, hk_end = (h_end - 1) / group + 1;
    const KvView K = key_view(a), V = value_view(a);
    const float* q = a.q + t * a.q_token_stride;
    // blocks of ≤ 16 keys that never cross a paged KV block, so their rows are contiguous
    for (int64_t j0 = first, nb; j0 <= pos; j0 += nb) {
        nb = pos + 1 - j0 < 16 ? pos + 1 - j0 : 16;
        if (key_run(a, j0) < nb) nb = key_run(a, j0);
        const int64_t row0 = key_row(a, t, j0);
        for (int64_t hk = hk_begin; hk < hk_end; hk++) {
            // fetch this KV head's rows of the next block now (the hardware prefetcher does not follow
            // strided rows)
            for (int64_t j = j0 + nb; j < j0 + nb + 16 && j <= pos; j++) {
                const int64_t row = key_row(a, t, j);
                const char* kr = reinterpret_cast<const char*>(K.at(row, hk));
                const char* vr = reinterpret_cast<const char*>(V.at(row, hk));
                for (int64_t b = 0; b < K.row_bytes; b += 64) _mm_prefetch(kr + b, _MM_HINT_T0);
                for (int64_t b = 0; b < V.row_bytes; b += 64) _mm_prefetch(vr + b, _MM_HINT_T0);
            }
            int64_t k_stride, v_stride;
            const int n = static_cast<int>(nb);
            const float* k = cache_rows(a, K, hk, row0, n, Dk, kc, kbuf, k_stride);
            const float* v = cache_rows(a, V, hk, row0, n, Dv, vc, vbuf, v_stride);
            const int64_t h0 = hk * group > h_begin ? hk * group : h_begin, h1 = (hk + 1) * group < h_end ? (hk + 1) * group : h_end;
            for (int64_t h = h0; h < h1; h++)
                attend_block(a, q + h * a.q_head_stride, k, k_stride, v, v_stride, n, kc, vc, heads[h - h_begin]);
        }
    }
    for (int64_t h = h_begin; h < h_end; h++) finish_head(a, t, h, heads[h - h_begin], vc);
}

// ---- decode: one query token, head dims a multiple of 16 known at compile time -----------------------
//
// The G query heads that share a KV head (up to 4, 2 for 128-wide heads: their queries and accumulators
// stay in registers) take each block of keys together: every key and value row is read and converted
// once for all of them, straight into registers. A block's logits are laid out key-major, lane
// λ = key·G + head, so one horizontal-sum tree serves every head (sum16 on 16 (key, head) dot products
// at a time), and the softmax runs on whole vectors with per-head maxima spread over the lanes of each
// head (λ ≡ head mod G).

constexpr int kDecodeKeys = 32;  // keys per softmax update
// Rows fetched this many blocks ahead, into L2 (AMD EPYC Zen 4, 1B Q4_K_M decode at depth 4096, three
// alternating rounds: the next block into L1 25.6, 35.7, 29.3 tok/s; into L2 35.7, 37.8, 34.6; two blocks
// ahead 37.6, 38.2, 33.8; three 39.8, 36.7, 39.4 — into L1 the burst of prefetches stalled on the fill buffers).
constexpr int kPrefetchBlocks = 3;

// Every lane gets op over the lanes of its head (lanes λ ≡ λ' mod G).
template <int G, class Op>
[[gnu::always_inline]] inline __m512 over_head_lanes(__m512 x, Op op) {
    x = op(x, _mm512_shuffle_f32x4(x, x, 0x4e));
    x = op(x, _mm512_shuffle_f32x4(x, x, 0xb1));
    if constexpr (G <= 2) x = op(x, _mm512_permute_ps(x, 0x4e));
    if constexpr (G == 1) x = op(x, _mm512_permute_ps(x, 0xb1));
    return x;
}

// Lanes 0 .. G-1 of `at` (one value per head) spread over the lanes of each head.
template <int G>
[[gnu::always_inline]] inline __m512 load_heads(const float* at) {
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i idx = _mm512_and_si512(lane, _mm512_set1_epi32(G - 1));
    return _mm512_permutexvar_ps(idx, _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << G) - 1), at));
}

// One block of nb ≤ kDecodeKeys keys (rows krows/vrows; entries past nb repeat a valid row) for the
// G query heads at q, q + q_head_stride, ...: logits, softmax update of (max, sum) — per head, lanes
// 0 .. G-1 — and the weighted value rows into acc (G rows of 16·kC floats).
template <int kC, int G, Type T>
[[gnu::flatten]] void decode_block_heads(const Attention& a, const float* q, const uint8_t* const* krows, const uint8_t* const* vrows, int nb,
                        float* max, float* sum, float* acc) {
    constexpr int kLanes = kDecodeKeys * G;
    const int n_vec = (nb * G + 15) / 16;  // logit vectors holding the block's keys
    alignas(64) float p[kLanes];
    {
        __m512 qv[G][kC];
        unrolled<G>([&](int g) { unrolled<kC>([&](int c) { qv[g][c] = _mm512_loadu_ps(q + g * a.q_head_stride + 16 * c); }); });
        for (int r = 0; r < n_vec; r++) {
            __m512 b[4];
            unrolled<4>([&](int u) {  // (key, head) dot products 16r + 4u .. 16r + 4u + 3
                __m512 d[4];
                unrolled<4 / G>([&](int kk) {
                    const uint8_t* row = krows[(16 * r + 4 * u) / G + kk];
                    __m512 k[kC];
                    unrolled<kC>([&](int c) { k[c] = row_chunk<T>(row, c); });
                    unrolled<G>([&](int g) {
                        __m512 s = _mm512_mul_ps(qv[g][0], k[0]);
                        unrolled<kC - 1>([&](int c) { s = _mm512_fmadd_ps(qv[g][c + 1], k[c + 1], s); });
                        d[kk * G + g] = s;
                    });
                });
                // the first two levels of sum16: per 128-bit lane, the lane's sums of d[0..3]
                const __m512 a0 = _mm512_add_ps(_mm512_unpacklo_ps(d[0], d[1]), _mm512_unpackhi_ps(d[0], d[1]));
                const __m512 a1 = _mm512_add_ps(_mm512_unpacklo_ps(d[2], d[3]), _mm512_unpackhi_ps(d[2], d[3]));
                const __m512d x = _mm512_castps_pd(a0), y = _mm512_castps_pd(a1);
                b[u] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)), _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
            });
            const __m512 c0 = _mm512_add_ps(_mm512_shuffle_f32x4(b[0], b[1], 0x88), _mm512_shuffle_f32x4(b[0], b[1], 0xdd));
            const __m512 c1 = _mm512_add_ps(_mm512_shuffle_f32x4(b[2], b[3], 0x88), _mm512_shuffle_f32x4(b[2], b[3], 0xdd));
            const __m512 logits = _mm512_add_ps(_mm512_shuffle_f32x4(c0, c1, 0x88), _mm512_shuffle_f32x4(c0, c1, 0xdd));
            _mm512_store_ps(p + 16 * r, _mm512_mul_ps(logits, _mm512_set1_ps(a.scale)));
        }
    }
    const auto max_op = [](__m512 x, __m512 y) { return _mm512_max_ps(x, y); };
    __m512 top = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < n_vec; r++) top = _mm512_mask_max_ps(top, tail_mask(nb * G - 16 * r), top, _mm512_load_ps(p + 16 * r));
    const __m512 old_max = load_heads<G>(max), new_max = _mm512_max_ps(old_max, over_head_lanes<G>(top, max_op));
    const __m512 correction = exp_ps(_mm512_sub_ps(old_max, new_max));  // 0 on the first block (max = −∞)
    for (int r = 0; r < n_vec; r++)
        _mm512_store_ps(p + 16 * r, _mm512_maskz_mov_ps(tail_mask(nb * G - 16 * r), exp_ps(_mm512_sub_ps(_mm512_load_ps(p + 16 * r), new_max))));
    const __mmask16 heads = static_cast<__mmask16>((1u << G) - 1);
    _mm512_mask_storeu_ps(max, heads, new_max);
    alignas(64) float corr[16];
    _mm512_store_ps(corr, correction);
    // Each head's sum adds its weights key by key, and its accumulator its weighted rows, so a head's
    // result does not depend on which heads share its pass (paged and contiguous runs agree bit for bit).
    __m512 total = _mm512_mul_ps(_mm512_maskz_loadu_ps(heads, sum), correction);  // lane g: head g
    __m512 accv[G][kC];
    unrolled<G>([&](int g) { unrolled<kC>([&](int c) { accv[g][c] = _mm512_mul_ps(_mm512_load_ps(acc + (g * kC + c) * 16), _mm512_set1_ps(corr[g])); }); });
    for (int j = 0; j < nb; j++) {
        __m512 v[kC];
        unrolled<kC>([&](int c) { v[c] = row_chunk<T>(vrows[j], c); });
        total = _mm512_add_ps(total, _mm512_maskz_loadu_ps(heads, p + j * G));
        unrolled<G>([&](int g) {
            const __m512 pj = _mm512_set1_ps(p[j * G + g]);
            unrolled<kC>([&](int c) { accv[g][c] = _mm512_fmadd_ps(pj, v[c], accv[g][c]); });
        });
    }
    _mm512_mask_storeu_ps(sum, heads, total);
    unrolled<G>([&](int g) { unrolled<kC>([&](int c) { _mm512_store_ps(acc + (g * kC + c) * 16, accv[g][c]); }); });
}

// Query token t, heads [h_begin, h_end), with head dims 16·kC and a cache of type T: blocks of keys in
// order, and within a block the KV heads in turn, so a position-major cache is read front to back.
// mem: scratch for one accumulator, max and sum per head.
template <int kC, Type T>
void attend_decode(const Attention& a, int64_t t, int64_t h_begin, int64_t h_end, float* mem) {
    constexpr int kMaxGroup = kC <= 4 ? 4 : 2;  // queries and accumulators of a pass in registers
    const int64_t group = a.n_head / a.n_head_kv, n = h_end - h_begin;
    float* accs = mem;
    float* maxes = accs + n * 16 * kC;
    float* sums = maxes + n + 16;  // 16 spare floats after each array: a pass's vector loads stay inside
    for (int64_t i = 0; i < n; i++) maxes[i] = -INFINITY, sums[i] = 0.0f;
    for (int64_t i = 0; i < n * 16 * kC; i++) accs[i] = 0.0f;
    const int64_t pos = query_pos(a, t);
    const int64_t first = a.window > 0 ? (pos - a.window + 1 > 0 ? pos - a.window + 1 : 0) : 0;
    const int64_t hk_begin = h_begin / group, hk_end = (h_end - 1) / group + 1;
    const KvView K = key_view(a), V = value_view(a);
    const float* q = a.q + t * a.q_token_stride;
    int64_t rows[kDecodeKeys];
    const uint8_t* krows[kDecodeKeys];
    const uint8_t* vrows[kDecodeKeys];
    for (int64_t j0 = first; j0 <= pos; j0 += kDecodeKeys) {
        const int nb = static_cast<int>(pos + 1 - j0 < kDecodeKeys ? pos + 1 - j0 : kDecodeKeys);
        for (int j = 0; j < nb; j++) rows[j] = key_row(a, t, j0 + j);
        for (int64_t hk = hk_begin; hk < hk_end; hk++) {
            // fetch this KV head's rows kPrefetchBlocks blocks ahead into L2 (the hardware prefetcher
            // does not follow strided rows)
            for (int64_t p = j0 + kPrefetchBlocks * kDecodeKeys, e = p + kDecodeKeys < pos + 1 ? p + kDecodeKeys : pos + 1; p < e; p++) {
                const int64_t row = key_row(a, t, p);
                const char* kr = reinterpret_cast<const char*>(K.at(row, hk));
                const char* vr = reinterpret_cast<const char*>(V.at(row, hk));
                for (int64_t b = 0; b < K.row_bytes; b += 64) _mm_prefetch(kr + b, _MM_HINT_T1);
                for (int64_t b = 0; b < V.row_bytes; b += 64) _mm_prefetch(vr + b, _MM_HINT_T1);
            }
            for (int j = 0; j < kDecodeKeys; j++) {
                const int64_t row = rows[j < nb ? j : nb - 1];
                krows[j] = K.at(row, hk), vrows[j] = V.at(row, hk);
            }
            const int64_t h0 = hk * group > h_begin ? hk * group : h_begin, h1 = (hk + 1) * group < h_end ? (hk + 1) * group : h_end;
            for (int64_t h = h0; h < h1;) {
                const int64_t i = h - h_begin;
                const float* qh = q + h * a.q_head_stride;
                if (h1 - h >= kMaxGroup) {
                    decode_block_heads<kC, kMaxGroup, T>(a, qh, krows, vrows, nb, maxes + i, sums + i, accs + i * 16 * kC);
                    h += kMaxGroup;
                } else if (h1 - h >= 2) {
                    decode_block_heads<kC, 2, T>(a, qh, krows, vrows, nb, maxes + i, sums + i, accs + i * 16 * kC);
                    h += 2;
                } else {
                    decode_block_heads<kC, 1, T>(a, qh, krows, vrows, nb, maxes + i, sums + i, accs + i * 16 * kC);
                    h += 1;
                }
            }
        }
    }
    for (int64_t h = h_begin; h < h_end; h++) {
        const int64_t i = h - h_begin;
        finish_head(a, t, h, HeadState{maxes[i], sums[i], accs + i * 16 * kC}, kC);
    }
}

template <int kC>
void attend_decode(const Attention& a, int64_t t, int64_t h_begin, int64_t h_end, float* mem) {
    switch (a.kv_type) {
        case Type::F32: return attend_decode<kC, Type::F32>(a, t, h_begin, h_end, mem);
        case Type::F16: return attend_decode<kC, Type::F16>(a, t, h_begin, h_end, mem);
        case Type::Q8_0: return attend_decode<kC, Type::Q8_0>(a, t, h_begin, h_end, mem);
        default: return attend_decode<kC, Type::Q4_0>(a, t, h_begin, h_end, mem);
    }
}

// Query tokens t0 .. t0+nt-1 with all their heads, for causal prefill. Per KV head and block of 64 keys,
// the keys are converted and transposed once (kt[sub-block][d][j]) and the values converted once for
// the tile's nt × group query rows; each row's logits then come from one broadcast-FMA per head
// dimension and 16 keys, with no horizontal sums, and one softmax update per block. Rows run in order
// of token, so the part of a block past a token's position is skipped.
template <int kKC, int kVC>
void attend_tile(const Attention& a, int64_t t0, int nt, float* mem) {
    constexpr int kSub = kKeyBlock / 16;
    const int64_t group = a.n_head / a.n_head_kv;
    float* kt = mem;
    float* kbuf = kt + kKeyBlock * 16 * kKC + kScratchSkew;
    float* vbuf = kbuf + kKeyBlock * 16 * kKC + kScratchSkew;
    float* accs = vbuf + kKeyBlock * 16 * kVC + kScratchSkew;
    auto rows = reinterpret_cast<HeadState*>(accs + kQueryTile * group * 16 * kVC);
    const KvView K = key_view(a), V = value_view(a);
    const int64_t last = a.start_pos + t0 + nt - 1;
    const int64_t first0 = a.window > 0 ? (a.start_pos + t0 - a.window + 1 > 0 ? a.start_pos + t0 - a.window + 1 : 0) : 0;
    for (int64_t hk = 0; hk < a.n_head_kv; hk++) {
        for (int64_t i = 0; i < nt * group; i++) {  // row i: token t0 + i / group, head hk·group + i % group
            rows[i] = {-INFINITY, 0.0f, accs + i * 16 * kVC};
            unrolled<kVC>([&](int c) { _mm512_store_ps(rows[i].acc + 16 * c, _mm512_setzero_ps()); });
        }
        for (int64_t j0 = first0; j0 <= last; j0 += kKeyBlock) {
            const int nb = static_cast<int>(last + 1 - j0 < kKeyBlock ? last + 1 - j0 : kKeyBlock);
            int64_t k_stride, v_stride;
            const float* krows = cache_rows(a, K, hk, j0, nb, a.head_dim_k, kKC, kbuf, k_stride);
            for (int sb = 0; 16 * sb < nb; sb++)
                for (int c = 0; c < kKC; c++) {
                    __m512 k[16];
                    for (int j = 0; j < 16; j++)
                        k[j] = 16 * sb + j >= nb ? _mm512_setzero_ps() : _mm512_loadu_ps(krows + (16 * sb + j) * k_stride + 16 * c);
                    transpose16(k);
                    for (int d = 0; d < 16; d++) _mm512_store_ps(kt + ((sb * kKC + c) * 16 + d) * 16, k[d]);
                }
            const float* v = cache_rows(a, V, hk, j0, nb, a.head_dim_v, kVC, vbuf, v_stride);
            for (int i = 0; i < nt; i++) {
                const int64_t pos = a.start_pos + t0 + i;
                const int64_t first = a.window > 0 ? (pos - a.window + 1 > 0 ? pos - a.window + 1 : 0) : 0;
                if (j0 > pos || j0 + nb <= first) continue;
                const int n_keys = static_cast<int>(pos + 1 - j0 < nb ? pos + 1 - j0 : nb);
                const int n_sub = (n_keys + 15) / 16;
                __mmask16 valid[kSub];
                for (int sb = 0; sb < n_sub; sb++) {
                    const int64_t lo = first - j0 - 16 * sb;  // keys of the sub-block before the window
                    valid[sb] = static_cast<__mmask16>(tail_mask(n_keys - 16 * sb) & ~tail_mask(lo > 0 ? lo : 0));
                }
                for (int64_t g = 0; g < group; g++) {
                    const float* q = a.q + (t0 + i) * a.q_token_stride + (hk * group + g) * a.q_head_stride;
                    __m512 scaled[kSub];
                    for (int sb = 0; sb < n_sub; sb++) {
                        const float* kts = kt + sb * kKC * 16 * 16;
                        __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
                        unrolled<16 * kKC>([&](int d) { s[d % 4] = _mm512_fmadd_ps(_mm512_set1_ps(q[d]), _mm512_load_ps(kts + 16 * d), s[d % 4]); });
                        scaled[sb] = _mm512_mul_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])), _mm512_set1_ps(a.scale));
                    }
                    softmax_accumulate<kVC>(a, scaled, valid, n_sub, v, v_stride, n_keys, kVC, rows[i * group + g]);
                }
            }
        }
        for (int i = 0; i < nt; i++)
            for (int64_t g = 0; g < group; g++) finish_head(a, t0 + i, hk * group + g, rows[i * group + g], kVC);
    }
}

}  // namespace

void attention(const Attention& a, int64_t pair_begin, int64_t pair_end) {
    const int64_t kc = (a.head_dim_k + 15) / 16, vc = (a.head_dim_v + 15) / 16;
    const int64_t group = a.n_head / a.n_head_kv;
    const size_t per_token = sizeof(float) * (16 * 16 * kc + 16 * 16 * vc + a.n_head * 16 * vc + 2 * kScratchSkew) + sizeof(HeadState) * a.n_head;
    const size_t per_tile = sizeof(float) * (2 * kKeyBlock * 16 * kc + kKeyBlock * 16 * vc + kQueryTile * group * 16 * vc + 3 * kScratchSkew) +
                            sizeof(HeadState) * kQueryTile * group;
    const size_t per_decode = sizeof(float) * (a.n_head * 16 * vc + 2 * a.n_head + 32);  // attend_decode
    const size_t need = per_token > per_tile ? per_token : per_tile;
    auto mem = static_cast<float*>(scratch(ScratchSlot::TILE, need > per_decode ? need : per_decode));
    // whole tokens (all heads) of a contiguous-cache prefill with square 32/64/128 heads go by tiles of query tokens
    const bool tiles = !a.block_table && a.n_tokens > 1 && a.head_dim_k == a.head_dim_v && (a.head_dim_k == 32 || a.head_dim_k == 64 || a.head_dim_k == 128);
    const int64_t fit = kTileAccBytes / int64_t(sizeof(float) * group * a.head_dim_v), tile = fit < 8 ? 8 : fit < kQueryTile ? fit : kQueryTile;
    // Pairs count tokens from the last: a causal token's work grows with its position, and the pool
    // hands out its chunks in order, so the costliest go first and the cheap ones even out the rest
    // (in order, the thread holding the last quarter of a 128-token prefill did 10/16 of the work).
    for (int64_t pair = pair_begin; pair < pair_end;) {
        const int64_t t = a.n_tokens - 1 - pair / a.n_head, h_begin = pair % a.n_head;
        const int64_t h_end = pair - h_begin + a.n_head < pair_end ? a.n_head : pair_end - (pair - h_begin);
        const int64_t whole = h_begin == 0 ? (pair_end - pair) / a.n_head : 0;  // whole tokens from here, down to t
        if (tiles && whole > 0) {
            const int nt = static_cast<int>(whole < tile ? whole : tile);
            if (a.head_dim_k == 64)
                attend_tile<4, 4>(a, t + 1 - nt, nt, mem);
            else if (a.head_dim_k == 128)
                attend_tile<8, 8>(a, t + 1 - nt, nt, mem);
            else
                attend_tile<2, 2>(a, t + 1 - nt, nt, mem);
            pair += nt * a.n_head;
            continue;
        }
        if (a.head_dim_k == 64 && a.head_dim_v == 64)
            attend_decode<4>(a, t, h_begin, h_end, mem);
        else if (a.head_dim_k == 128 && a.head_dim_v == 128)
            attend_decode<8>(a, t, h_begin, h_end, mem);
        else if (a.head_dim_k == 32 && a.head_dim_v == 32)
            attend_decode<2>(a, t, h_begin, h_end, mem);
        else
            attend(a, t, h_begin, h_end, mem);
        pair += h_end - h_begin;
    }
}

}  // namespace cpu_kernels::avx512
