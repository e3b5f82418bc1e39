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

// ---- quantized caches (q8_0, q4_0: llama.cpp's -ctk/-ctv) -------------------------------------------

TEST_CASE("kv_store quantizes rows into a q8_0 or q4_0 pool as gguf's reference quantizers do") {
    const int64_t rows = 6, Hkv = 2, D = 64, T = 3;
    for (gguf::Type type : {gguf::Type::Q8_0, gguf::Type::Q4_0}) {
        INFO(gguf::type_name(type));
        Tensor pool = Tensor::empty({rows, Hkv, D}, DType::from_gguf(type));
        const std::vector<double> x = uniform(size_t(T * Hkv * D), 5);
        const std::vector<int32_t> slots = {4, 0, 2};
        kv_store(pool, tensor(x, {T, Hkv, D}, f32), i32_tensor(slots)).realize();
        // each row quantized and dequantized by the type table; rows not written read 0 (zero blocks)
        std::vector<double> want(size_t(rows * Hkv * D), 0.0);
        const gguf::TypeTraits& traits = gguf::type_traits(type);
        for (int64_t t = 0; t < T; t++) {
            std::vector<float> row(x.begin() + t * Hkv * D, x.begin() + (t + 1) * Hkv * D), back(row.size());
            std::vector<uint8_t> blocks(*gguf::row_bytes(type, Hkv * D));
            traits.quantize(row.data(), blocks.data(), Hkv * D);
            traits.dequantize(blocks.data(), back.data(), Hkv * D);
            std::copy(back.begin(), back.end(), want.begin() + slots[size_t(t)] * Hkv * D);
        }
        CHECK(values(dequantize(pool.reshape({rows * Hkv, D}))) == want);
    }
}

TEST_CASE("attention over a q8_0 or q4_0 cache written at start_pos equals attention over an f32 cache of its values") {
    // a Jit as a session runs it: a prefill chunk of 5 tokens, then 3 decode steps; the reference is an
    // f32 cache holding what the blocks hold (the same kernels then see the same numbers: bit for bit)
    const int64_t H = 4, Hkv = 2, D = 32, C = 16;
    for (gguf::Type type : {gguf::Type::Q8_0, gguf::Type::Q4_0}) {
        INFO(gguf::type_name(type));
        const gguf::TypeTraits& traits = gguf::type_traits(type);
        Tensor cache_k = Tensor::empty({C, Hkv, D}, DType::from_gguf(type)), cache_v = Tensor::empty({C, Hkv, D}, DType::from_gguf(type));
        Var start("start_pos", 0, C - 8);
        Jit jit([&](const std::vector<Tensor>& in) {  // q (T, H, D), k and v (T, Hkv, D)
            Tensor k = kv_store(cache_k, in[1], start), v = kv_store(cache_v, in[2], start);
            return std::vector<Tensor>{attention(in[0], k, v, start, 0.25)};
        });
        std::vector<double> kd(size_t(C * Hkv * D), 0.0), vd(kd.size(), 0.0);  // the blocks' values so far
        int64_t pos = 0;
        for (int64_t T : {5, 1, 1, 1}) {
            const std::vector<double> q = uniform(size_t(T * H * D), uint32_t(40 + pos)), k = uniform(size_t(T * Hkv * D), uint32_t(60 + pos)),
                                      v = uniform(size_t(T * Hkv * D), uint32_t(80 + pos));
            for (auto [x, into] : {std::pair{&k, &kd}, std::pair{&v, &vd}})
                for (int64_t t = 0; t < T; t++) {
                    std::vector<float> row(x->begin() + t * Hkv * D, x->begin() + (t + 1) * Hkv * D), back(row.size());
                    std::vector<uint8_t> blocks(*gguf::row_bytes(type, Hkv * D));
                    traits.quantize(row.data(), blocks.data(), Hkv * D);
                    traits.dequantize(blocks.data(), back.data(), Hkv * D);
                    std::copy(back.begin(), back.end(), into->begin() + (pos + t) * Hkv * D);
                }
            start.bind(pos);
            const std::vector<double> got = values(jit({tensor(q, {T, H, D}, f32), tensor(k, {T, Hkv, D}, f32), tensor(v, {T, Hkv, D}, f32)})[0]);
            Tensor want = attention(tensor(q, {T, H, D}, f32), tensor(kd, {C, Hkv, D}, f32), tensor(vd, {C, Hkv, D}, f32), pos, 0.25);
            INFO("tokens from " << pos);
            CHECK(got == values(want));
            pos += T;
        }
        CHECK(jit.n_captured() == 2);
    }
}

TEST_CASE("a decode step over a quantized cache reads the blocks in place: the store and the attention, no f32 copy of the cache") {
    const int64_t H = 4, Hkv = 2, D = 64, C = 4096;
    const DType q8 = DType::from_gguf(gguf::Type::Q8_0);
    Tensor cache_k = Tensor::empty({C, Hkv, D}, q8), cache_v = Tensor::empty({C, Hkv, D}, q8);
    Tensor q = tensor(uniform(size_t(H * D), 1), {1, H, D}, f32), k = tensor(uniform(size_t(Hkv * D), 2), {1, Hkv, D}, f32);
    Tensor out = attention(q, kv_store(cache_k, k, Dim(3000)), kv_store(cache_v, k, Dim(3000)), Dim(3000), 0.125);
    out.realize();
    int custom = 0;
    for (const KernelInfo& kernel : last_schedule()) {
        INFO(kernel.name << " " << shape_str(kernel.out_shape));
        CHECK(numel(kernel.out_shape).max() < C);  // nothing the size of the cache is made
        custom += kernel.custom;
    }
    CHECK(custom == 3);  // two stores and the attention
}

TEST_CASE("KV cache types: a type the device's attention reads, in whole blocks per head") {
    const DType q8 = DType::from_gguf(gguf::Type::Q8_0);
    CHECK(kv_cache_type(q8, 64) == gguf::Type::Q8_0);
    CHECK(kv_cache_type(DType::from_gguf(gguf::Type::Q4_0), 32) == gguf::Type::Q4_0);
    CHECK(kv_cache_type(f16, 48) == gguf::Type::F16);
    CHECK_THROWS_WITH(kv_cache_type(q8, 48), Catch::Contains("q8_0 KV caches need head dims that are multiples of its 32-value blocks, got 48"));
    CHECK_THROWS_WITH(kv_cache_type(DType::from_gguf(gguf::Type::Q4_K), 256),
                      Catch::Contains("CPU's attention reads f16, f32, q8_0, q4_0 KV caches, not q4_K"));
    CHECK_THROWS_WITH(kv_cache_type(bf16, 64), Catch::Contains("not bf16"));
    // the builders check it too
    Tensor cache = Tensor::empty({8, 2, 48}, q8);
    Tensor q = tensor(uniform(size_t(4 * 48), 1), {1, 4, 48}, f32);
    CHECK_THROWS_WITH(attention(q, cache, cache, 0, 1.0), Catch::StartsWith("[engine] attention: q8_0 KV caches need head dims"));
    CHECK_THROWS_WITH(kv_store(cache, tensor(uniform(size_t(2 * 48), 2), {1, 2, 48}, f32), Dim(0)),
                      Catch::StartsWith("[engine] kv_store: q8_0 KV caches need head dims"));
}
