// Paged attention (keys through a block table) against the contiguous kernel: a batch of a prefill chunk
// and decode tokens from three sequences whose blocks lie scattered in one pool, each token compared
// with the contiguous kernel run for that token alone over its sequence's own cache, on every variant.
#include "devices/cpu/kernels/kernels.h"
#include "kernels_test.h"

#include <algorithm>
#include <numeric>

using namespace kernels_test;
namespace ck = cpu_kernels;

namespace {

struct Setup {
    int64_t n_head, n_head_kv, dim_k, dim_v, block_size, window = 0;
    Type kv_type = Type::F32;
    bool sinks = false;
    bool exact = true;  // bit-identical: blocks of keys split as the contiguous kernel splits them
};

void check_paged(const Setup& s, uint64_t seed) {
    Rng rng(seed);
    // sequence lengths after this step; token (seq, pos) pairs in batch order: a decode token of 1,
    // a chunk of 9 prompt tokens of 0 (positions 23..31), a decode token of 2
    const std::vector<int64_t> len = {32, 41, 6};
    std::vector<int32_t> seq = {1}, pos = {40};
    for (int32_t p = 23; p < 32; p++) seq.push_back(0), pos.push_back(p);
    seq.push_back(2), pos.push_back(5);
    const int64_t T = int64_t(seq.size()), S = 4, MB = (41 + s.block_size - 1) / s.block_size + 1;
    const int64_t k_row = s.n_head_kv * s.dim_k, v_row = s.n_head_kv * s.dim_v;
    const size_t k_bytes = *gguf::row_bytes(s.kv_type, k_row), v_bytes = *gguf::row_bytes(s.kv_type, v_row);  // a row of each

    // each sequence's contiguous cache, and the pool holding the same rows in shuffled blocks
    std::vector<std::vector<uint8_t>> kc(3), vc(3);
    for (int i = 0; i < 3; i++) {
        for (auto [c, row] : {std::pair{&kc[i], k_row}, std::pair{&vc[i], v_row}}) {
            const std::vector<float> f = random_floats(rng, size_t(len[i] * row));
            c->resize(*gguf::row_bytes(s.kv_type, int64_t(f.size())));
            gguf::type_traits(s.kv_type).quantize(f.data(), c->data(), int64_t(f.size()));
        }
    }
    const int64_t n_blocks = S * MB + 3;
    std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    for (int64_t i = n_blocks - 1; i > 0; i--) std::swap(ids[size_t(i)], ids[rng.next() % uint64_t(i + 1)]);
    std::vector<int32_t> table(size_t(S * MB));
    for (size_t i = 0; i < table.size(); i++) table[i] = ids[i];
    std::vector<uint8_t> k_pool(size_t(n_blocks * s.block_size) * k_bytes), v_pool(size_t(n_blocks * s.block_size) * v_bytes);
    for (uint8_t& b : k_pool) b = uint8_t(rng.next() & 0x3b);  // garbage a wrong row would show (finite as f16 scales too)
    for (uint8_t& b : v_pool) b = uint8_t(rng.next() & 0x3b);
    for (int i = 0; i < 3; i++)
        for (int64_t p = 0; p < len[i]; p++) {
            const int64_t row = int64_t(table[size_t(i * MB + p / s.block_size)]) * s.block_size + p % s.block_size;
            std::memcpy(&k_pool[size_t(row) * k_bytes], &kc[i][size_t(p) * k_bytes], k_bytes);
            std::memcpy(&v_pool[size_t(row) * v_bytes], &vc[i][size_t(p) * v_bytes], v_bytes);
        }

    const std::vector<float> q = random_floats(rng, size_t(T * s.n_head * s.dim_k));
    const std::vector<float> sinks = random_floats(rng, size_t(s.n_head), 2.0f);
    ck::Attention a;
    a.q = q.data(), a.q_token_stride = s.n_head * s.dim_k, a.q_head_stride = s.dim_k;
    a.kv_type = s.kv_type;
    a.k_pos_stride = k_row, a.k_head_stride = s.dim_k;
    a.v_pos_stride = v_row, a.v_head_stride = s.dim_v;
    a.out_token_stride = s.n_head * s.dim_v, a.out_head_stride = s.dim_v;
    a.n_head = s.n_head, a.n_head_kv = s.n_head_kv, a.head_dim_k = s.dim_k, a.head_dim_v = s.dim_v;
    a.scale = 1.0f / std::sqrt(float(s.dim_k)), a.window = s.window, a.sinks = s.sinks ? sinks.data() : nullptr;

    ck::Attention paged = a;
    std::vector<float> out(size_t(T * s.n_head * s.dim_v), -777.0f);
    paged.k = k_pool.data(), paged.v = v_pool.data(), paged.out = out.data(), paged.n_tokens = T;
    paged.pos = pos.data(), paged.seq = seq.data(), paged.block_table = table.data();
    paged.n_seqs = S, paged.blocks_per_seq = MB, paged.block_size = s.block_size, paged.n_blocks = n_blocks;
    const int64_t cut = s.n_head + 1;  // two ranges, the cut inside a group of heads
    ck::attention(paged, 0, cut);
    ck::attention(paged, cut, T * s.n_head);

    for (int64_t t = 0; t < T; t++) {
        ck::Attention one = a;  // the contiguous kernel, this token alone over its sequence's cache
        std::vector<float> ref(size_t(s.n_head * s.dim_v));
        one.q = q.data() + t * s.n_head * s.dim_k, one.out = ref.data();
        one.k = kc[size_t(seq[size_t(t)])].data(), one.v = vc[size_t(seq[size_t(t)])].data();
        one.n_tokens = 1, one.start_pos = pos[size_t(t)];
        ck::attention(one, 0, s.n_head);
        for (int64_t i = 0; i < s.n_head * s.dim_v; i++) {
            const float got = out[size_t(t * s.n_head * s.dim_v + i)], want = ref[size_t(i)];
            INFO("token " << t << " (seq " << seq[size_t(t)] << ", pos " << pos[size_t(t)] << ") value " << i << ": " << got << " vs " << want);
            if (s.exact) REQUIRE(got == want);
            else REQUIRE(std::fabs(got - want) <= 1e-5f * std::fabs(want) + 1e-6f);
        }
    }
}

void on_every_variant(const Setup& s, uint64_t seed) {
    for (Isa isa : supported_isas()) {
        ActiveIsa active(isa);
        INFO(ck::isa_name(isa));
        check_paged(s, seed);
    }
}

}  // namespace

TEST_CASE("paged attention equals the contiguous kernel bit for bit: F32, 64-wide heads, grouped-query") {
    on_every_variant({8, 2, 64, 64, 16}, 1);
}

TEST_CASE("paged attention equals the contiguous kernel bit for bit: F16, 128-wide heads, blocks of 32") {
    on_every_variant({4, 4, 128, 128, 32, 0, Type::F16}, 2);
}

TEST_CASE("paged attention with a sliding window and sinks, F16, blocks of 16: within 1e-5") {
    on_every_variant({6, 2, 32, 32, 16, 20, Type::F16, true, false}, 3);
}

TEST_CASE("paged attention with blocks smaller than a vector and odd head dims: within 1e-5") {
    on_every_variant({6, 3, 24, 20, 4, 0, Type::F32, false, false}, 4);
    on_every_variant({4, 2, 64, 64, 5, 7, Type::F16, true, false}, 5);
}

TEST_CASE("paged attention equals the contiguous kernel bit for bit over Q8_0 and Q4_0 pools") {
    on_every_variant({8, 2, 64, 64, 16, 0, Type::Q8_0}, 6);
    on_every_variant({4, 4, 128, 128, 32, 0, Type::Q4_0}, 7);
    on_every_variant({6, 2, 32, 32, 16, 20, Type::Q8_0, true, false}, 8);  // window and sinks: within 1e-5
    on_every_variant({4, 2, 96, 64, 5, 0, Type::Q4_0, false, false}, 9);   // blocks of 5 rows, dims that differ
}

TEST_CASE("paged attention clamps a block id past the pool instead of reading past it") {
    const float q[16] = {1.0f};
    float k[4 * 16] = {}, v[4 * 16] = {}, out[16] = {};
    v[0] = 9.0f, v[2 * 16] = 5.0f;  // rows 0 and 2 (the last block's first row)
    const int32_t pos = 0, seq = 0, table[2] = {1000, 0};
    ck::Attention a;
    a.q = q, a.q_token_stride = a.q_head_stride = 16, a.k = k, a.v = v, a.out = out;
    a.k_pos_stride = a.k_head_stride = a.v_pos_stride = a.v_head_stride = 16;
    a.out_token_stride = a.out_head_stride = 16, a.n_tokens = 1, a.n_head = a.n_head_kv = 1, a.head_dim_k = a.head_dim_v = 16;
    a.pos = &pos, a.seq = &seq, a.block_table = table, a.n_seqs = 1, a.blocks_per_seq = 2, a.block_size = 2, a.n_blocks = 2;
    // block id 1000 clamps to the last block (1): position 0 reads pool row 2
    ck::attention(a, 0, 1);
    CHECK(out[0] == 5.0f);
}
