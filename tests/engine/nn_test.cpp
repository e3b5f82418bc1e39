// Model helpers against naive references: linear/embedding/dequantize for every weight dtype the gguf
// table can dequantize, attention (GQA, causal prefill, f16 cache), RoPE layouts, topk, activations.
#include "engine_test_util.h"

#include "devices/device.h"
#include "gguf/gguf.h"

#include <cstring>

using namespace engine;
using namespace etest;

namespace {

// Weights of `type` quantized from random floats with the gguf reference quantizer, and the floats
// they dequantize to (the reference for the kernels).
struct Weights {
    Tensor t;
    std::vector<double> deq;
};
Weights weights(gguf::Type type, int64_t rows, int64_t cols, uint32_t seed) {
    std::vector<double> v = uniform(size_t(rows * cols), seed, -1, 1);
    std::vector<float> f(v.begin(), v.end());
    const gguf::TypeTraits& tr = gguf::type_traits(type);
    std::vector<uint8_t> raw(size_t(rows * cols / tr.block_size) * tr.bytes_per_block);
    tr.quantize(f.data(), raw.data(), rows * cols);
    std::vector<float> back(f.size());
    tr.dequantize(raw.data(), back.data(), rows * cols);
    return {Tensor::from_data(raw.data(), raw.size(), {rows, cols}, DType::from_gguf(type)), std::vector<double>(back.begin(), back.end())};
}

const gguf::Type TYPES[] = {gguf::Type::F32, gguf::Type::F16, gguf::Type::BF16, gguf::Type::Q8_0};

// Activations as the kernel sees them: the CPU packs them in the weight type's partner format (F16,
// BF16, Q8_0, ... as ggml does).
std::vector<double> as_activations(std::vector<double> x, gguf::Type weight, int64_t K) {
    gguf::Type act = devices::get("CPU").activation_type(weight);
    const gguf::TypeTraits& tr = gguf::type_traits(act);
    for (size_t r = 0; r < x.size() / size_t(K); r++) {
        std::vector<float> row(x.begin() + r * K, x.begin() + (r + 1) * K);
        std::vector<float> back(row.size());
        std::vector<uint8_t> raw(size_t(K / tr.block_size) * tr.bytes_per_block);
        tr.quantize(row.data(), raw.data(), K);
        tr.dequantize(raw.data(), back.data(), K);
        std::copy(back.begin(), back.end(), x.begin() + r * K);
    }
    return x;
}

// What linear gives on the CPU: x as the kernel sees it (as_activations) times the dequantized weights.
std::vector<double> linear_ref(const std::vector<double>& x, const Weights& w, gguf::Type type, int64_t T, int64_t N, int64_t K) {
    std::vector<double> xa = as_activations(x, type, K), want;
    for (int64_t t = 0; t < T; t++)
        for (int64_t r = 0; r < N; r++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += xa[t * K + k] * w.deq[r * K + k];
            want.push_back(s);
        }
    return want;
}

}  // namespace

TEST_CASE("linear multiplies by every weight dtype") {
    for (gguf::Type type : TYPES) {
        for (int64_t T : {1, 3, 17}) {
            const int64_t N = 37, K = 64;
            Weights w = weights(type, N, K, 1);
            std::vector<double> x = uniform(size_t(T * K), 2);
            for (auto& v : x) v = to_dtype(v, f32);
            const std::vector<double> want = linear_ref(x, w, type, T, N, K);
            Tensor y = linear(tensor(x, {T, K}, f32), w.t);
            REQUIRE(shape_str(y.shape()) == "(" + std::to_string(T) + "," + std::to_string(N) + ")");
            require_close(values(y), want, 1e-5, 1e-5, std::string(gguf::type_name(type)));
        }
    }
    // batch dims are flattened and restored; a wrong inner size is an error
    Weights w = weights(gguf::Type::F32, 5, 8, 3);
    REQUIRE(shape_str(linear(Tensor::ones({2, 3, 8}), w.t).shape()) == "(2,3,5)");
    REQUIRE_THROWS_WITH(linear(Tensor::ones({2, 7}), w.t), Catch::Contains("[engine] linear: input (2,7) does not match weight (5,8)"));
}

TEST_CASE("linear of an RMS-normalized input normalizes inside the quantization of its activations") {
    // Q8_0 weights take Q8_0 activations, Q4_1 ones Q8_1 (with their sums); the K-quants' Q8_K runs in
    // the golden models (quant-q4_k, ...).
    for (gguf::Type type : {gguf::Type::Q8_0, gguf::Type::Q4_1}) {
        for (int64_t T : {1, 5}) {
            const int64_t N = 32, K = 256;
            const double eps = 1e-5;
            const std::string label = std::string(gguf::type_name(type)) + " T=" + std::to_string(T);
            Weights w = weights(type, N, K, 11);
            std::vector<double> x = uniform(size_t(T * K), 12, -2, 2), g = uniform(size_t(K), 13, 0.5, 1.5);
            for (auto& v : x) v = to_dtype(v, f32);
            for (auto& v : g) v = to_dtype(v, f32);
            std::vector<double> normed;
            for (int64_t t = 0; t < T; t++) {
                double ss = 0;
                for (int64_t k = 0; k < K; k++) ss += x[t * K + k] * x[t * K + k];
                for (int64_t k = 0; k < K; k++) normed.push_back(x[t * K + k] / std::sqrt(ss / double(K) + eps) * g[k]);
            }
            const std::vector<double> want = linear_ref(normed, w, type, T, N, K);
            Tensor xt = tensor(x, {T, K}, f32), gt = tensor(g, {K}, f32);
            Tensor fused = linear(rms_norm(xt, gt, eps), w.t);
            fused.realize();
            // Where the device fuses them, no kernel of the norm's own runs: the quantization, the product.
            if (devices::get("CPU").linear_plan(type, K, T).fuse_norm) REQUIRE(last_schedule().size() == 2);
            // An activation on a rounding edge may land one step apart from the f64 reference's (a step is
            // max|x|/127 of one element, times its weight), nothing more.
            require_close(values(fused), want, 0.0, 0.05, label + " fused");
            Tensor alone = rms_norm(xt, gt, eps);
            alone.realize();  // realized first: linear gets a buffer, nothing to fuse
            require_close(values(linear(alone, w.t)), values(fused), 0.0, 0.05, label + " vs the norm's own kernels");
        }
    }
}

TEST_CASE("linear of a SwiGLU over a stacked gate | up makes it inside the quantization of its activations") {
    for (int64_t T : {1, 4}) {
        const int64_t N = 16, F = 96;
        const std::string label = "T=" + std::to_string(T);
        Weights w = weights(gguf::Type::Q8_0, N, F, 21);
        std::vector<double> p = uniform(size_t(T * 2 * F), 22, -6, 6), glu;  // both tails of the sigmoid
        for (auto& v : p) v = to_dtype(v, f32);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < F; i++) {
                const double g = p[t * 2 * F + i], u = p[t * 2 * F + F + i];
                glu.push_back(g / (1 + std::exp(-g)) * u);
            }
        const std::vector<double> want = linear_ref(glu, w, gguf::Type::Q8_0, T, N, F);
        Tensor gate_up = tensor(p, {T, 2 * F}, f32);  // a stacked gate | up linear's output
        Tensor fused = linear(silu(gate_up.slice(-1, 0, F)) * gate_up.slice(-1, F, F), w.t);
        fused.realize();
        if (devices::get("CPU").linear_plan(gguf::Type::Q8_0, F, T).fuse_norm) REQUIRE(last_schedule().size() == 2);
        // One activation step (max|x|/127 ≈ 0.28 here) of one element on a rounding edge at most.
        require_close(values(fused), want, 0.0, 0.3, label);
        Tensor alone = silu(gate_up.slice(-1, 0, F)) * gate_up.slice(-1, F, F);
        alone.realize();
        require_close(values(linear(alone, w.t)), values(fused), 0.0, 0.3, label + " vs its own kernel");
    }
}

TEST_CASE("linear over a Q8_0 weight packed by pack_for_linear gives what the rows give") {
    const int64_t N = 48, K = 128;
    Weights w = weights(gguf::Type::Q8_0, N, K, 5);
    Tensor packed = pack_for_linear(w.t);
    if (!devices::get("CPU").can_pack(gguf::Type::Q8_0, N, K)) {  // no AVX-512: the weight stays as it is
        REQUIRE(packed.node().get() == w.t.node().get());
        return;
    }
    REQUIRE(packed.node().get() != w.t.node().get());
    for (int64_t T : {1, 2, 4, 7, 19}) {
        Tensor x = tensor(uniform(size_t(T * K), 6 + uint32_t(T)), {T, K}, f32);
        require_close(values(linear(x, packed)), values(linear(x, w.t)), 1e-5, 1e-5, "packed T=" + std::to_string(T));
    }
    REQUIRE(pack_for_linear(packed).node().get() == packed.node().get());  // packing twice is a no-op
    // lookups read the packed copy (a tied output matrix serves them): the rows' values exactly
    REQUIRE(embeds_from(packed));
    Tensor ids = tensor({0, 47, 17, 16, 15, 3}, {6}, i32);
    CHECK(values(embedding(packed, ids)) == values(embedding(w.t, ids)));
    REQUIRE_THROWS_WITH(dequantize(packed), Catch::Contains("[engine] dequantize: the weight is packed for linear()"));
    // stacked: one packed weight whose outputs are the weights' side by side
    Weights w2 = weights(gguf::Type::Q8_0, 32, K, 9);
    Tensor stacked = pack_for_linear(std::vector<Tensor>{w.t, w2.t});
    REQUIRE(stacked.defined());
    REQUIRE(shape_str(stacked.shape()) == "(80,128)");
    Tensor x = tensor(uniform(size_t(3 * K), 10), {3, K}, f32);
    require_close(values(linear(x, stacked)), values(concat({linear(x, w.t), linear(x, w2.t)}, 1)), 1e-5, 1e-5, "stacked");
    Weights other_cols = weights(gguf::Type::Q8_0, 16, 64, 11);
    REQUIRE_FALSE(pack_for_linear(std::vector<Tensor>{w.t, other_cols.t}).defined());
    // weights the layout does not fit stay as they are
    Weights odd = weights(gguf::Type::Q8_0, 40, K, 7);  // 40 rows: not whole panels of 16
    REQUIRE(pack_for_linear(odd.t).node().get() == odd.t.node().get());
    Weights f = weights(gguf::Type::F16, N, K, 8);
    REQUIRE(pack_for_linear(f.t).node().get() == f.t.node().get());
}

TEST_CASE("linear_weight: one declaration, each weight's outputs whether the device stacks the group or not") {
    const int64_t K = 128;
    Weights q = weights(gguf::Type::Q8_0, 48, K, 41), k = weights(gguf::Type::Q8_0, 16, K, 42);
    Weights v = weights(gguf::Type::Q8_0, 32, K, 43);
    Weights mixed = weights(gguf::Type::F16, 16, K, 44);  // another dtype: never one stack with the others
    Tensor x = tensor(uniform(size_t(3 * K), 45), {3, K}, f32);
    for (bool same_type : {true, false}) {
        const Tensor& last = same_type ? v.t : mixed.t;
        LinearWeight w = linear_weight({q.t, k.t, last});
        REQUIRE(w.rows == std::vector<int64_t>{48, 16, same_type ? 32 : 16});
        const bool stacked = same_type && devices::get("CPU").can_pack(gguf::Type::Q8_0, 96, K);
        REQUIRE(w.parts.size() == (stacked ? 1u : 3u));
        std::vector<Tensor> ys = linear_split(x, w);
        REQUIRE(ys.size() == 3);
        require_close(values(ys[0]), values(linear(x, q.t)), 1e-5, 1e-5, "q");
        require_close(values(ys[1]), values(linear(x, k.t)), 1e-5, 1e-5, "k");
        require_close(values(ys[2]), values(linear(x, last)), 1e-5, 1e-5, "v");
        REQUIRE(shape_str(linear(x, w).shape()) == (same_type ? "(3,96)" : "(3,80)"));  // side by side
    }
    REQUIRE_THROWS_WITH(linear_weight({q.t, weights(gguf::Type::Q8_0, 16, 64, 46).t}),
                        Catch::Contains("[engine] linear_weight: weights of one input differ in columns"));
}

TEST_CASE("linear over weights of every panel type packed by pack_for_linear gives what the rows give") {
    const int64_t N = 48, K = 512;
    for (gguf::Type type : {gguf::Type::Q4_0, gguf::Type::Q4_1, gguf::Type::Q5_0, gguf::Type::Q5_1, gguf::Type::IQ4_NL,
                            gguf::Type::IQ4_XS, gguf::Type::Q4_K, gguf::Type::Q5_K, gguf::Type::Q6_K}) {
        // random blocks (gguf has no K-quant or IQ4 quantizer), with fp16 scales of a sane size
        const gguf::TypeTraits& tr = gguf::type_traits(type);
        std::vector<double> bytes = uniform(size_t(N * K / tr.block_size * tr.bytes_per_block), 21, 0, 255.99);
        std::vector<uint8_t> raw(bytes.begin(), bytes.end());
        const uint16_t scale = gguf::f32_to_f16(0.01f);
        const bool has_min = type == gguf::Type::Q4_K || type == gguf::Type::Q5_K || type == gguf::Type::Q4_1 || type == gguf::Type::Q5_1;
        const size_t d_at = type == gguf::Type::Q6_K ? 208 : 0, dmin_at = has_min ? 2 : d_at;
        for (size_t b = 0; b < raw.size(); b += tr.bytes_per_block)
            std::memcpy(&raw[b + d_at], &scale, 2), std::memcpy(&raw[b + dmin_at], &scale, 2);
        Weights w{Tensor::from_data(raw.data(), raw.size(), {N, K}, DType::from_gguf(type)), {}};
        Tensor packed = pack_for_linear(w.t);
        if (!devices::get("CPU").can_pack(type, N, K)) {  // no AVX-512 (or TINYLLM_CPU_PACK=0): left as it is
            REQUIRE(packed.node().get() == w.t.node().get());
            continue;
        }
        REQUIRE(packed.node().get() != w.t.node().get());
        for (int64_t T : {1, 3, 9}) {  // decode tiles and the prefill GEMM
            Tensor x = tensor(uniform(size_t(T * K), 30 + uint32_t(T)), {T, K}, f32);
            // the sums run in another order (random scales: much cancellation); a wrong layout is off by far more
            require_close(values(linear(x, packed)), values(linear(x, w.t)), 1e-4, 1e-4,
                          std::string(gguf::type_name(type)) + " packed T=" + std::to_string(T));
        }
    }
}

TEST_CASE("embedding and dequantize read rows of any table dtype") {
    for (gguf::Type type : TYPES) {
        const int64_t V = 11, D = 64;
        Weights w = weights(type, V, D, 4);
        Tensor ids = tensor({3, 0, 10, 3, 7}, {5}, i32);
        std::vector<double> want;
        for (int id : {3, 0, 10, 3, 7})
            for (int64_t d = 0; d < D; d++) want.push_back(w.deq[id * D + d]);
        Tensor e = embedding(w.t, ids);
        REQUIRE(shape_str(e.shape()) == "(5,64)");
        REQUIRE(e.dtype() == f32);
        require_close(values(e), want, 0, 0, std::string(gguf::type_name(type)));
        require_close(values(dequantize(w.t)), w.deq, 0);
    }
}

TEST_CASE("causal GQA attention over an f32 or f16 cache") {
    const int64_t C = 16, Hkv = 2, H = 6, Dk = 8, Dv = 5, T = 4, start = 3;
    for (DType cache_dt : {f32, f16}) {
        std::vector<double> q = uniform(size_t(T * H * Dk), 5), k = uniform(size_t(C * Hkv * Dk), 6), v = uniform(size_t(C * Hkv * Dv), 7);
        for (auto& x : q) x = to_dtype(x, f32);
        for (auto& x : k) x = to_dtype(x, cache_dt);
        for (auto& x : v) x = to_dtype(x, cache_dt);
        double scale = 1.0 / std::sqrt(double(Dk));
        std::vector<double> want;
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                int64_t kvh = h / (H / Hkv), n = start + t + 1;
                std::vector<double> s(static_cast<size_t>(n), 0.0);
                double m = -1e30, sum = 0;
                for (int64_t p = 0; p < n; p++) {
                    for (int64_t i = 0; i < Dk; i++) s[p] += q[(t * H + h) * Dk + i] * k[(p * Hkv + kvh) * Dk + i];
                    s[p] *= scale;
                    m = std::max(m, s[p]);
                }
                for (auto& x : s) sum += (x = std::exp(x - m));
                for (int64_t i = 0; i < Dv; i++) {
                    double o = 0;
                    for (int64_t p = 0; p < n; p++) o += s[p] / sum * v[(p * Hkv + kvh) * Dv + i];
                    want.push_back(o);
                }
            }
        Tensor out = attention(tensor(q, {T, H, Dk}, f32), tensor(k, {C, Hkv, Dk}, cache_dt), tensor(v, {C, Hkv, Dv}, cache_dt), start, scale);
        REQUIRE(shape_str(out.shape()) == "(4,6,5)");
        require_close(values(out), want, 2e-5, 2e-6, cache_dt.name());
    }
}

TEST_CASE("RoPE rotates NORM pairs and NEOX halves, leaving features past rope_dim") {
    const int64_t T = 3, H = 2, Dh = 10, start = 7;
    const int rope_dim = 8;
    std::vector<double> x = uniform(size_t(T * H * Dh), 8);
    for (auto& v : x) v = to_dtype(v, f32);
    for (RopeLayout layout : {RopeLayout::NORM, RopeLayout::NEOX}) {
        std::vector<double> want = x;
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++)
                for (int i = 0; i < rope_dim / 2; i++) {
                    double a = double(start + t) * std::pow(10000.0, -2.0 * i / rope_dim);
                    int64_t base = (t * H + h) * Dh;
                    int64_t i0 = layout == RopeLayout::NORM ? 2 * i : i, i1 = layout == RopeLayout::NORM ? 2 * i + 1 : i + rope_dim / 2;
                    want[base + i0] = x[base + i0] * std::cos(a) - x[base + i1] * std::sin(a);
                    want[base + i1] = x[base + i0] * std::sin(a) + x[base + i1] * std::cos(a);
                }
        Tensor r = rope(tensor(x, {T, H, Dh}, f32), start, rope_dim, 10000.0, layout);
        require_close(values(r), want, 1e-5, 1e-6, layout == RopeLayout::NORM ? "norm" : "neox");
    }
}

TEST_CASE("topk, cumsum and activations") {
    Tensor x = tensor({0.5, 3, -1, 3, 7, 2, /**/ 1, 1, 1, NAN, 0, 5}, {2, 6}, f32);
    auto [vals, idx] = topk(x, 3);
    require_close(values(idx), {4, 1, 3, 5, 0, 1}, 0);
    require_close(values(vals), {7, 3, 3, 5, 1, 1}, 0);
    Tensor c = tensor({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4}, f32);
    require_close(values(cumsum(c, 1)), {1, 3, 6, 10, 5, 11, 18, 26}, 0);
    require_close(values(cumsum(c, 0)), {1, 2, 3, 4, 6, 8, 10, 12}, 0);
    std::vector<double> v = {-30, -2, -0.5, 0, 0.5, 2, 19, 25, 80};
    Tensor t = tensor(v, {9}, f32);
    std::vector<double> sg, sl, sp;
    for (double a : v) {
        sg.push_back(1 / (1 + std::exp(-a)));
        sl.push_back(a / (1 + std::exp(-a)));
        sp.push_back(a > 20 ? a : std::log1p(std::exp(a)));
    }
    require_close(values(sigmoid(t)), sg, 2e-6, 1e-12);
    require_close(values(silu(t)), sl, 2e-6, 1e-12);
    require_close(values(softplus(t)), sp, 2e-6, 1e-7);
}

TEST_CASE("GGUF tensors are used in place from the mapped file") {
    auto file = std::shared_ptr<gguf::File>(gguf::File::open(TINYLLM_SOURCE_DIR "/models/stories260K.gguf"));
    const gguf::TensorInfo& info = file->tensor("token_embd.weight");
    Tensor emb = Tensor::from_gguf(info, file);
    REQUIRE(emb.ndim() == 2);
    REQUIRE(emb.dim(0).value() == info.dims[1]);  // (vocab, dim): ggml order reversed
    REQUIRE(emb.dim(1).value() == info.dims[0]);
    Tensor rows = embedding(emb, tensor({1, 5}, {2}, i32));
    std::vector<float> all(size_t(info.n_elements()));
    gguf::type_traits(info.type).dequantize(info.data, all.data(), info.n_elements());
    std::vector<double> got = values(rows);
    REQUIRE(got[0] == all[size_t(info.dims[0])]);           // row 1, element 0
    REQUIRE(got[size_t(info.dims[0]) + 3] == all[size_t(5 * info.dims[0] + 3)]);
}
