// The engine helpers MLA needs, against naive references: per-head linear over 3-D weights (f32, f16,
// q8_0), attention over a latent cache whose keys hold the values, and RoPE with linear / YaRN scaling
// (ggml's rope_yarn written out per element).
#include "engine/tensor.h"
#include "gguf/types.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

namespace {

using engine::Tensor;

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double m = 0.0;
    for (size_t i = 0; i < a.size(); i++) m = std::max(m, std::fabs(double(a[i]) - double(b[i])));
    return m;
}

// w (H, N, K) stored as `type`; returns the tensor and the dequantized values the naive product uses.
std::pair<Tensor, std::vector<float>> weights(gguf::Type type, int H, int N, int K, uint32_t seed) {
    std::vector<float> w = randn(size_t(H * N * K), seed, 0.2f);
    if (type == gguf::Type::F32) return {Tensor::from_vector(w, {H, N, K}), w};
    const gguf::TypeTraits& tr = gguf::type_traits(type);
    std::vector<uint8_t> bytes(*gguf::row_bytes(type, int64_t(H) * N * K));
    tr.quantize(w.data(), bytes.data(), int64_t(w.size()));
    tr.dequantize(bytes.data(), w.data(), int64_t(w.size()));
    return {Tensor::from_data(bytes.data(), bytes.size(), {H, N, K}, engine::DType::from_gguf(type)), w};
}

void check_linear_heads(gguf::Type type, double tol) {
    const int T = 5, H = 3, N = 48, K = 64;
    auto [w, wf] = weights(type, H, N, K, 7);
    std::vector<float> x = randn(size_t(T * H * K), 8);
    std::vector<float> want(size_t(T * H * N));
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int n = 0; n < N; n++) {
                double s = 0.0;
                for (int k = 0; k < K; k++) s += double(x[size_t((t * H + h) * K + k)]) * wf[size_t((h * N + n) * K + k)];
                want[size_t((t * H + h) * N + n)] = float(s);
            }
    Tensor y = engine::linear_heads(Tensor::from_vector(x, {T, H, K}), w);
    REQUIRE(engine::shape_str(y.shape()) == "(5,3,48)");
    CHECK(max_abs_diff(y.to_vector<float>(), want) < tol);
}

// Position p's rotated pair (x0, x1) at dim pair i, as ggml's rope_yarn computes it: theta from a running
// float product, the YaRN ramp over the correction dims, cos/sin scaled by the magnitude.
std::pair<float, float> ggml_rope_pair(float x0, float x1, int p, int i, int n_dims, float base, const engine::RopeScaling& s) {
    float theta_scale = std::pow(base, -2.0f / float(n_dims)), theta = float(p);
    for (int j = 0; j < i; j++) theta *= theta_scale;
    auto corr_dim = [&](float n_rot) { return float(n_dims) * std::log(float(s.n_ctx_orig) / (n_rot * 2.0f * float(M_PI))) / (2.0f * std::log(base)); };
    float low = std::max(0.0f, std::floor(corr_dim(float(s.beta_fast)))), high = std::min(float(n_dims - 1), std::ceil(corr_dim(float(s.beta_slow))));
    float interp = float(s.freq_scale) * theta, mscale = float(s.attn_factor), th = interp;
    if (s.ext_factor != 0.0) {
        float y = (float(i) - low) / std::max(0.001f, high - low);
        float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * float(s.ext_factor);
        th = interp * (1.0f - mix) + theta * mix;
        mscale *= 1.0f + 0.1f * std::log(1.0f / float(s.freq_scale));
    }
    float c = std::cos(th) * mscale, sn = std::sin(th) * mscale;
    return {x0 * c - x1 * sn, x0 * sn + x1 * c};
}

void check_rope(const engine::RopeScaling& s) {
    const int T = 6, H = 2, Dh = 24, n_dims = 16, start = 57;
    const float base = 10000.0f;
    std::vector<float> x = randn(size_t(T * H * Dh), 3);
    engine::Var pos("start_pos", 0, 100);
    pos.bind(start);
    Tensor y = engine::rope(Tensor::from_vector(x, {T, H, Dh}), pos, n_dims, base, engine::RopeLayout::NORM, {}, s);
    std::vector<float> want = x;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n_dims / 2; i++) {
                size_t o = size_t((t * H + h) * Dh + 2 * i);
                auto [r0, r1] = ggml_rope_pair(x[o], x[o + 1], start + t, i, n_dims, base, s);
                want[o] = r0, want[o + 1] = r1;
            }
    CHECK(max_abs_diff(y.to_vector<float>(), want) < 2e-4);  // angles up to ~60 rad in f32
}

}  // namespace

TEST_CASE("mla: linear_heads with f32 weights equals the per-head product") { check_linear_heads(gguf::Type::F32, 1e-4); }
TEST_CASE("mla: linear_heads with f16 weights equals the per-head product") { check_linear_heads(gguf::Type::F16, 5e-3); }
TEST_CASE("mla: linear_heads with q8_0 weights equals the per-head product") { check_linear_heads(gguf::Type::Q8_0, 5e-2); }

TEST_CASE("mla: linear_heads rejects mismatched shapes") {
    auto [w, wf] = weights(gguf::Type::F32, 3, 8, 16, 1);
    CHECK_THROWS_WITH(engine::linear_heads(Tensor::zeros({2, 4, 16}), w), Catch::Contains("[engine] linear_heads"));
    CHECK_THROWS_WITH(engine::linear_heads(Tensor::zeros({2, 3, 15}), w), Catch::Contains("does not match"));
}

TEST_CASE("mla: attention over a latent cache reads the values from the keys' first features") {
    const int C = 16, T = 3, H = 4, Dk = 24, Dv = 16, start = 5;
    const float scale = 0.3f;
    for (engine::DType dt : {engine::f32, engine::f16}) {
        std::vector<float> cache = randn(size_t(C * Dk), 11), q = randn(size_t(T * H * Dk), 12);
        if (dt == engine::f16)  // the reference sees the rounded cache
            for (auto& v : cache) v = gguf::f16_to_f32(gguf::f32_to_f16(v));
        Tensor cache_t = Tensor::from_vector(cache, {C, 1, Dk}).cast(dt).contiguous();
        cache_t.realize();
        engine::Var pos("start_pos", 0, C - T);
        pos.bind(start);
        Tensor out = engine::attention_latent(Tensor::from_vector(q, {T, H, Dk}), cache_t, Dv, pos, scale);
        std::vector<float> want(size_t(T * H * Dv));
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                int n = start + t + 1;  // causal: keys 0 .. start + t
                std::vector<double> w(static_cast<size_t>(n));
                double mx = -1e30, sum = 0.0;
                for (int p = 0; p < n; p++) {
                    double s = 0.0;
                    for (int d = 0; d < Dk; d++) s += double(q[size_t((t * H + h) * Dk + d)]) * cache[size_t(p * Dk + d)];
                    w[size_t(p)] = s * scale, mx = std::max(mx, w[size_t(p)]);
                }
                for (auto& v : w) sum += (v = std::exp(v - mx));
                for (int d = 0; d < Dv; d++) {
                    double o = 0.0;
                    for (int p = 0; p < n; p++) o += w[size_t(p)] * cache[size_t(p * Dk + d)];
                    want[size_t((t * H + h) * Dv + d)] = float(o / sum);
                }
            }
        INFO("cache " << dt.name());
        CHECK(max_abs_diff(out.to_vector<float>(), want) < 1e-4);
    }
}

TEST_CASE("mla: rope without scaling is unchanged by an empty RopeScaling") { check_rope({}); }

TEST_CASE("mla: rope with linear scaling follows ggml") {
    engine::RopeScaling s;
    s.freq_scale = 0.25;
    check_rope(s);
}

TEST_CASE("mla: rope with YaRN follows ggml's rope_yarn") {
    engine::RopeScaling s;
    s.freq_scale = 1.0 / 40.0;
    s.ext_factor = 1.0;
    s.attn_factor = 0.8;
    s.n_ctx_orig = 64;
    check_rope(s);
}
