// Attention over a KV cache against a naive two-pass softmax in double: decode and causal prefill,
// grouped-query heads, F16 cache, different key and value head dims, sliding window, sinks, strided
// layouts and split (token, head) ranges, on every instruction-set variant.
#include "devices/cpu/kernels/kernels.h"
#include "kernels_test.h"

#include <algorithm>

using namespace kernels_test;
namespace ck = cpu_kernels;

namespace {

struct Setup {
    int64_t n_tokens, start_pos, n_head, n_head_kv, dim_k, dim_v, window = 0;
    Type kv_type = Type::F32;
    bool sinks = false;
    bool split = false;  // run the pairs in two pieces cutting through a group of heads
};

void check_attention(const Setup& s, uint64_t seed) {
    Rng rng(seed);
    const int64_t n_kv = s.start_pos + s.n_tokens;
    // q: (tokens, heads, dim_k) packed; k: (n_kv, kv heads, dim_k); v head-major: (kv heads, n_kv, dim_v);
    // out: (tokens, heads, dim_v) with padding after each token
    const std::vector<float> q = random_floats(rng, s.n_tokens * s.n_head * s.dim_k);
    const std::vector<float> kf = random_floats(rng, n_kv * s.n_head_kv * s.dim_k);
    const std::vector<float> vf = random_floats(rng, n_kv * s.n_head_kv * s.dim_v);
    std::vector<float> sinks = random_floats(rng, s.n_head, 2.0f);
    const size_t elem = s.kv_type == Type::F32 ? 4 : 2;
    std::vector<uint8_t> k(kf.size() * elem), v(vf.size() * elem);
    gguf::type_traits(s.kv_type).quantize(kf.data(), k.data(), static_cast<int64_t>(kf.size()));
    gguf::type_traits(s.kv_type).quantize(vf.data(), v.data(), static_cast<int64_t>(vf.size()));
    std::vector<float> kd(kf.size()), vd(vf.size());  // what the kernel sees
    gguf::type_traits(s.kv_type).dequantize(k.data(), kd.data(), static_cast<int64_t>(kd.size()));
    gguf::type_traits(s.kv_type).dequantize(v.data(), vd.data(), static_cast<int64_t>(vd.size()));

    ck::Attention a;
    a.q = q.data(), a.q_token_stride = s.n_head * s.dim_k, a.q_head_stride = s.dim_k;
    a.kv_type = s.kv_type;
    a.k = k.data(), a.k_pos_stride = s.n_head_kv * s.dim_k, a.k_head_stride = s.dim_k;
    a.v = v.data(), a.v_pos_stride = s.dim_v, a.v_head_stride = n_kv * s.dim_v;
    const int64_t out_stride = s.n_head * s.dim_v + 5;
    std::vector<float> out(s.n_tokens * out_stride, -777.0f);
    a.out = out.data(), a.out_token_stride = out_stride, a.out_head_stride = s.dim_v;
    a.n_tokens = s.n_tokens, a.start_pos = s.start_pos, a.n_head = s.n_head, a.n_head_kv = s.n_head_kv;
    a.head_dim_k = s.dim_k, a.head_dim_v = s.dim_v, a.scale = 1.0f / std::sqrt(static_cast<float>(s.dim_k));
    a.window = s.window, a.sinks = s.sinks ? sinks.data() : nullptr;

    const int64_t n_pairs = s.n_tokens * s.n_head;
    const int64_t cut = s.split ? s.n_head + 1 : n_pairs;  // token 1, head 1: inside its first group
    ck::attention(a, 0, std::min(cut, n_pairs));
    ck::attention(a, std::min(cut, n_pairs), n_pairs);

    const int64_t group = s.n_head / s.n_head_kv;
    for (int64_t t = 0; t < s.n_tokens; t++)
        for (int64_t h = 0; h < s.n_head; h++) {
            const int64_t pos = s.start_pos + t, hk = h / group;
            const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
            std::vector<double> logit;
            for (int64_t j = first; j <= pos; j++) {
                double dot = 0;
                for (int64_t c = 0; c < s.dim_k; c++)
                    dot += static_cast<double>(q[(t * s.n_head + h) * s.dim_k + c]) * kd[(j * s.n_head_kv + hk) * s.dim_k + c];
                logit.push_back(dot * a.scale);
            }
            double max = *std::max_element(logit.begin(), logit.end());
            if (s.sinks) max = std::max(max, static_cast<double>(sinks[h]));
            double sum = s.sinks ? std::exp(sinks[h] - max) : 0.0;
            for (double& l : logit) sum += (l = std::exp(l - max));
            for (int64_t c = 0; c < s.dim_v; c++) {
                double ref = 0, mag = 0;
                for (int64_t j = first; j <= pos; j++) {
                    const double vv = vd[(hk * n_kv + j) * s.dim_v + c];
                    ref += logit[j - first] * vv, mag += logit[j - first] * std::fabs(vv);
                }
                ref /= sum, mag /= sum;
                const float got = out[t * out_stride + h * s.dim_v + c];
                INFO("token " << t << " head " << h << " dim " << c << ": " << got << " vs " << ref);
                REQUIRE(std::fabs(got - ref) <= 2e-5 * mag + 1e-6);
            }
        }
    for (int64_t t = 0; t < s.n_tokens; t++)
        for (int64_t c = s.n_head * s.dim_v; c < out_stride; c++) REQUIRE(out[t * out_stride + c] == -777.0f);
}

void on_every_variant(const Setup& s, uint64_t seed) {
    for (Isa isa : supported_isas()) {
        ActiveIsa active(isa);
        INFO(ck::isa_name(isa));
        check_attention(s, seed);
    }
}

}  // namespace

TEST_CASE("attention decode: one query token over a long F32 cache, grouped-query") {
    on_every_variant({1, 37, 8, 2, 64, 64}, 1);
}

TEST_CASE("attention decode over an F16 cache with 128-wide heads") {
    on_every_variant({1, 300, 32, 8, 128, 128, 0, Type::F16}, 2);
}

TEST_CASE("attention causal prefill from position 0 and from the middle of the cache") {
    on_every_variant({5, 0, 8, 2, 64, 64}, 3);
    on_every_variant({17, 23, 4, 1, 32, 32, 0, Type::F16}, 4);
}

TEST_CASE("attention prefill in tiles of query tokens: 64- and 128-wide heads, partial tiles, split ranges") {
    on_every_variant({19, 0, 12, 4, 64, 64, 0, Type::F16}, 11);     // two whole tiles and a partial one
    on_every_variant({21, 45, 16, 2, 128, 128, 0, Type::F32}, 12);  // group of 8, keys cached before
    on_every_variant({11, 5, 8, 2, 64, 64, 0, Type::F16, false, true}, 13);  // a range starting mid-token
    on_every_variant({40, 3, 4, 2, 32, 32, 9, Type::F16, true}, 14);  // sliding window and sinks
}

TEST_CASE("attention with key and value head dims that differ and are not multiples of 16") {
    on_every_variant({3, 9, 6, 2, 24, 20, 0, Type::F16}, 5);
}

TEST_CASE("attention with a sliding window") {
    on_every_variant({7, 30, 4, 4, 32, 32, 4}, 6);
    on_every_variant({2, 40, 4, 2, 64, 64, 20, Type::F16}, 7);
}

TEST_CASE("attention with per-head sinks") {
    on_every_variant({3, 10, 6, 2, 32, 32, 0, Type::F32, true}, 8);
    on_every_variant({1, 0, 4, 2, 16, 16, 0, Type::F16, true}, 9);  // one key: the sink takes its share
}

TEST_CASE("attention over a (token, head) range that cuts through a group of heads") {
    on_every_variant({3, 12, 8, 2, 32, 32, 0, Type::F32, false, true}, 10);
}

TEST_CASE("attention rejects bad arguments") {
    ck::Attention a;
    a.n_tokens = 1, a.n_head = 6, a.n_head_kv = 4, a.head_dim_k = a.head_dim_v = 16;
    float buf[256] = {};
    a.q = a.out = buf, a.k = a.v = buf;
    CHECK_THROWS_WITH(ck::attention(a, 0, 6), Catch::StartsWith("[cpu_kernels.attention] n_head 6 is not a positive multiple of n_head_kv 4"));
    a.n_head_kv = 2, a.kv_type = Type::Q8_0;
    CHECK_THROWS_WITH(ck::attention(a, 0, 6), Catch::Contains("KV cache type q8_0: expected f32 or f16"));
    a.kv_type = Type::F32;
    CHECK_THROWS_WITH(ck::attention(a, 0, 7), Catch::Contains("pair range [0, 7) outside 0..6"));
}
