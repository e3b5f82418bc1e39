// AVX2 attention over a KV cache with an online softmax, 8 keys at a time: the same algorithm as
// attention_avx512.cpp (all heads of a token per block of keys, in memory order; each KV head's rows
// converted once for the query heads that share it, Q8_0 / Q4_0 a block of 32 at a time) with 8-float
// vectors.
#include "devices/cpu/kernels/avx2_impl.h"

#include <cmath>
#include <utility>

namespace cpu_kernels::avx2 {

using gguf::Type;

namespace {

// Scratch regions this many floats apart beyond their size: rows at equal offsets modulo 4 KiB would
// make loads wait on unrelated stores (4K aliasing).
constexpr int64_t kScratchSkew = 5 * 16;

float max_f(float a, float b) { return a > b ? a : b; }  // inputs are never NaN; no libm call
float exp_f(float x) { return _mm256_cvtss_f32(exp_ps(_mm256_set1_ps(x))); }

float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

// Lane i of the result is the sum of the 8 lanes of v[i].
[[gnu::always_inline]] inline __m256 sum8(const __m256 v[8]) {
    const __m256 a0 = _mm256_hadd_ps(v[0], v[1]), a1 = _mm256_hadd_ps(v[2], v[3]);
    const __m256 a2 = _mm256_hadd_ps(v[4], v[5]), a3 = _mm256_hadd_ps(v[6], v[7]);
    const __m256 b0 = _mm256_hadd_ps(a0, a1), b1 = _mm256_hadd_ps(a2, a3);  // per 128-bit half: sums of v0..3 / v4..7
    return _mm256_add_ps(_mm256_permute2f128_ps(b0, b1, 0x20), _mm256_permute2f128_ps(b0, b1, 0x31));
}

template <int N, class F>
[[gnu::always_inline]] inline void unrolled(F&& f) {
    [&]<int... I>(std::integer_sequence<int, I...>) { (f(I), ...); }(std::make_integer_sequence<int, N>{});
}

// One block of 32 cached values as four vectors of f32, as ggml dequantizes them: d·q (Q8_0); d·(u − 8)
// with value i in the low nibble of byte i and value i + 16 in its high nibble (Q4_0).
[[gnu::always_inline]] inline void decode_block(const gguf::block_q8_0& b, __m256 out[4]) {
    const __m256 d = _mm256_set1_ps(half_to_float(b.d));
    for (int i = 0; i < 4; i++) {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * i));
        out[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
    }
}
[[gnu::always_inline]] inline void decode_block(const gguf::block_q4_0& b, __m256 out[4]) {
    const __m256 d = _mm256_set1_ps(half_to_float(b.d));
    const __m256i eight = _mm256_set1_epi32(8), low = _mm256_set1_epi32(15);
    for (int i = 0; i < 2; i++) {
        const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * i)));
        out[i] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(u, low), eight)), d);
        out[i + 2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(u, 4), eight)), d);
    }
}

// n rows of Q8_0 / Q4_0 blocks (dim values each) into buf, rows `stride` floats apart.
template <class Block>
void decode_rows(const KvView& kv, int64_t hk, int64_t row0, int n, int64_t dim, float* buf, int64_t stride) {
    for (int j = 0; j < n; j++) {
        const Block* b = reinterpret_cast<const Block*>(kv.at(row0 + j, hk));
        for (int64_t i = 0; i < dim / 32; i++) {
            __m256 v[4];
            decode_block(b[i], v);
            for (int c = 0; c < 4; c++) _mm256_store_ps(buf + j * stride + 32 * i + 8 * c, v[c]);
        }
    }
}

// Rows row0 .. row0+n-1 of KV head hk as f32 rows `stride` floats apart, zero-padded to a multiple of 8:
// the cache itself for F32 with dims a multiple of 8, else converted / copied into buf (Q8_0 / Q4_0 a
// block of 32 at a time).
const float* cache_rows(const Attention& a, const KvView& kv, int64_t hk, int64_t row0, int n, int64_t dim, int64_t chunks,
                        float* buf, int64_t& stride) {
    if (a.kv_type == Type::F32 && dim % 8 == 0) {
        stride = kv.pos_bytes / 4;
        return reinterpret_cast<const float*>(kv.at(row0, hk));
    }
    stride = 8 * chunks;
    if (a.kv_type == Type::Q8_0) {
        decode_rows<gguf::block_q8_0>(kv, hk, row0, n, dim, buf, stride);
        return buf;
    }
    if (a.kv_type == Type::Q4_0) {
        decode_rows<gguf::block_q4_0>(kv, hk, row0, n, dim, buf, stride);
        return buf;
    }
    for (int j = 0; j < n; j++) {
        float* row = buf + j * stride;
        const uint8_t* src = kv.at(row0 + j, hk);
        int64_t c = 0;
        if (a.kv_type == Type::F16)
            for (; c + 8 <= dim; c += 8)
                _mm256_store_ps(row + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * c))));
        for (; c < dim; c++)
            row[c] = a.kv_type == Type::F32 ? reinterpret_cast<const float*>(src)[c] : half_to_float(load_u16(src + 2 * c));
        for (; c < 8 * chunks; c++) row[c] = 0.0f;
    }
    return buf;
}

struct HeadState {
    float max, sum;
    float* acc;  // 8·vc floats
};

// One block of nb ≤ 8 keys for one query head (q zero-padded to 8·kc). kKC / kVC: head dims in 8-float
// chunks when known at compile time, else 0 (runtime loops).
template <int kKC, int kVC>
void attend_block(const Attention& a, const float* q, const float* k, int64_t k_stride, const float* v,
                  int64_t v_stride, int nb, int64_t kc, int64_t vc, HeadState& h) {
    // Chunk by chunk, the 8 keys' sums side by side: independent chains rather than one key's chain of
    // kc dependent FMAs at a time (MLA's 576-wide rows); each sum still runs over the chunks in order.
    const float* rows[8];
    __m256 dots[8];
    unrolled<8>([&](int j) {
        rows[j] = k + (j < nb ? j : 0) * k_stride;  // past nb: a valid row, masked below
        dots[j] = _mm256_setzero_ps();
    });
    auto chunk = [&](int64_t c) {
        const __m256 qc = _mm256_loadu_ps(q + 8 * c);
        unrolled<8>([&](int j) { dots[j] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(rows[j] + 8 * c), dots[j]); });
    };
    if constexpr (kKC != 0)
        unrolled<kKC>([&](int c) { chunk(c); });
    else
        for (int64_t c = 0; c < kc; c++) chunk(c);
    const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nb), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    const __m256 logits = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_mul_ps(sum8(dots), _mm256_set1_ps(a.scale)), valid);
    const float new_max = max_f(h.max, hmax(logits));
    const __m256 pv = _mm256_and_ps(valid, exp_ps(_mm256_sub_ps(logits, _mm256_set1_ps(new_max))));
    const float correction = exp_f(h.max - new_max);  // 0 on the first block (max = −∞)
    h.sum = h.sum * correction + hsum(pv);
    h.max = new_max;
    auto add_values = [&]<int kN>(int64_t c0, int64_t n) {
        __m256 acc[kN];
        for (int64_t c = 0; c < n; c++) acc[c] = _mm256_mul_ps(_mm256_load_ps(h.acc + 8 * (c0 + c)), _mm256_set1_ps(correction));
        for (int j = 0; j < nb; j++) {
            const __m256 pj = _mm256_permutevar8x32_ps(pv, _mm256_set1_epi32(j));
            const float* row = v + j * v_stride + 8 * c0;
            for (int64_t c = 0; c < n; c++) acc[c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(row + 8 * c), acc[c]);
        }
        for (int64_t c = 0; c < n; c++) _mm256_store_ps(h.acc + 8 * (c0 + c), acc[c]);
    };
    constexpr int kN = kVC != 0 && kVC <= 8 ? kVC : 8;  // accumulators in registers, kN chunks at a time
    for (int64_t c0 = 0; c0 < vc; c0 += kN) add_values.template operator()<kN>(c0, vc - c0 < kN ? vc - c0 : kN);
}

// Query token t, heads [h_begin, h_end), 8 keys at a time (see attention_avx512.cpp).
template <int kKC, int kVC>
void attend(const Attention& a, int64_t t, int64_t h_begin, int64_t h_end, float* mem) {
    const int64_t Dk = a.head_dim_k, Dv = a.head_dim_v, group = a.n_head / a.n_head_kv;
    const int64_t kc = kKC ? kKC : (Dk + 7) / 8, vc = kVC ? kVC : (Dv + 7) / 8;
    float* kbuf = mem;
    float* vbuf = kbuf + 8 * 8 * kc + kScratchSkew;
    float* qbuf = vbuf + 8 * 8 * vc + kScratchSkew;  // the queries, zero-padded: [n_head][8·kc]
    float* accs = qbuf + a.n_head * 8 * kc + kScratchSkew;
    auto heads = reinterpret_cast<HeadState*>(accs + a.n_head * 8 * vc);
    for (int64_t h = h_begin; h < h_end; h++) {
        heads[h - h_begin] = {-INFINITY, 0.0f, accs + (h - h_begin) * 8 * vc};
        for (int64_t c = 0; c < 8 * vc; c++) heads[h - h_begin].acc[c] = 0.0f;
        const float* q = a.q + t * a.q_token_stride + h * a.q_head_stride;
        for (int64_t c = 0; c < 8 * kc; c++) qbuf[(h - h_begin) * 8 * kc + c] = c < Dk ? q[c] : 0.0f;
    }
    const int64_t pos = query_pos(a, t);
    const int64_t first = a.window > 0 ? (pos - a.window + 1 > 0 ? pos - a.window + 1 : 0) : 0;
    const int64_t hk_begin = h_begin / group, hk_end = (h_end - 1) / group + 1;
    const KvView K = key_view(a), V = value_view(a);
    // blocks of ≤ 8 keys that never cross a paged KV block, so their rows are contiguous
    for (int64_t j0 = first, nb; j0 <= pos; j0 += nb) {
        nb = pos + 1 - j0 < 8 ? pos + 1 - j0 : 8;
        if (key_run(a, j0) < nb) nb = key_run(a, j0);
        const int64_t row0 = key_row(a, t, j0);
        for (int64_t hk = hk_begin; hk < hk_end; hk++) {
            for (int64_t j = j0 + nb; j < j0 + nb + 8 && j <= pos; j++) {  // the next block's rows (strided: no hardware prefetch)
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
                attend_block<kKC, kVC>(a, qbuf + (h - h_begin) * 8 * kc, k, k_stride, v, v_stride, n, kc, vc, heads[h - h_begin]);
        }
    }
    for (int64_t h = h_begin; h < h_end; h++) {
        const HeadState& st = heads[h - h_begin];
        float scale = 1.0f / st.sum;
        if (a.sinks) {  // the sink joins the denominator, carrying no value
            const float sink = a.sinks[h], new_max = max_f(st.max, sink);
            const float correction = exp_f(st.max - new_max);
            scale = correction / (st.sum * correction + exp_f(sink - new_max));
        }
        float* out = a.out + t * a.out_token_stride + h * a.out_head_stride;
        for (int64_t c = 0; c < Dv; c++) out[c] = st.acc[c] * scale;
    }
}

}  // namespace

void attention(const Attention& a, int64_t pair_begin, int64_t pair_end) {
    const int64_t kc = (a.head_dim_k + 7) / 8, vc = (a.head_dim_v + 7) / 8;
    auto mem = static_cast<float*>(scratch(
        ScratchSlot::TILE, sizeof(float) * (8 * 8 * kc + 8 * 8 * vc + a.n_head * 8 * (kc + vc) + 3 * kScratchSkew) +
                               sizeof(HeadState) * a.n_head));
    for (int64_t pair = pair_begin; pair < pair_end;) {  // the range's heads of one token at a time
        const int64_t t = a.n_tokens - 1 - pair / a.n_head, h_begin = pair % a.n_head;
        const int64_t h_end = pair - h_begin + a.n_head < pair_end ? a.n_head : pair_end - (pair - h_begin);
        if (a.head_dim_k == 64 && a.head_dim_v == 64)
            attend<8, 8>(a, t, h_begin, h_end, mem);
        else if (a.head_dim_k == 128 && a.head_dim_v == 128)
            attend<16, 16>(a, t, h_begin, h_end, mem);
        else
            attend<0, 0>(a, t, h_begin, h_end, mem);
        pair += h_end - h_begin;
    }
}

}  // namespace cpu_kernels::avx2
