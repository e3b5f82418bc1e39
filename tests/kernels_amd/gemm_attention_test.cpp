// The prefill GEMMs (WMMA on gfx11/12, MFMA on CDNA) and flash-attention decode (partial + combine) on
// the host emulator against naive double-precision references.
#include "support.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace amdtest;

namespace {

// Every weight type at a shape with partial 64x64 tiles in both directions.
void check_gemm(const std::string& type, Target target) {
    const Format& f = format(type);
    const uint32_t n_out = 72, n_tokens = 40, n_in = f.block_elems == 256 ? 512 : 32 * 5;
    std::vector<uint8_t> blocks = random_blocks(type, size_t{n_out} * n_in / f.block_elems, 51);
    // The kernel's contract: each weight is dequantized as ggml does, then rounded to fp16 once.
    std::vector<float> w = dequantize(type, blocks.data(), size_t{n_out} * n_in);
    for (float& v : w) v = round_f16(v);
    Random rng(52);
    std::vector<float> x = rng.normals(size_t{n_tokens} * n_in);
    std::vector<uint16_t> x16(x.size());
    for (size_t i = 0; i < x.size(); i++) x16[i] = f32_to_f16(x[i]), x[i] = f16_to_f32(x16[i]);
    std::vector<double> want, tolerance;
    reference_matmul(w, x, n_out, n_in, n_tokens, want, tolerance);
    for (double& t : tolerance) t *= 1e-5;

    DeviceMemory mem;
    GemmArgs a{};
    a.w = gpu<const uint32_t>(mem.upload(device_layout(type, blocks)));
    a.x = gpu<const uint16_t>(mem.upload(x16));
    uint64_t y = mem.alloc(size_t{n_tokens} * n_out * 4);
    a.y = gpu<float>(y);
    a.n_out = n_out;
    a.n_in = n_in;
    a.n_tokens = n_tokens;
    run(*gemm_kernel_for(*gguf::type_from_name(type)), target, a, mem);
    INFO(type << " on " << target_name(target));
    CHECK(worst_ratio(mem.download<float>(y, size_t{n_tokens} * n_out), want, tolerance) <= 1.0);
}

struct AttentionCase {
    uint32_t head_dim, n_heads, n_kv_heads, kv_len;
};

// Attention of one query token over kv_len cached fp16 keys; cache rows past kv_len hold NaN, so reading
// them would show. Scores spread over several units so the softmax is peaked. Tolerance: the waves
// exchange fp16 partial sums (2^-11 relative), so 2e-3 * sum_p p|v| / sum_p p per output.
void check_attention(const AttentionCase& c, Target target) {
    const uint32_t D = c.head_dim, max_ctx = c.kv_len + 70;
    const uint32_t pos_stride = D, head_stride = max_ctx * D;
    const uint32_t n_chunks = (c.kv_len + ATTN_CHUNK - 1) / ATTN_CHUNK;
    Random rng(61 + c.kv_len);
    std::vector<float> q = rng.normals(size_t{c.n_heads} * D, 2.0f);
    std::vector<uint16_t> k(size_t{c.n_kv_heads} * head_stride, 0x7e00), v(k.size(), 0x7e00);  // NaN
    for (uint32_t h = 0; h < c.n_kv_heads; h++)
        for (uint32_t p = 0; p < c.kv_len; p++)
            for (uint32_t d = 0; d < D; d++) {
                size_t i = size_t{h} * head_stride + size_t{p} * pos_stride + d;
                k[i] = f32_to_f16(rng.normal());
                v[i] = f32_to_f16(rng.normal());
            }
    float scale = 1.0f / std::sqrt(static_cast<float>(D));

    DeviceMemory mem;
    AttnDecodeArgs a{};
    a.q = gpu<const float>(mem.upload(q));
    a.k = gpu<const uint16_t>(mem.upload(k));
    a.v = gpu<const uint16_t>(mem.upload(v));
    uint64_t partial = mem.alloc(size_t{c.n_heads} * n_chunks * D * 4), stats = mem.alloc(size_t{c.n_heads} * n_chunks * 8);
    a.partial = gpu<float>(partial);
    a.stats = gpu<float>(stats);
    a.n_heads = c.n_heads;
    a.n_kv_heads = c.n_kv_heads;
    a.kv_len = c.kv_len;
    a.n_chunks = n_chunks;
    a.kv_head_stride = head_stride;
    a.pos_stride = pos_stride;
    a.scale = scale;
    run(*attention_partial_kernel_for(D), target, a, mem);
    AttnCombineArgs b{};
    b.partial = gpu<const float>(partial);
    b.stats = gpu<const float>(stats);
    uint64_t out = mem.alloc(size_t{c.n_heads} * D * 4);
    b.out = gpu<float>(out);
    b.n_heads = c.n_heads;
    b.n_chunks = n_chunks;
    b.head_dim = D;
    run("attn_decode_combine", target, b, mem);

    std::vector<double> want(size_t{c.n_heads} * D), tolerance(want.size());
    uint32_t group = c.n_heads / c.n_kv_heads;
    for (uint32_t h = 0; h < c.n_heads; h++) {
        const uint16_t* kh = k.data() + size_t{h / group} * head_stride;
        const uint16_t* vh = v.data() + size_t{h / group} * head_stride;
        std::vector<double> s(c.kv_len);
        double max_s = -INFINITY, sum = 0;
        for (uint32_t p = 0; p < c.kv_len; p++) {
            double dot = 0;
            for (uint32_t d = 0; d < D; d++) dot += static_cast<double>(q[size_t{h} * D + d]) * f16_to_f32(kh[size_t{p} * pos_stride + d]);
            s[p] = dot * scale;
            max_s = std::max(max_s, s[p]);
        }
        for (uint32_t p = 0; p < c.kv_len; p++) sum += s[p] = std::exp(s[p] - max_s);
        for (uint32_t d = 0; d < D; d++) {
            double o = 0, o_abs = 0;
            for (uint32_t p = 0; p < c.kv_len; p++) {
                double value = f16_to_f32(vh[size_t{p} * pos_stride + d]);
                o += s[p] * value;
                o_abs += s[p] * std::fabs(value);
            }
            want[size_t{h} * D + d] = o / sum;
            tolerance[size_t{h} * D + d] = 2e-3 * o_abs / sum + 1e-6;
        }
    }
    INFO("D=" << D << " heads " << c.n_heads << "/" << c.n_kv_heads << " kv_len " << c.kv_len << " on " << target_name(target));
    CHECK(worst_ratio(mem.download<float>(out, want.size()), want, tolerance) <= 1.0);
}

}  // namespace

TEST_CASE("gemm_f16 matches a naive reference on every matrix-core layout") {
    for (Target t : ALL_TARGETS) check_gemm("f16", t);
}

TEST_CASE("quantized gemms (dequantized to fp16 on load) match a naive reference on every matrix-core layout") {
    for (const char* type : {"q4_K", "q5_K", "q6_K", "iq4_xs", "q8_0", "q4_0"})
        for (Target t : {Target::GFX1100, Target::GFX1201, Target::GFX942}) check_gemm(type, t);
}

TEST_CASE("flash-attention decode (partial + combine) matches softmax attention, GQA and chunk edges") {
    const AttentionCase cases[] = {
        {8, 8, 4, 70},      // stories260K's shape: a head much smaller than the wave
        {32, 2, 1, 65},     // a head of exactly one wave32, half a wave64
        {64, 4, 4, 1},      // one key: a single live wave in a single chunk
        {128, 8, 2, 200},   // GQA 4, a partial last chunk
        {128, 12, 1, 64},   // GQA 12: two passes of the heads over the LDS
        {256, 2, 1, 130},
    };
    for (const AttentionCase& c : cases)
        for (Target t : {Target::GFX1100, Target::GFX942}) check_attention(c, t);
}

TEST_CASE("flash-attention decode runs on every target") {
    for (Target t : ALL_TARGETS) check_attention({128, 4, 2, 100}, t);
}

namespace {

// A mixed batch through block tables: three sequences in a pool of 12 blocks of 16 rows whose rows
// nobody owns hold NaN; sequence 0 decodes at position 40, sequence 1 prefills positions 0..4, sequence
// 2 decodes at position 100 (a second chunk). Block ids are shuffled, so a wrong row reads NaN or the
// wrong keys. Tolerance as check_attention's.
void check_paged_attention(uint32_t D, uint32_t n_heads, uint32_t n_kv_heads, Target target) {
    const uint32_t BS = 16, n_blocks = 12, MB = 8, S = 3, rows = n_blocks * BS, row_width = n_kv_heads * D;
    const std::vector<int32_t> table = {7, 2, 9, 0, 0, 0, 0, 0,   // sequence 0: positions 0..47
                                        4, 0, 0, 0, 0, 0, 0, 0,   // sequence 1: 0..15
                                        11, 1, 5, 3, 10, 6, 8, 0};  // sequence 2: 0..111 (7 blocks)
    const std::vector<int32_t> pos = {40, 0, 1, 2, 3, 4, 100}, seq = {0, 1, 1, 1, 1, 1, 2};
    const uint32_t T = uint32_t(pos.size()), n_chunks = MB * BS / ATTN_CHUNK;
    Random rng(71 + D);
    std::vector<float> q = rng.normals(size_t{T} * n_heads * D, 2.0f);
    std::vector<uint16_t> k(size_t{rows} * row_width, 0x7e00), v(k.size(), 0x7e00);  // NaN
    auto row_of = [&](uint32_t s, uint32_t p) { return size_t(table[s * MB + p / BS]) * BS + p % BS; };
    const uint32_t filled[S] = {41, 5, 101};  // positions with keys, per sequence
    for (uint32_t s = 0; s < S; s++)
        for (uint32_t p = 0; p < filled[s]; p++)
            for (uint32_t i = 0; i < row_width; i++) {
                k[row_of(s, p) * row_width + i] = f32_to_f16(rng.normal());
                v[row_of(s, p) * row_width + i] = f32_to_f16(rng.normal());
            }
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));

    DeviceMemory mem;
    AttnDecodeArgs a{};
    a.q = gpu<const float>(mem.upload(q));
    a.k = gpu<const uint16_t>(mem.upload(k));
    a.v = gpu<const uint16_t>(mem.upload(v));
    a.pos = gpu<const int32_t>(mem.upload(pos));
    a.seq = gpu<const int32_t>(mem.upload(seq));
    a.block_table = gpu<const int32_t>(mem.upload(table));
    uint64_t partial = mem.alloc(size_t{T} * n_heads * n_chunks * D * 4), stats = mem.alloc(size_t{T} * n_heads * n_chunks * 8);
    a.partial = gpu<float>(partial);
    a.stats = gpu<float>(stats);
    a.n_heads = n_heads, a.n_kv_heads = n_kv_heads, a.n_chunks = n_chunks;
    a.kv_head_stride = D, a.pos_stride = row_width, a.scale = scale;
    a.n_tokens = T, a.n_seqs = S, a.blocks_per_seq = MB, a.block_size = BS, a.n_blocks = n_blocks;
    run(*attention_partial_kernel_for(D), target, a, mem);
    AttnCombineArgs b{};
    b.partial = gpu<const float>(partial);
    b.stats = gpu<const float>(stats);
    uint64_t out = mem.alloc(size_t{T} * n_heads * D * 4);
    b.out = gpu<float>(out);
    b.n_heads = T * n_heads, b.n_chunks = n_chunks, b.head_dim = D;
    run("attn_decode_combine", target, b, mem);

    std::vector<double> want(size_t{T} * n_heads * D), tolerance(want.size());
    const uint32_t group = n_heads / n_kv_heads;
    for (uint32_t t = 0; t < T; t++)
        for (uint32_t h = 0; h < n_heads; h++) {
            const uint32_t n_keys = uint32_t(pos[t]) + 1;
            std::vector<double> s(n_keys);
            double max_s = -INFINITY, sum = 0;
            for (uint32_t p = 0; p < n_keys; p++) {
                double dot = 0;
                for (uint32_t d = 0; d < D; d++)
                    dot += double(q[(size_t{t} * n_heads + h) * D + d]) * f16_to_f32(k[row_of(uint32_t(seq[t]), p) * row_width + (h / group) * D + d]);
                s[p] = dot * scale, max_s = std::max(max_s, s[p]);
            }
            for (uint32_t p = 0; p < n_keys; p++) sum += s[p] = std::exp(s[p] - max_s);
            for (uint32_t d = 0; d < D; d++) {
                double o = 0, o_abs = 0;
                for (uint32_t p = 0; p < n_keys; p++) {
                    double value = f16_to_f32(v[row_of(uint32_t(seq[t]), p) * row_width + (h / group) * D + d]);
                    o += s[p] * value, o_abs += s[p] * std::fabs(value);
                }
                want[(size_t{t} * n_heads + h) * D + d] = o / sum;
                tolerance[(size_t{t} * n_heads + h) * D + d] = 2e-3 * o_abs / sum + 1e-6;
            }
        }
    INFO("paged, D=" << D << " heads " << n_heads << "/" << n_kv_heads << " on " << target_name(target));
    CHECK(worst_ratio(mem.download<float>(out, want.size()), want, tolerance) <= 1.0);
}

}  // namespace

TEST_CASE("paged flash-attention (partial + combine through block tables) matches softmax attention per sequence") {
    for (Target t : {Target::GFX1100, Target::GFX942}) {
        check_paged_attention(8, 8, 4, t);
        check_paged_attention(64, 4, 2, t);
        check_paged_attention(128, 8, 1, t);
    }
}

TEST_CASE("kv_store_f16 writes each row to its slot as fp16 and skips slots outside the pool") {
    const uint32_t T = 4, row = 40, n_rows = 6;
    Random rng(81);
    std::vector<float> x = rng.normals(size_t{T} * row, 3.0f);
    const std::vector<int32_t> slot = {5, -1, 2, 6};
    std::vector<uint16_t> pool(size_t{n_rows} * row, 0x1234);
    for (Target t : ALL_TARGETS) {
        DeviceMemory mem;
        KvStoreArgs a{};
        a.x = gpu<const float>(mem.upload(x));
        a.slot = gpu<const int32_t>(mem.upload(slot));
        uint64_t p = mem.upload(pool), out = mem.alloc(T * 4);
        a.pool = gpu<uint16_t>(p);
        a.out = gpu<int32_t>(out);
        a.n_tokens = T, a.row = row, a.n_rows = n_rows;
        run("kv_store_f16", t, a, mem);
        std::vector<uint16_t> want = pool;
        for (uint32_t i = 0; i < row; i++) want[5 * row + i] = f32_to_f16(x[i]), want[2 * row + i] = f32_to_f16(x[2 * row + i]);
        INFO(target_name(t));
        CHECK(mem.download<uint16_t>(p, pool.size()) == want);
        CHECK(mem.download<int32_t>(out, T) == slot);
    }
}
