// Attention over a KV cache against a naive two-pass softmax in double: decode and causal prefill,
// grouped-query heads, F16, Q8_0 and Q4_0 caches (and how far the quantized ones are from f32), different
// key and value head dims, sliding window, sinks, strided layouts and split (token, head) ranges, on
// every instruction-set variant.
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
    int64_t cut = -1;    // ≥ 0: run pairs [0, cut) and [cut, all) as two calls instead
};

// A run of the kernel on random q and caches of s.kv_type made from random f32 keys and values.
struct Run {
    std::vector<float> q, sinks;
    std::vector<float> kf, vf;  // the keys and values before they were stored
    std::vector<float> kd, vd;  // what the kernel sees: the caches dequantized
    std::vector<float> out;     // (tokens, out_stride)
    int64_t out_stride = 0;
    float scale = 1.0f;
};

Run run_attention(const Setup& s, uint64_t seed) {
    Rng rng(seed);
    Run r;
    const int64_t n_kv = s.start_pos + s.n_tokens;
    // q: (tokens, heads, dim_k) packed; k: (n_kv, kv heads, dim_k); v head-major: (kv heads, n_kv, dim_v);
    // out: (tokens, heads, dim_v) with padding after each token
    r.q = random_floats(rng, s.n_tokens * s.n_head * s.dim_k);
    r.kf = random_floats(rng, n_kv * s.n_head_kv * s.dim_k);
    r.vf = random_floats(rng, n_kv * s.n_head_kv * s.dim_v);
    r.sinks = random_floats(rng, s.n_head, 2.0f);
    const gguf::TypeTraits& type = gguf::type_traits(s.kv_type);
    std::vector<uint8_t> k(*gguf::row_bytes(s.kv_type, int64_t(r.kf.size()))), v(*gguf::row_bytes(s.kv_type, int64_t(r.vf.size())));
    type.quantize(r.kf.data(), k.data(), static_cast<int64_t>(r.kf.size()));
    type.quantize(r.vf.data(), v.data(), static_cast<int64_t>(r.vf.size()));
    r.kd.resize(r.kf.size()), r.vd.resize(r.vf.size());
    type.dequantize(k.data(), r.kd.data(), static_cast<int64_t>(r.kd.size()));
    type.dequantize(v.data(), r.vd.data(), static_cast<int64_t>(r.vd.size()));

    ck::Attention a;
    a.q = r.q.data(), a.q_token_stride = s.n_head * s.dim_k, a.q_head_stride = s.dim_k;
    a.kv_type = s.kv_type;
    a.k = k.data(), a.k_pos_stride = s.n_head_kv * s.dim_k, a.k_head_stride = s.dim_k;
    a.v = v.data(), a.v_pos_stride = s.dim_v, a.v_head_stride = n_kv * s.dim_v;
    r.out_stride = s.n_head * s.dim_v + 5;
    r.out.assign(s.n_tokens * r.out_stride, -777.0f);
    a.out = r.out.data(), a.out_token_stride = r.out_stride, a.out_head_stride = s.dim_v;
    a.n_tokens = s.n_tokens, a.start_pos = s.start_pos, a.n_head = s.n_head, a.n_head_kv = s.n_head_kv;
    a.head_dim_k = s.dim_k, a.head_dim_v = s.dim_v, a.scale = r.scale = 1.0f / std::sqrt(static_cast<float>(s.dim_k));
    a.window = s.window, a.sinks = s.sinks ? r.sinks.data() : nullptr;

    const int64_t n_pairs = s.n_tokens * s.n_head;
    const int64_t cut = s.cut >= 0 ? s.cut : s.split ? s.n_head + 1 : n_pairs;  // split: token 1, head 1, inside its first group
    ck::attention(a, 0, std::min(cut, n_pairs));
    ck::attention(a, std::min(cut, n_pairs), n_pairs);
    for (int64_t t = 0; t < s.n_tokens; t++)
        for (int64_t c = s.n_head * s.dim_v; c < r.out_stride; c++) REQUIRE(r.out[t * r.out_stride + c] == -777.0f);
    return r;
}

// Query (t, h)'s output by a naive two-pass softmax in double over keys k and values v (laid out as the
// run's caches), and Σ p·|v| per value (the scale of the allowed rounding error).
void reference(const Setup& s, const Run& r, const std::vector<float>& k, const std::vector<float>& v, int64_t t, int64_t h,
               std::vector<double>& out, std::vector<double>& mag) {
    const int64_t n_kv = s.start_pos + s.n_tokens, group = s.n_head / s.n_head_kv;
    const int64_t pos = s.start_pos + t, hk = h / group;
    const int64_t first = s.window > 0 ? std::max<int64_t>(0, pos - s.window + 1) : 0;
    std::vector<double> logit;
    for (int64_t j = first; j <= pos; j++) {
        double dot = 0;
        for (int64_t c = 0; c < s.dim_k; c++) dot += static_cast<double>(r.q[(t * s.n_head + h) * s.dim_k + c]) * k[(j * s.n_head_kv + hk) * s.dim_k + c];
        logit.push_back(dot * r.scale);
    }
    double max = *std::max_element(logit.begin(), logit.end());
    if (s.sinks) max = std::max(max, static_cast<double>(r.sinks[h]));
    double sum = s.sinks ? std::exp(r.sinks[h] - max) : 0.0;
    for (double& l : logit) sum += (l = std::exp(l - max));
    out.assign(s.dim_v, 0.0), mag.assign(s.dim_v, 0.0);
    for (int64_t c = 0; c < s.dim_v; c++) {
        for (int64_t j = first; j <= pos; j++) {
            const double vv = v[(hk * n_kv + j) * s.dim_v + c];
            out[c] += logit[j - first] * vv, mag[c] += logit[j - first] * std::fabs(vv);
        }
        out[c] /= sum, mag[c] /= sum;
    }
}

// The kernel against the reference over what it sees (the dequantized caches): rounding only.
void check_attention(const Setup& s, uint64_t seed) {
    const Run r = run_attention(s, seed);
    std::vector<double> ref, mag;
    for (int64_t t = 0; t < s.n_tokens; t++)
        for (int64_t h = 0; h < s.n_head; h++) {
            reference(s, r, r.kd, r.vd, t, h, ref, mag);
            for (int64_t c = 0; c < s.dim_v; c++) {
                const float got = r.out[t * r.out_stride + h * s.dim_v + c];
                INFO("token " << t << " head " << h << " dim " << c << ": " << got << " vs " << ref[c]);
                REQUIRE(std::fabs(got - ref[c]) <= 2e-5 * mag[c] + 1e-6);
            }
        }
}

// The largest difference of the kernel's output from the reference over the f32 keys and values (what a
// quantized cache costs), keys and values having unit variance.
double f32_deviation(const Setup& s, uint64_t seed) {
    const Run r = run_attention(s, seed);
    std::vector<double> ref, mag;
    double dev = 0;
    for (int64_t t = 0; t < s.n_tokens; t++)
        for (int64_t h = 0; h < s.n_head; h++) {
            reference(s, r, r.kf, r.vf, t, h, ref, mag);
            for (int64_t c = 0; c < s.dim_v; c++) dev = std::max(dev, std::fabs(r.out[t * r.out_stride + h * s.dim_v + c] - ref[c]));
        }
    return dev;
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

TEST_CASE("attention decode: groups of 1, 3 and 8 query heads, 32- to 128-wide heads, every cache type") {
    for (Type t : {Type::F32, Type::F16, Type::Q8_0, Type::Q4_0}) {
        INFO(gguf::type_traits(t).name);
        on_every_variant({1, 70, 4, 4, 64, 64, 0, t}, 31);                // one head per KV head; two blocks of 32 keys and 7
        on_every_variant({1, 45, 6, 2, 32, 32, 0, t, true}, 32);          // groups of 3 (a pair, then one), sinks
        on_every_variant({1, 100, 16, 2, 128, 128, 40, t, true}, 33);     // groups of 8 in pairs, a window, sinks
        on_every_variant({2, 33, 6, 2, 32, 32, 0, t, false, true}, 34);   // the second token from head 1 on
    }
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
    on_every_variant({70, 10, 6, 2, 64, 64, 20, Type::F16, true}, 15);  // the window across blocks of 64 keys
    on_every_variant({90, 50, 4, 1, 64, 64, 0, Type::F32}, 16);         // three blocks of keys per token
}

TEST_CASE("attention with key and value head dims that differ and are not multiples of 16") {
    on_every_variant({3, 9, 6, 2, 24, 20, 0, Type::F16}, 5);
}

TEST_CASE("attention decode in MLA's shape: 16 heads over one 576/512-wide KV head, whole or its heads split") {
    // deepseek2's absorbed attention: each head's query against the cached latent + RoPE row (576), the
    // latent (512) as values; the CPU device splits the one group of heads between its threads
    for (Type t : {Type::F16, Type::F32}) {
        INFO(gguf::type_name(t));
        const Setup whole{1, 100, 16, 1, 576, 512, 0, t};
        on_every_variant(whole, 31);
        for (Isa isa : supported_isas()) {
            ActiveIsa active(isa);
            INFO(ck::isa_name(isa));
            Setup halves = whole, uneven = whole;
            halves.cut = 8, uneven.cut = 5;
            const std::vector<float> expect = run_attention(whole, 32).out;
            CHECK(run_attention(halves, 32).out == expect);
            CHECK(run_attention(uneven, 32).out == expect);
        }
    }
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

TEST_CASE("attention over Q8_0 and Q4_0 caches equals the reference over their dequantized values") {
    for (Type t : {Type::Q8_0, Type::Q4_0}) {
        INFO(gguf::type_name(t));
        on_every_variant({1, 300, 32, 8, 128, 128, 0, t}, 21);            // decode over a long cache
        on_every_variant({1, 37, 8, 2, 64, 64, 0, t}, 22);                // decode, an odd length
        on_every_variant({19, 0, 12, 4, 64, 64, 0, t}, 23);               // prefill tiles, a partial one
        on_every_variant({21, 45, 16, 2, 128, 128, 0, t}, 24);            // tiles after cached keys
        on_every_variant({11, 5, 8, 2, 64, 64, 0, t, false, true}, 25);   // a range starting mid-token
        on_every_variant({40, 3, 4, 2, 32, 32, 9, t, true}, 26);          // sliding window and sinks
        on_every_variant({3, 9, 6, 2, 64, 32, 0, t}, 27);                 // key and value dims that differ
        on_every_variant({5, 17, 4, 1, 96, 96, 0, t}, 28);                // 96-wide heads: three blocks
    }
}

// What a quantized cache costs against f32 attention (unit-variance keys and values, scale 1/sqrt(D)):
// the largest output difference over decode and prefill at 64- and 128-wide heads, measured on every
// variant (Xeon, Sapphire Rapids): q8_0 0.0140, q4_0 0.203. The bounds leave about 1.5x margin.
TEST_CASE("attention over Q8_0 and Q4_0 caches stays within its measured distance of f32 attention") {
    for (auto [t, bound] : {std::pair{Type::Q8_0, 0.021}, std::pair{Type::Q4_0, 0.30}}) {
        double worst = 0;
        for (Isa isa : supported_isas()) {
            ActiveIsa active(isa);
            for (const Setup& s : {Setup{1, 300, 8, 2, 64, 64, 0, t}, Setup{1, 1000, 16, 4, 128, 128, 0, t}, Setup{19, 13, 8, 2, 128, 128, 0, t},
                                   Setup{33, 0, 4, 4, 64, 64, 0, t}})
                worst = std::max(worst, f32_deviation(s, 31));
        }
        WARN(gguf::type_name(t) << ": largest difference from f32 attention " << worst);
        CHECK(worst <= bound);
    }
}

TEST_CASE("attention rejects bad arguments") {
    ck::Attention a;
    a.n_tokens = 1, a.n_head = 6, a.n_head_kv = 4, a.head_dim_k = a.head_dim_v = 16;
    float buf[256] = {};
    a.q = a.out = buf, a.k = a.v = buf;
    CHECK_THROWS_WITH(ck::attention(a, 0, 6), Catch::StartsWith("[cpu_kernels.attention] n_head 6 is not a positive multiple of n_head_kv 4"));
    a.n_head_kv = 2, a.kv_type = Type::Q4_K;
    CHECK_THROWS_WITH(ck::attention(a, 0, 6), Catch::Contains("KV cache type q4_K: expected f32, f16, q8_0 or q4_0"));
    a.kv_type = Type::Q8_0, a.k_pos_stride = a.v_pos_stride = 64, a.k_head_stride = a.v_head_stride = 32;  // head dims 16: half a block
    CHECK_THROWS_WITH(ck::attention(a, 0, 6), Catch::Contains("KV cache type q8_0: head dims and strides must be multiples of its 32-value blocks, got 16"));
    a.kv_type = Type::F32;
    CHECK_THROWS_WITH(ck::attention(a, 0, 7), Catch::Contains("pair range [0, 7) outside 0..6"));
}
