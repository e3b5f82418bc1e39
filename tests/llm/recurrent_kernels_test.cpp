// The recurrent custom kernels against naive token-by-token references: the chunked delta rule (scalar
// and per-channel decay, both head maps, across chunk boundaries, carried across calls, reset at
// position 0) and the causal short convolution with its carried inputs; their batch forms (per-sequence
// rows of a state pool, updated in place) against the single forms.
#include "engine/tensor.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

using engine::Tensor;

namespace {

std::vector<float> randn(size_t n, std::mt19937& rng, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

void normalize_rows(std::vector<float>& v, int d) {
    for (size_t r = 0; r < v.size() / size_t(d); r++) {
        double s = 0;
        for (int i = 0; i < d; i++) s += double(v[r * d + i]) * v[r * d + i];
        for (int i = 0; i < d; i++) v[r * d + i] = float(v[r * d + i] / std::sqrt(s));
    }
}

struct DeltaCase {
    int T, Hk, Hv, D, Dg;
    bool interleave;
    std::vector<float> q, k, v, g, beta, state;
};

DeltaCase make_case(int T, int Hk, int Hv, int D, int Dg, bool interleave, unsigned seed) {
    std::mt19937 rng(seed);
    DeltaCase c{T, Hk, Hv, D, Dg, interleave, {}, {}, {}, {}, {}, {}};
    c.q = randn(size_t(T * Hk * D), rng);
    c.k = randn(size_t(T * Hk * D), rng);
    normalize_rows(c.q, D);
    normalize_rows(c.k, D);
    c.v = randn(size_t(T * Hv * D), rng);
    std::uniform_real_distribution<float> decay(-0.3f, -0.001f), b(0.05f, 0.95f);
    for (int i = 0; i < T * Hv * Dg; i++) c.g.push_back(decay(rng));
    for (int i = 0; i < T * Hv; i++) c.beta.push_back(b(rng));
    c.state = randn(size_t(Hv * D * D), rng, 0.3f);
    return c;
}

// The recurrence exactly as written: S ← S·diag(e^g); S ← S + β (v − S k) kᵀ; o = scale · S q.
void reference(const DeltaCase& c, const std::vector<float>& s0, float scale, std::vector<float>& o, std::vector<float>& s) {
    const int D = c.D;
    s = s0;
    o.assign(size_t(c.T * c.Hv * D), 0.0f);
    for (int h = 0; h < c.Hv; h++) {
        int hk = c.interleave ? h / (c.Hv / c.Hk) : h % c.Hk;
        float* S = s.data() + h * D * D;
        for (int t = 0; t < c.T; t++) {
            const float* q = &c.q[(t * c.Hk + hk) * D];
            const float* k = &c.k[(t * c.Hk + hk) * D];
            const float* v = &c.v[(t * c.Hv + h) * D];
            const float* g = &c.g[(t * c.Hv + h) * c.Dg];
            float b = c.beta[t * c.Hv + h];
            for (int j = 0; j < D; j++)
                for (int i = 0; i < D; i++) S[j * D + i] *= std::exp(g[c.Dg == 1 ? 0 : i]);
            for (int j = 0; j < D; j++) {
                double sk = 0;
                for (int i = 0; i < D; i++) sk += S[j * D + i] * k[i];
                float delta = b * (v[j] - float(sk));
                for (int i = 0; i < D; i++) S[j * D + i] += delta * k[i];
            }
            for (int j = 0; j < D; j++) {
                double sq = 0;
                for (int i = 0; i < D; i++) sq += S[j * D + i] * q[i];
                o[(t * c.Hv + h) * D + j] = scale * float(sq);
            }
        }
    }
}

double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    double num = 0, den = 1e-6;
    for (size_t i = 0; i < got.size(); i++) {
        num = std::max(num, double(std::fabs(got[i] - want[i])));
        den = std::max(den, double(std::fabs(want[i])));
    }
    return num / den;
}

struct DeltaRun {
    std::vector<float> o, state;
};

// Runs tokens [t0, t0+n) of the case through engine::delta_rule at position `pos` from `state`.
DeltaRun run_delta(const DeltaCase& c, int t0, int n, const std::vector<float>& state, int64_t pos, float scale) {
    auto rows = [&](const std::vector<float>& v, int per_token) {
        return std::vector<float>(v.begin() + size_t(t0 * per_token), v.begin() + size_t((t0 + n) * per_token));
    };
    const int D = c.D;
    Tensor q = Tensor::from_vector(rows(c.q, c.Hk * D), {n, c.Hk, D});
    Tensor k = Tensor::from_vector(rows(c.k, c.Hk * D), {n, c.Hk, D});
    Tensor v = Tensor::from_vector(rows(c.v, c.Hv * D), {n, c.Hv, D});
    Tensor g = Tensor::from_vector(rows(c.g, c.Hv * c.Dg), {n, c.Hv, c.Dg});
    Tensor beta = Tensor::from_vector(rows(c.beta, c.Hv), {n, c.Hv});
    Tensor s = Tensor::from_vector(state, {c.Hv, D, D});
    auto map = c.interleave ? engine::HeadMap::INTERLEAVE : engine::HeadMap::MODULO;
    engine::DeltaResult r = engine::delta_rule(q, k, v, g, beta, s, pos, scale, map);
    return {r.o.to_vector<float>(), r.state.to_vector<float>()};
}

}  // namespace

TEST_CASE("recurrent: chunked delta rule equals the token-by-token recurrence") {
    struct Shape {
        int T, Hk, Hv, D, Dg;
        bool interleave;
    };
    // 150 tokens cross two chunk boundaries; Dg = D is KDA's per-channel decay.
    for (Shape sh : {Shape{150, 2, 4, 16, 1, false}, Shape{150, 2, 4, 16, 1, true}, Shape{150, 4, 4, 32, 32, false},
                     Shape{1, 2, 4, 16, 1, false}, Shape{70, 1, 2, 24, 24, true}}) {
        DYNAMIC_SECTION("T " << sh.T << " Hk " << sh.Hk << " Hv " << sh.Hv << " D " << sh.D << " Dg " << sh.Dg
                             << (sh.interleave ? " interleave" : " modulo")) {
            DeltaCase c = make_case(sh.T, sh.Hk, sh.Hv, sh.D, sh.Dg, sh.interleave, 7);
            float scale = 1.0f / std::sqrt(float(sh.D));
            std::vector<float> o, s;
            reference(c, c.state, scale, o, s);
            DeltaRun r = run_delta(c, 0, sh.T, c.state, /*pos=*/3, scale);
            CHECK(max_rel_err(r.o, o) < 1e-4);
            CHECK(max_rel_err(r.state, s) < 1e-4);
        }
    }
}

TEST_CASE("recurrent: delta rule state carried across calls equals one call") {
    DeltaCase c = make_case(100, 2, 4, 16, 16, false, 11);
    float scale = 0.25f;
    DeltaRun whole = run_delta(c, 0, 100, c.state, 5, scale);
    DeltaRun first = run_delta(c, 0, 67, c.state, 5, scale);
    DeltaRun second = run_delta(c, 67, 33, first.state, 72, scale);
    std::vector<float> o = first.o;
    o.insert(o.end(), second.o.begin(), second.o.end());
    CHECK(max_rel_err(o, whole.o) < 1e-5);
    CHECK(max_rel_err(second.state, whole.state) < 1e-5);
}

TEST_CASE("recurrent: a sequence at position 0 starts from a zero delta-rule state") {
    DeltaCase c = make_case(20, 2, 2, 16, 1, false, 3);
    std::vector<float> garbage(c.state.size(), std::nanf(""));
    std::vector<float> o, s;
    reference(c, std::vector<float>(c.state.size(), 0.0f), 0.5f, o, s);
    DeltaRun r = run_delta(c, 0, 20, garbage, /*pos=*/0, 0.5f);
    CHECK(max_rel_err(r.o, o) < 1e-4);
    CHECK(max_rel_err(r.state, s) < 1e-4);
}

TEST_CASE("recurrent: causal conv1d carries its last inputs and resets at position 0") {
    const int C = 5, K = 4;
    std::mt19937 rng(5);
    std::vector<float> w = randn(size_t(C * K), rng), state = randn(size_t((K - 1) * C), rng);
    for (int T : {1, 2, 9}) {
        for (int64_t pos : {int64_t(0), int64_t(7)}) {
            DYNAMIC_SECTION("T " << T << " pos " << pos) {
                std::vector<float> x = randn(size_t(T * C), rng);
                engine::ConvResult r = engine::causal_conv1d(Tensor::from_vector(x, {T, C}), Tensor::from_vector(state, {K - 1, C}),
                                                             Tensor::from_vector(w, {C, K}), pos);
                std::vector<float> in = pos == 0 ? std::vector<float>(state.size(), 0.0f) : state;
                in.insert(in.end(), x.begin(), x.end());  // (K-1+T, C)
                std::vector<float> y = r.y.to_vector<float>(), s = r.state.to_vector<float>();
                for (int t = 0; t < T; t++)
                    for (int ch = 0; ch < C; ch++) {
                        float want = 0;
                        for (int j = 0; j < K; j++) want += w[ch * K + j] * in[(t + j) * C + ch];
                        CHECK(y[t * C + ch] == Approx(want).margin(1e-5));
                    }
                for (int r0 = 0; r0 < K - 1; r0++)
                    for (int ch = 0; ch < C; ch++) CHECK(s[r0 * C + ch] == in[(T + r0) * C + ch]);
            }
        }
    }
}

TEST_CASE("recurrent: the batch forms run each sequence's tokens from its own pool row, as the single forms do") {
    // Three sequences in one call: pool row 2 decodes one token at position 9, row 0 starts a prompt at
    // position 0 (its row holds NaN leftovers, which must not leak in), row 3 continues over 70 tokens (a
    // delta-rule chunk boundary); row 1 is not in the batch and must stay as it was.
    struct Run { int row, n; int64_t pos; };
    const std::vector<Run> runs = {{2, 1, 9}, {0, 5, 0}, {3, 70, 12}};
    const int S = 4, T = 76, Hk = 2, Hv = 4, D = 16, C = 6, K = 4;
    const float scale = 0.25f;
    DeltaCase c = make_case(T, Hk, Hv, D, 1, true, 21);
    std::mt19937 rng(9);
    std::vector<float> ssm = randn(size_t(S * Hv * D * D), rng, 0.3f), conv = randn(size_t(S * (K - 1) * C), rng);
    std::fill(ssm.begin(), ssm.begin() + Hv * D * D, std::nanf(""));
    std::fill(conv.begin(), conv.begin() + (K - 1) * C, std::nanf(""));
    std::vector<float> x = randn(size_t(T * C), rng), w = randn(size_t(C * K), rng);
    std::vector<int32_t> pos, seq;
    for (const Run& r : runs)
        for (int i = 0; i < r.n; i++) pos.push_back(int32_t(r.pos + i)), seq.push_back(r.row);

    Tensor ssm_pool = Tensor::from_vector(ssm, {S, Hv, D, D}), conv_pool = Tensor::from_vector(conv, {S, K - 1, C});
    Tensor pos_t = Tensor::from_vector(pos, {T}), seq_t = Tensor::from_vector(seq, {T});
    Tensor o = engine::delta_rule_seqs(Tensor::from_vector(c.q, {T, Hk, D}), Tensor::from_vector(c.k, {T, Hk, D}),
                                       Tensor::from_vector(c.v, {T, Hv, D}), Tensor::from_vector(c.g, {T, Hv, 1}),
                                       Tensor::from_vector(c.beta, {T, Hv}), ssm_pool, {pos_t, seq_t, {}, {}}, scale, engine::HeadMap::INTERLEAVE);
    Tensor y = engine::causal_conv1d_seqs(Tensor::from_vector(x, {T, C}), conv_pool, Tensor::from_vector(w, {C, K}), {pos_t, seq_t, {}, {}});
    const std::vector<float> got_o = o.to_vector<float>(), got_y = y.to_vector<float>();
    const std::vector<float> ssm_after = ssm_pool.to_vector<float>(), conv_after = conv_pool.to_vector<float>();

    const size_t ssm_row = size_t(Hv * D * D), conv_row = size_t((K - 1) * C);
    auto row = [](const std::vector<float>& v, size_t n, int r) { return std::vector<float>(v.begin() + r * n, v.begin() + (r + 1) * n); };
    int t0 = 0;
    for (const Run& r : runs) {
        INFO("row " << r.row << ", " << r.n << " tokens from position " << r.pos);
        DeltaRun want = run_delta(c, t0, r.n, row(ssm, ssm_row, r.row), r.pos, scale);
        CHECK(std::vector<float>(got_o.begin() + t0 * Hv * D, got_o.begin() + (t0 + r.n) * Hv * D) == want.o);
        CHECK(row(ssm_after, ssm_row, r.row) == want.state);
        engine::ConvResult cw = engine::causal_conv1d(Tensor::from_vector(std::vector<float>(x.begin() + t0 * C, x.begin() + (t0 + r.n) * C), {r.n, C}),
                                                      Tensor::from_vector(row(conv, conv_row, r.row), {K - 1, C}), Tensor::from_vector(w, {C, K}), r.pos);
        CHECK(std::vector<float>(got_y.begin() + t0 * C, got_y.begin() + (t0 + r.n) * C) == cw.y.to_vector<float>());
        CHECK(row(conv_after, conv_row, r.row) == cw.state.to_vector<float>());
        t0 += r.n;
    }
    CHECK(row(ssm_after, ssm_row, 1) == row(ssm, ssm_row, 1));
    CHECK(row(conv_after, conv_row, 1) == row(conv, conv_row, 1));
}

TEST_CASE("recurrent: the batch forms start a sequence from a checkpoint row and save its state after a marked token") {
    // Row 0 prefills 20 tokens from position 0 and saves its state after token 15 (position 16, a block
    // boundary) to row 2; row 1 starts at position 16 from checkpoint row 3 (which must stay unchanged).
    const int S = 4, T = 25, Hk = 1, Hv = 2, D = 16, C = 6, K = 4;
    const float scale = 0.25f;
    DeltaCase c = make_case(T, Hk, Hv, D, D, false, 33);  // per-channel decay (KDA)
    std::mt19937 rng(13);
    std::vector<float> ssm = randn(size_t(S * Hv * D * D), rng, 0.3f), conv = randn(size_t(S * (K - 1) * C), rng);
    std::vector<float> x = randn(size_t(T * C), rng), w = randn(size_t(C * K), rng);
    std::vector<int32_t> pos, seq, load(T, -1), save(T, -1);
    for (int i = 0; i < 20; i++) pos.push_back(i), seq.push_back(0);
    for (int i = 0; i < 5; i++) pos.push_back(16 + i), seq.push_back(1);
    save[15] = 2, load[20] = 3;

    Tensor ssm_pool = Tensor::from_vector(ssm, {S, Hv, D, D}), conv_pool = Tensor::from_vector(conv, {S, K - 1, C});
    engine::SeqRows rows{Tensor::from_vector(pos, {T}), Tensor::from_vector(seq, {T}), Tensor::from_vector(load, {T}), Tensor::from_vector(save, {T})};
    const std::vector<float> got_o = engine::delta_rule_seqs(Tensor::from_vector(c.q, {T, Hk, D}), Tensor::from_vector(c.k, {T, Hk, D}),
                                                             Tensor::from_vector(c.v, {T, Hv, D}), Tensor::from_vector(c.g, {T, Hv, D}),
                                                             Tensor::from_vector(c.beta, {T, Hv}), ssm_pool, rows, scale)
                                         .to_vector<float>();
    const std::vector<float> got_y = engine::causal_conv1d_seqs(Tensor::from_vector(x, {T, C}), conv_pool, Tensor::from_vector(w, {C, K}), rows).to_vector<float>();
    const std::vector<float> ssm_after = ssm_pool.to_vector<float>(), conv_after = conv_pool.to_vector<float>();

    const size_t ssm_row = size_t(Hv * D * D), conv_row = size_t((K - 1) * C);
    auto row = [](const std::vector<float>& v, size_t n, int r) { return std::vector<float>(v.begin() + r * n, v.begin() + (r + 1) * n); };
    auto slice = [](const std::vector<float>& v, size_t per_token, int t0, int n) {
        return std::vector<float>(v.begin() + t0 * per_token, v.begin() + (t0 + n) * per_token);
    };
    auto conv_single = [&](int t0, int n, const std::vector<float>& state, int64_t p) {
        return engine::causal_conv1d(Tensor::from_vector(slice(x, C, t0, n), {n, C}), Tensor::from_vector(state, {K - 1, C}),
                                     Tensor::from_vector(w, {C, K}), p);
    };
    // Row 0: tokens 0..15 from zeros (the saved state), then 16..19.
    DeltaRun a1 = run_delta(c, 0, 16, row(ssm, ssm_row, 0), 0, scale), a2 = run_delta(c, 16, 4, a1.state, 16, scale);
    CHECK(slice(got_o, Hv * D, 0, 16) == a1.o);
    CHECK(slice(got_o, Hv * D, 16, 4) == a2.o);
    CHECK(row(ssm_after, ssm_row, 2) == a1.state);
    CHECK(row(ssm_after, ssm_row, 0) == a2.state);
    engine::ConvResult c1 = conv_single(0, 16, row(conv, conv_row, 0), 0), c2 = conv_single(16, 4, c1.state.to_vector<float>(), 16);
    CHECK(slice(got_y, C, 0, 16) == c1.y.to_vector<float>());
    CHECK(slice(got_y, C, 16, 4) == c2.y.to_vector<float>());
    CHECK(row(conv_after, conv_row, 2) == c1.state.to_vector<float>());
    CHECK(row(conv_after, conv_row, 0) == c2.state.to_vector<float>());
    // Row 1: from checkpoint row 3, which stays as it was.
    DeltaRun b = run_delta(c, 20, 5, row(ssm, ssm_row, 3), 16, scale);
    CHECK(slice(got_o, Hv * D, 20, 5) == b.o);
    CHECK(row(ssm_after, ssm_row, 1) == b.state);
    CHECK(row(ssm_after, ssm_row, 3) == row(ssm, ssm_row, 3));
    engine::ConvResult cb = conv_single(20, 5, row(conv, conv_row, 3), 16);
    CHECK(slice(got_y, C, 20, 5) == cb.y.to_vector<float>());
    CHECK(row(conv_after, conv_row, 1) == cb.state.to_vector<float>());
    CHECK(row(conv_after, conv_row, 3) == row(conv, conv_row, 3));
}
