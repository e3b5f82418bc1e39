// The mixture-of-experts pieces of the engine against naive references: the expert-indexed product
// for every weight type (tokens grouped by expert, shared or per-slot inputs; only the chosen experts'
// weights are read), ggml-ordered top-k, attention sinks and sliding window, and YaRN-scaled RoPE.
#include "engine_test_util.h"

#include "devices/device.h"
#include "gguf/blocks.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>

using namespace engine;
using namespace etest;

namespace {

// Expert weights (E, N, K) of `type` and the floats they dequantize to. MXFP4, the K-quants and IQ4 have
// no reference quantizer: their blocks are random codes with fixed small scales.
struct ExpertWeights {
    Tensor t;
    std::vector<double> deq;
    std::vector<uint8_t> raw;
};
ExpertWeights expert_weights(gguf::Type type, int64_t E, int64_t N, int64_t K, uint32_t seed) {
    const gguf::TypeTraits& tr = gguf::type_traits(type);
    const int64_t n = E * N * K;
    std::vector<uint8_t> raw(size_t(n / tr.block_size) * tr.bytes_per_block);
    if (type == gguf::Type::MXFP4) {
        std::vector<double> r = uniform(raw.size(), seed, 0, 256);
        for (size_t i = 0; i < raw.size(); i++) raw[i] = uint8_t(r[i]);
        for (size_t b = 0; b < raw.size(); b += tr.bytes_per_block) raw[b] = uint8_t(124 + raw[b] % 6);  // E8M0 2^-4 .. 2^1
    } else if (!tr.quantize) {  // no reference quantizer (K-quants, IQ4): random codes, d = dmin = 2^-7
        std::vector<double> r = uniform(raw.size(), seed, 0, 256);
        for (size_t i = 0; i < raw.size(); i++) raw[i] = uint8_t(r[i]);
        const gguf::half d = 0x2000;
        std::vector<size_t> scales;  // offsets of the block's fp16 scales
        if (type == gguf::Type::Q4_K) scales = {offsetof(gguf::block_q4_K, d), offsetof(gguf::block_q4_K, dmin)};
        else if (type == gguf::Type::Q5_K) scales = {offsetof(gguf::block_q5_K, d), offsetof(gguf::block_q5_K, dmin)};
        else if (type == gguf::Type::Q6_K) scales = {offsetof(gguf::block_q6_K, d)};
        else if (type == gguf::Type::IQ4_XS) scales = {offsetof(gguf::block_iq4_xs, d)};
        else if (type == gguf::Type::IQ4_NL) scales = {offsetof(gguf::block_iq4_nl, d)};
        else FAIL("expert_weights: no scale offsets for " << gguf::type_name(type));
        for (size_t b = 0; b < raw.size(); b += tr.bytes_per_block)
            for (size_t at : scales) std::memcpy(raw.data() + b + at, &d, 2);
    } else {
        std::vector<double> v = uniform(size_t(n), seed, -1, 1);
        std::vector<float> f(v.begin(), v.end());
        tr.quantize(f.data(), raw.data(), n);
    }
    std::vector<float> back(static_cast<size_t>(n));
    tr.dequantize(raw.data(), back.data(), n);
    return {Tensor::from_data(raw.data(), raw.size(), {E, N, K}, DType::from_gguf(type)), {back.begin(), back.end()}, raw};
}

// x rounded as the product sees it: packed in the activation format of `weight` and back.
std::vector<double> as_activations(std::vector<double> x, gguf::Type weight, int64_t K) {
    // MXFP4 multiplies Q8_0 activations (as ggml); the rest the CPU's partner format
    gguf::Type act = weight == gguf::Type::MXFP4 ? gguf::Type::Q8_0 : devices::get("CPU").activation_type(weight);
    const gguf::TypeTraits& tr = gguf::type_traits(act);
    for (size_t r = 0; r < x.size() / size_t(K); r++) {
        std::vector<float> row(x.begin() + r * K, x.begin() + (r + 1) * K), back(static_cast<size_t>(K));
        std::vector<uint8_t> raw(size_t(K / tr.block_size) * tr.bytes_per_block);
        tr.quantize(row.data(), raw.data(), K);
        tr.dequantize(raw.data(), back.data(), K);
        std::copy(back.begin(), back.end(), x.begin() + r * K);
    }
    return x;
}

}  // namespace

TEST_CASE("expert-indexed linear matches a per-token product with each chosen expert") {
    const int64_t E = 5, N = 37, K = 64, k = 2;
    for (gguf::Type type : {gguf::Type::F32, gguf::Type::F16, gguf::Type::Q8_0, gguf::Type::MXFP4}) {
        ExpertWeights w = expert_weights(type, E, N, K, 7);
        for (int64_t T : {1, 3, 40}) {
            // Expert 3 is never chosen; expert 1 serves many tokens (the grouped prefill path).
            std::vector<double> ids(size_t(T * k));
            for (int64_t t = 0; t < T; t++) ids[size_t(t * k)] = 1, ids[size_t(t * k + 1)] = double((t * 2) % 5 == 3 ? 4 : (t * 2) % 5);
            for (bool per_slot : {false, true}) {
                INFO(gguf::type_name(type) << ", T " << T << (per_slot ? ", per-slot input" : ", shared input"));
                int64_t rows = per_slot ? T * k : T;
                std::vector<double> x = uniform(size_t(rows * K), uint32_t(T + 11));
                for (auto& v : x) v = to_dtype(v, f32);
                std::vector<double> xa = as_activations(x, type, K), want(size_t(T * k * N));
                for (int64_t t = 0; t < T; t++)
                    for (int64_t s = 0; s < k; s++) {
                        int64_t e = int64_t(ids[size_t(t * k + s)]), xr = per_slot ? t * k + s : t;
                        for (int64_t r = 0; r < N; r++) {
                            double acc = 0;
                            for (int64_t c = 0; c < K; c++) acc += w.deq[size_t((e * N + r) * K + c)] * xa[size_t(xr * K + c)];
                            want[size_t((t * k + s) * N + r)] = acc;
                        }
                    }
                ExpertSelection sel = select_experts(tensor(ids, {T, k}, i32), int(E));
                Tensor xt = tensor(x, per_slot ? Shape{T, k, K} : Shape{T, K}, f32);
                require_close(values(linear_experts(xt, w.t, sel)), want, 1e-4, 1e-4);
            }
        }
    }
}

TEST_CASE("expert weights packed by pack_experts give what their rows give") {
    const int64_t E = 5, K = 256, k = 2;
    for (gguf::Type type : {gguf::Type::Q8_0, gguf::Type::Q4_0, gguf::Type::Q4_1, gguf::Type::Q5_0, gguf::Type::Q5_1,
                            gguf::Type::IQ4_NL, gguf::Type::IQ4_XS, gguf::Type::Q4_K, gguf::Type::Q5_K, gguf::Type::Q6_K}) {
        const int64_t N = 32;  // two panels of 16 rows per expert
        ExpertWeights w = expert_weights(type, E, N, K, 21);
        Tensor packed = pack_experts(w.t);
        if (!devices::get("CPU").can_pack_experts(type, E, N, K)) {  // no AVX-512: the rows stay
            REQUIRE(packed.node().get() == w.t.node().get());
            continue;
        }
        REQUIRE(packed.node().get() != w.t.node().get());
        REQUIRE(pack_experts(packed).node().get() == packed.node().get());  // packing twice is a no-op
        for (int64_t T : {1, 3, 40})  // decode, a few tokens, the grouped prefill path
            for (bool per_slot : {false, true}) {
                INFO(gguf::type_name(type) << ", T " << T << (per_slot ? ", per-slot input" : ", shared input"));
                std::vector<double> ids(size_t(T * k));
                for (int64_t t = 0; t < T; t++) ids[size_t(t * k)] = 1, ids[size_t(t * k + 1)] = double((3 * t) % 5 == 1 ? 4 : (3 * t) % 5);
                ExpertSelection sel = select_experts(tensor(ids, {T, k}, i32), int(E));
                const int64_t rows = per_slot ? T * k : T;
                Tensor x = tensor(uniform(size_t(rows * K), uint32_t(T + 5)), per_slot ? Shape{T, k, K} : Shape{T, K}, f32);
                // the same integer sums; the super-block types add their groups in another order (fp32 rounding)
                require_close(values(linear_experts(x, packed, sel)), values(linear_experts(x, w.t, sel)), 1e-4, 1e-4);
            }
    }
    // experts whose rows are not whole panels stay as they are
    ExpertWeights odd = expert_weights(gguf::Type::Q8_0, 3, 24, 64, 2);
    REQUIRE(pack_experts(odd.t).node().get() == odd.t.node().get());
}

TEST_CASE("expert-indexed linear rejects mismatched shapes") {
    ExpertWeights w = expert_weights(gguf::Type::F32, 4, 8, 32, 1);
    ExpertSelection sel = select_experts(tensor({0, 1}, {1, 2}, i32), 4);
    REQUIRE_THROWS_WITH(linear_experts(Tensor::zeros({1, 16}), w.t, sel), Catch::Contains("[engine] linear_experts"));
    REQUIRE_THROWS_WITH(linear_experts(Tensor::zeros({1, 32}), w.t, select_experts(tensor({0, 1}, {1, 2}, i32), 5)),
                        Catch::Contains("experts"));
    REQUIRE_THROWS_WITH(linear_experts(Tensor::zeros({2, 32}), w.t, sel), Catch::Contains("neither"));
}

TEST_CASE("expert-indexed linear reads only the chosen experts' weights") {
    // Each expert's weights fill whole pages; the experts nobody chose are made unreadable, so a
    // product that touched them (decode or grouped prefill) would crash here.
    const int64_t E = 4, K = 256, k = 2, page = sysconf(_SC_PAGESIZE);
    for (gguf::Type type : {gguf::Type::F32, gguf::Type::F16, gguf::Type::Q8_0, gguf::Type::MXFP4}) {
        const int64_t row = int64_t(*gguf::row_bytes(type, K)), N = std::lcm(row, page) / row, expert_bytes = N * row;
        ExpertWeights w = expert_weights(type, E, N, K, 3);
        void* mem = mmap(nullptr, size_t(E * expert_bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(mem != MAP_FAILED);
        const size_t mapped = size_t(E * expert_bytes);
        std::shared_ptr<const void> owner(mem, [mapped](const void* p) { munmap(const_cast<void*>(p), mapped); });
        REQUIRE(w.raw.size() == size_t(E * expert_bytes));
        std::memcpy(mem, w.raw.data(), w.raw.size());
        for (int64_t e : {1, 3}) REQUIRE(mprotect(static_cast<uint8_t*>(mem) + e * expert_bytes, size_t(expert_bytes), PROT_NONE) == 0);
        Tensor guarded = Tensor::external(mem, {E, N, K}, DType::from_gguf(type), owner);
        for (int64_t T : {1, 24}) {
            INFO(gguf::type_name(type) << ", T " << T);
            std::vector<double> ids(size_t(T * k));
            for (int64_t t = 0; t < T; t++) ids[size_t(t * k)] = double(2 * (t % 2)), ids[size_t(t * k + 1)] = double(2 - 2 * (t % 2));
            ExpertSelection sel = select_experts(tensor(ids, {T, k}, i32), int(E));
            Tensor x = tensor(uniform(size_t(T * K), uint32_t(T)), {T, K}, f32);
            require_close(values(linear_experts(x, guarded, sel)), values(linear_experts(x, w.t, sel)), 0, 0);
        }
    }
}

TEST_CASE("top_k_ggml orders like llama.cpp's argsort, ties included") {
    for (int64_t n : {8, 40}) {
        // Few distinct values: many ties, and for n > 16 std::sort's introsort leaves them unordered.
        std::vector<double> v = uniform(size_t(3 * n), uint32_t(n));
        for (auto& x : v) x = std::floor(x * 2);
        const int k = 6;
        std::vector<double> want;
        for (int64_t r = 0; r < 3; r++) {
            std::vector<int32_t> idx(static_cast<size_t>(n));
            std::iota(idx.begin(), idx.end(), 0);
            const double* row = v.data() + r * n;
            std::sort(idx.begin(), idx.end(), [row](int32_t a, int32_t b) { return float(row[a]) > float(row[b]); });
            want.insert(want.end(), idx.begin(), idx.begin() + k);
        }
        require_close(values(top_k_ggml(tensor(v, {3, n}, f32), k)), want, 0, 0);
    }
}

TEST_CASE("attention with sinks and a sliding window") {
    const int64_t T = 6, H = 4, Hkv = 2, D = 16, window = 3;
    std::vector<double> q = uniform(size_t(T * H * D), 1), k = uniform(size_t(T * Hkv * D), 2), v = uniform(size_t(T * Hkv * D), 3);
    std::vector<double> sinks = {0.5, -1.0, 2.0, 0.0};
    const double scale = 0.25;
    for (int64_t w : {int64_t(0), window})
        for (bool with_sinks : {false, true}) {
            INFO("window " << w << (with_sinks ? ", sinks" : ""));
            std::vector<double> want(size_t(T * H * D));
            for (int64_t t = 0; t < T; t++)
                for (int64_t h = 0; h < H; h++) {
                    int64_t kvh = h / (H / Hkv), first = w > 0 ? std::max<int64_t>(0, t - w + 1) : 0;
                    std::vector<double> s;
                    double m = with_sinks ? sinks[size_t(h)] : -INFINITY, l = 0;
                    for (int64_t p = first; p <= t; p++) {
                        double d = 0;
                        for (int64_t i = 0; i < D; i++) d += q[size_t((t * H + h) * D + i)] * k[size_t((p * Hkv + kvh) * D + i)];
                        s.push_back(d * scale), m = std::max(m, d * scale);
                    }
                    if (with_sinks) l += std::exp(sinks[size_t(h)] - m);
                    for (double x : s) l += std::exp(x - m);
                    for (int64_t i = 0; i < D; i++) {
                        double acc = 0;
                        for (int64_t p = first; p <= t; p++) acc += std::exp(s[size_t(p - first)] - m) * v[size_t((p * Hkv + kvh) * D + i)];
                        want[size_t((t * H + h) * D + i)] = acc / l;
                    }
                }
            Tensor out = attention(tensor(q, {T, H, D}, f32), tensor(k, {T, Hkv, D}, f32), tensor(v, {T, Hkv, D}, f32), 0, scale,
                                   int(w), with_sinks ? tensor(sinks, {H}, f32) : Tensor());
            require_close(values(out), want, 1e-4, 1e-5);
        }
}

TEST_CASE("YaRN RoPE follows ggml's rope_yarn") {
    const int64_t T = 3, H = 2, Dh = 16;
    const int rope_dim = 12, start = 700;
    const double theta = 150000;
    RopeScaling sc;
    sc.freq_scale = 1.0f / 32, sc.ext_factor = 1.0f, sc.attn_factor = 0.9f, sc.n_ctx_orig = 4096;
    std::vector<double> x = uniform(size_t(T * H * Dh), 5);
    // ggml_rope_yarn_corr_dims and rope_yarn, in double.
    auto corr = [&](double beta) { return rope_dim * std::log(sc.n_ctx_orig / (beta * 2 * M_PI)) / (2 * std::log(theta)); };
    double low = std::max(0.0, std::floor(corr(sc.beta_fast))), high = std::min(double(rope_dim - 1), std::ceil(corr(sc.beta_slow)));
    double mscale = sc.attn_factor * (1 + 0.1 * std::log(1 / double(sc.freq_scale)));
    std::vector<double> want = x;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < H; h++)
            for (int i = 0; i < rope_dim / 2; i++) {
                double extrap = (start + t) * std::pow(theta, -2.0 * i / rope_dim), interp = sc.freq_scale * extrap;
                double mix = 1 - std::min(1.0, std::max(0.0, (i - low) / std::max(0.001, high - low)));
                double a = interp * (1 - mix) + extrap * mix, c = std::cos(a) * mscale, s = std::sin(a) * mscale;
                size_t i0 = size_t((t * H + h) * Dh + i), i1 = i0 + rope_dim / 2;  // NEOX halves
                want[i0] = x[i0] * c - x[i1] * s, want[i1] = x[i0] * s + x[i1] * c;
            }
    Tensor got = rope(tensor(x, {T, H, Dh}, f32), start, rope_dim, theta, RopeLayout::NEOX, {}, sc);
    require_close(values(got), want, 2e-3, 2e-3);
}
