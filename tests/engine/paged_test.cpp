// Paged KV builders (engine/paged.cpp): kv_store writes rows by slot in place, paged_attention over a
// pool written that way equals attention() over each sequence's own cache, and rope at a positions
// tensor equals rope at start_pos for consecutive positions; all replayable by a Jit.
#include "engine_test_util.h"

#include <numeric>

using namespace engine;
using namespace etest;

namespace {

Tensor i32_tensor(const std::vector<int32_t>& v) { return Tensor::from_vector(v, {int64_t(v.size())}); }

}  // namespace

TEST_CASE("kv_store writes rows by slot into an f32 or f16 pool in place and skips slots outside it") {
    const int64_t rows = 8, Hkv = 2, D = 4, T = 4;
    for (DType dt : {f32, f16}) {
        std::vector<double> init = uniform(size_t(rows * Hkv * D), 1), x = uniform(size_t(T * Hkv * D), 2);
        for (auto& v : init) v = to_dtype(v, dt);
        Tensor pool = tensor(init, {rows, Hkv, D}, dt);
        const std::vector<int32_t> slots = {5, 1, -1, 7};
        Tensor after = kv_store(pool, tensor(x, {T, Hkv, D}, f32), i32_tensor(slots));
        after.realize();
        std::vector<double> want = init;
        for (int64_t t = 0; t < T; t++)
            if (slots[size_t(t)] >= 0)
                for (int64_t i = 0; i < Hkv * D; i++) want[size_t(slots[size_t(t)] * Hkv * D + i)] = to_dtype(x[size_t(t * Hkv * D + i)], dt);
        CHECK(values(pool) == want);
    }
}

TEST_CASE("rope at a positions tensor equals rope at start_pos for consecutive positions") {
    const int64_t T = 5, H = 2, Dh = 12;
    std::vector<double> x = uniform(size_t(T * H * Dh), 3);
    for (RopeLayout layout : {RopeLayout::NORM, RopeLayout::NEOX}) {
        Tensor xt = tensor(x, {T, H, Dh}, f32);
        Tensor by_start = rope(xt, Dim(9), 8, 10000.0, layout);
        Tensor by_pos = rope(xt, i32_tensor({9, 10, 11, 12, 13}), 8, 10000.0, layout);
        CHECK(values(by_pos) == values(by_start));
    }
}

TEST_CASE("paged_attention over a pool written by kv_store equals attention over each sequence's cache") {
    // three sequences; this step: 3 prompt tokens of sequence 0 (positions 4..6), a decode token of
    // sequence 1 (position 19, its second block), one of sequence 2 (position 0). Blocks of 16 rows (the
    // vector width: bit-identical), scattered.
    const int64_t H = 4, Hkv = 2, Dk = 16, Dv = 16, BS = 16, n_blocks = 6, MB = 2;
    const std::vector<int64_t> len = {7, 20, 1};
    const std::vector<int32_t> table = {3, 5, 0, 4, 2, 1};  // (3, MB)
    const std::vector<int32_t> seq = {0, 1, 0, 2, 0}, pos = {4, 19, 5, 0, 6};
    const int64_t T = int64_t(seq.size());
    for (DType dt : {f32, f16}) {
        INFO(dt.name());
        std::vector<std::vector<double>> k(3), v(3);  // each sequence's rows, contiguous
        for (int s = 0; s < 3; s++) {
            k[size_t(s)] = uniform(size_t(len[size_t(s)] * Hkv * Dk), 10 + uint32_t(s));
            v[size_t(s)] = uniform(size_t(len[size_t(s)] * Hkv * Dv), 20 + uint32_t(s));
        }
        Tensor k_pool = Tensor::empty({n_blocks * BS, Hkv, Dk}, dt), v_pool = Tensor::empty({n_blocks * BS, Hkv, Dv}, dt);
        // the earlier rows as one store, then this step's rows in the batch's order
        auto slot = [&](int s, int64_t p) { return table[size_t(s * MB + p / BS)] * int32_t(BS) + int32_t(p % BS); };
        std::vector<int32_t> old_slots, new_slots;
        std::vector<double> old_k, old_v, new_k, new_v;
        for (int s = 0; s < 3; s++)
            for (int64_t p = 0; p < len[size_t(s)]; p++) {
                bool in_step = false;
                for (int64_t t = 0; t < T; t++) in_step |= seq[size_t(t)] == s && pos[size_t(t)] == p;
                if (in_step) continue;
                old_slots.push_back(slot(s, p));
                old_k.insert(old_k.end(), k[size_t(s)].begin() + p * Hkv * Dk, k[size_t(s)].begin() + (p + 1) * Hkv * Dk);
                old_v.insert(old_v.end(), v[size_t(s)].begin() + p * Hkv * Dv, v[size_t(s)].begin() + (p + 1) * Hkv * Dv);
            }
        for (int64_t t = 0; t < T; t++) {
            const int s = seq[size_t(t)];
            const int64_t p = pos[size_t(t)];
            new_slots.push_back(slot(s, p));
            new_k.insert(new_k.end(), k[size_t(s)].begin() + p * Hkv * Dk, k[size_t(s)].begin() + (p + 1) * Hkv * Dk);
            new_v.insert(new_v.end(), v[size_t(s)].begin() + p * Hkv * Dv, v[size_t(s)].begin() + (p + 1) * Hkv * Dv);
        }
        const int64_t n_old = int64_t(old_slots.size());
        realize({kv_store(k_pool, tensor(old_k, {n_old, Hkv, Dk}, f32), i32_tensor(old_slots)),
                 kv_store(v_pool, tensor(old_v, {n_old, Hkv, Dv}, f32), i32_tensor(old_slots))});

        std::vector<double> q = uniform(size_t(T * H * Dk), 30);
        const double scale = 0.25;
        Tensor ks = kv_store(k_pool, tensor(new_k, {T, Hkv, Dk}, f32), i32_tensor(new_slots));
        Tensor vs = kv_store(v_pool, tensor(new_v, {T, Hkv, Dv}, f32), i32_tensor(new_slots));
        Tensor out = paged_attention(tensor(q, {T, H, Dk}, f32), ks, vs, i32_tensor(pos), i32_tensor(seq),
                                     Tensor::from_vector(table, {3, MB}), int(BS), scale);
        REQUIRE(shape_str(out.shape()) == "(5,4,16)");
        const std::vector<double> got = values(out);
        for (int64_t t = 0; t < T; t++) {  // attention() for this token alone over its sequence's cache
            const int s = seq[size_t(t)];
            const int64_t C = len[size_t(s)];
            std::vector<double> qt(q.begin() + t * H * Dk, q.begin() + (t + 1) * H * Dk);
            Tensor want = attention(tensor(qt, {1, H, Dk}, f32), tensor(k[size_t(s)], {C, Hkv, Dk}, dt), tensor(v[size_t(s)], {C, Hkv, Dv}, dt),
                                    pos[size_t(t)], scale);
            std::vector<double> got_t(got.begin() + t * H * Dv, got.begin() + (t + 1) * H * Dv);
            INFO("token " << t);
            CHECK(got_t == values(want));
        }
    }
}

TEST_CASE("a Jit replays kv_store and paged_attention with new slots, positions and tables") {
    const int64_t H = 2, Hkv = 1, D = 16, BS = 2, n_blocks = 4;
    Tensor k_pool = Tensor::empty({n_blocks * BS, Hkv, D}, f32), v_pool = Tensor::empty({n_blocks * BS, Hkv, D}, f32);
    realize({k_pool.assign(Tensor::zeros({n_blocks * BS, Hkv, D})), v_pool.assign(Tensor::zeros({n_blocks * BS, Hkv, D}))});
    Jit jit([&](const std::vector<Tensor>& in) {  // in: q (1, H, D), kv (1, Hkv, D), slot, pos, seq (1), table (1, 2)
        Tensor ks = kv_store(k_pool, in[1], in[2]), vs = kv_store(v_pool, in[1], in[2]);
        return std::vector<Tensor>{paged_attention(in[0], ks, vs, in[3], in[4], in[5], int(BS), 1.0)};
    });
    // a sequence in blocks {3, 1}: position p at row table[p / 2] * 2 + p % 2; each step stores value
    // row p + 1 (all features), and the output is the mean of the stored rows (all keys equal: q = 0)
    const std::vector<int32_t> table = {3, 1};
    for (int32_t p = 0; p < 4; p++) {
        Tensor kv = tensor(std::vector<double>(size_t(Hkv * D), double(p + 1)), {1, Hkv, D}, f32);
        const int32_t row = table[size_t(p / BS)] * int32_t(BS) + p % int32_t(BS);
        Tensor out = jit({tensor(std::vector<double>(size_t(H * D), 0.0), {1, H, D}, f32), kv, i32_tensor({row}), i32_tensor({p}), i32_tensor({0}),
                          Tensor::from_vector(table, {1, 2})})[0];
        const double want = (p + 2) / 2.0;  // mean of 1 .. p+1
        for (double x : values(out)) REQUIRE(x == want);
    }
    CHECK(jit.n_captured() == 1);
}
