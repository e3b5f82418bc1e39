// AVX-512 attention over a KV cache with an online softmax, 16 keys at a time: the query heads that
// share a KV head (grouped-query) are processed together so each key and value row is read from
// memory once (F16, Q8_0 and Q4_0 rows converted to f32 once per block of keys, into a small tile);
// dot products run along the head dimension and 16 of them are reduced at once.
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

// One block of 32 cached values as two vectors of f32, as ggml dequantizes them: d·q (Q8_0); d·(u − 8)
// with value i in the low nibble of byte i and value i + 16 in its high nibble (Q4_0).
[[gnu::always_inline]] inline void decode_block(const gguf::block_q8_0& b, __m512& lo, __m512& hi) {
    const __m512 d = _mm512_set1_ps(half_to_float(b.d));
    lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs)))), d);
    hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16)))), d);
}
[[gnu::always_inline]] inline void decode_block(const gguf::block_q4_0& b, __m512& lo, __m512& hi) {
    const __m512 d = _mm512_set1_ps(half_to_float(b.d));
    const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs))), eight = _mm512_set1_epi32(8);
    lo = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(u, _mm512_set1_epi32(15)), eight)), d);
    hi = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(u, 4), eight)), d);
}

// n rows of Q8_0 / Q4_0 blocks (dim values each) into buf, rows `stride` floats apart.
template <class Block>
void decode_rows(const KvView& kv, int64_t hk, int64_t row0, int n, int64_t dim, float* buf, int64_t stride) {
    for (int j = 0; j < n; j++) {
        const Block* b = reinterpret_cast<const Block*>(kv.at(row0 + j, hk));
        float* out = buf + j * stride;
        for (int64_t i = 0; i < dim / 32; i++) {
            __m512 lo, hi;
            decode_block(b[i], lo, hi);
            _mm512_store_ps(out + 32 * i, lo);
            _mm512_store_ps(out + 32 * i + 16, hi);
        }
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
        decode_rows<gguf::block_q8_0>(kv, hk, row0, n, dim, buf, stride);
    } else if (a.kv_type == Type::Q4_0) {
        decode_rows<gguf::block_q4_0>(kv, hk, row0, n, dim, buf, stride);
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
        for (int64_t c = 0; c < vc; c++) {
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

// One block of nb ≤ 16 keys for one query head: logits, softmax update, value accumulation. kKC / kVC:
// head dims in 16-float chunks when known at compile time (unrolled, q and the accumulator in
// registers), else 0: any dims, runtime loops with masks for the last chunk.
template <int kKC, int kVC>
void attend_block(const Attention& a, const float* q, const float* k, int64_t k_stride, const float* v,
                  int64_t v_stride, int nb, int64_t kc, int64_t vc, HeadState& h) {
    __m512 dots[16];
    if constexpr (kKC != 0) {
        __m512 qv[kKC];
        unrolled<kKC>([&](int c) { qv[c] = _mm512_loadu_ps(q + 16 * c); });
        unrolled<16>([&](int j) {
            const float* row = k + (j < nb ? j : 0) * k_stride;  // past nb: a valid row, masked below
            __m512 s = _mm512_mul_ps(qv[0], _mm512_loadu_ps(row));
            unrolled<kKC - 1>([&](int c) { s = _mm512_fmadd_ps(qv[c + 1], _mm512_loadu_ps(row + 16 * (c + 1)), s); });
            dots[j] = s;
        });
    } else {
        for (int j = 0; j < 16; j++) {
            const float* row = k + (j < nb ? j : 0) * k_stride;
            __m512 s = _mm512_setzero_ps();
            for (int64_t c = 0; c < kc; c++) {
                const __mmask16 mask = tail_mask(a.head_dim_k - 16 * c);
                s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, q + 16 * c), _mm512_maskz_loadu_ps(mask, row + 16 * c), s);
            }
            dots[j] = s;
        }
    }
    const __mmask16 valid = tail_mask(nb);
    const __m512 scaled = _mm512_mul_ps(sum16(dots), _mm512_set1_ps(a.scale));
    softmax_accumulate<kVC>(a, &scaled, &valid, 1, v, v_stride, nb, vc, h);
}

// Query token t, heads [h_begin, h_end), 16 keys at a time. For each block of keys the KV heads are
// taken in turn: the block's K and V rows of one KV head are converted once and used by the query
// heads that share it, and consecutive KV heads' rows are neighbours in a position-major cache, so
// memory is read in order. mem: scratch for 16 K rows, 16 V rows and one accumulator per head.
template <int kKC, int kVC>
void attend(const Attention& a, int64_t t, int64_t h_begin, int64_t h_end, float* mem) {
    const int64_t Dk = a.head_dim_k, Dv = a.head_dim_v, group = a.n_head / a.n_head_kv;
    const int64_t kc = kKC ? kKC : (Dk + 15) / 16, vc = kVC ? kVC : (Dv + 15) / 16;
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
                attend_block<kKC, kVC>(a, q + h * a.q_head_stride, k, k_stride, v, v_stride, n, kc, vc, heads[h - h_begin]);
        }
    }
    for (int64_t h = h_begin; h < h_end; h++) finish_head(a, t, h, heads[h - h_begin], vc);
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
    auto mem = static_cast<float*>(scratch(ScratchSlot::TILE, per_token > per_tile ? per_token : per_tile));
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
            attend<4, 4>(a, t, h_begin, h_end, mem);
        else if (a.head_dim_k == 128 && a.head_dim_v == 128)
            attend<8, 8>(a, t, h_begin, h_end, mem);
        else
            attend<0, 0>(a, t, h_begin, h_end, mem);
        pair += h_end - h_begin;
    }
}

}  // namespace cpu_kernels::avx512
