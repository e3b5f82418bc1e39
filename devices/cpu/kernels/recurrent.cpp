// The recurrent token mixers on CPU: the causal short convolution that carries its last inputs between
// calls (ops::Conv1d), and the gated delta rule (GatedDeltaNet, Kimi delta attention) in its chunked form
// (ops::DeltaRule), so a prefill of T tokens takes T/64 sequential state updates instead of T.
#include "devices/cpu/kernels/ops_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

namespace cpu_kernels {

namespace {

// Small vector helpers, inlined into the kernels below (which are compiled once per ISA).
using f32x16 = float __attribute__((vector_size(64)));  // one AVX-512 register, two AVX2 ones, four SSE ones
using f32x8 = float __attribute__((vector_size(32)));

[[gnu::always_inline]] inline float dot(const float* a, const float* b, int64_t n) {
    f32x16 acc = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        f32x16 x, y;
        std::memcpy(&x, a + i, sizeof x), std::memcpy(&y, b + i, sizeof y);
        acc += x * y;
    }
    // A pairwise sum: the lanes fold in four vector steps instead of a chain of 16 dependent additions.
    f32x8 h8 = __builtin_shufflevector(acc, acc, 0, 1, 2, 3, 4, 5, 6, 7) + __builtin_shufflevector(acc, acc, 8, 9, 10, 11, 12, 13, 14, 15);
    float s = ((h8[0] + h8[4]) + (h8[2] + h8[6])) + ((h8[1] + h8[5]) + (h8[3] + h8[7]));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

[[gnu::always_inline]] inline void axpy(float* y, float a, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

// A run of one sequence's tokens [t0, t1) in a batch form's arguments.
struct Segment {
    int64_t t0, t1;
    int64_t row;       // its states row, which it updates
    int64_t from;      // the row it starts from: its own, or a checkpoint's
    int64_t save;      // a row that also gets the state it ends with, or -1
    bool reset;        // its first token is at position 0
};

// The batch form's runs of equal seq, also cut after a token whose state is saved, in order.
template <class A> std::vector<Segment> segments(const A& a) {
    std::vector<Segment> out;
    auto saves = [&](int64_t t) { return a.save && a.save[t] >= 0; };
    for (int64_t t0 = 0, t1; t0 < a.T; t0 = t1) {
        for (t1 = t0 + 1; t1 < a.T && a.seq[t1] == a.seq[t0] && !saves(t1 - 1);) t1++;
        const int64_t row = std::clamp<int64_t>(a.seq[t0], 0, a.S - 1);
        const int64_t from = a.load && a.load[t0] >= 0 ? std::min<int64_t>(a.load[t0], a.S - 1) : row;
        out.push_back({t0, t1, row, from, saves(t1 - 1) ? std::min<int64_t>(a.save[t1 - 1], a.S - 1) : -1, a.pos[t0] == 0});
    }
    return out;
}

// Channels [begin, end) of tokens x (T, C): y (T, C), then the last K-1 inputs into state_out, which may
// be state itself (each state row is read before it is overwritten).
void conv_run(const float* x, int64_t T, int64_t C, int64_t K, const float* w, const float* state, bool reset, float* y,
              float* state_out, int64_t begin, int64_t end) {
    // Row r of concat(state, x); the state reads as zeros when the sequence restarts.
    auto input = [&](int64_t r, int64_t c) -> float {
        if (r >= K - 1) return x[(r - (K - 1)) * C + c];
        return reset ? 0.0f : state[r * C + c];
    };
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = begin; c < end; c++) {
            float s = 0.0f;
            for (int64_t j = 0; j < K; j++) s += w[c * K + j] * input(t + j, c);  // tap 0 meets the oldest input
            y[t * C + c] = s;
        }
    for (int64_t r = 0; r < K - 1; r++)  // ascending: row r reads row r + T >= r of the old state
        for (int64_t c = begin; c < end; c++) state_out[r * C + c] = input(T + r, c);
}

}  // namespace

// Single form: rows [0, T) of out the convolution, rows [T, T+K-1) the new state (the last K-1 inputs).
void conv1d(const ops::Conv1d& a, int64_t begin, int64_t end) {
    const int64_t C = a.C, K = a.K;
    if (!a.seq) {
        conv_run(a.x, a.T, C, K, a.w, a.state, a.start_pos == 0, a.out, a.out + a.T * C, begin, end);
        return;
    }
    const int64_t n = (K - 1) * C;
    for (const Segment& g : segments(a)) {
        float* state = a.states + g.row * n;
        conv_run(a.x + g.t0 * C, g.t1 - g.t0, C, K, a.w, a.states + g.from * n, g.reset, a.out + g.t0 * C, state, begin, end);
        if (g.save >= 0)
            for (int64_t r = 0; r < K - 1; r++) std::copy(state + r * C + begin, state + r * C + end, a.states + g.save * n + r * C + begin);
    }
}

namespace {

constexpr int64_t CHUNK = 64;  // tokens whose interactions are solved together (llama.cpp's chunk size)

// One v head over all T tokens, chunk by chunk. Within a chunk of n tokens, with Γ_t the cumulative log
// decay since the chunk start (per key channel, or one value per head broadcast) and S0 the state before it:
//   u_t = S0 (k_t∘e^Γt) + Σ_{s<t} δ_s Σ_i k_s[i] k_t[i] e^(Γt[i]-Γs[i])      (what S predicts for k_t)
//   δ_t = β_t (v_t − u_t)                                                    (the delta-rule correction)
//   o_t = S0 (q_t∘e^Γt) + Σ_{s≤t} δ_s Σ_i k_s[i] q_t[i] e^(Γt[i]-Γs[i])
//   S   = S0 diag(e^Γn) + Σ_s δ_s (k_s∘e^(Γn−Γs))ᵀ
// which equals the token-by-token recurrence S ← S diag(e^g_t); S ← S + β_t (v_t − S k_t) k_tᵀ; o_t = S q_t.
// Only the δ_t are sequential (a triangular solve of n² Dv work); everything else is matrix work.
struct DeltaArgs {
    int64_t T, Hk, Hv, Dk, Dv, Dg;
    bool reset, interleave;
    float scale;
    const float *q, *k, *v, *g, *beta, *state;
    float *o, *state_out;
};

// delta_head's per-thread scratch, grown as needed. A plain type that calls only out-of-line functions:
// in this file (target_clones, -O3), clang-19 referenced inline library members it did not emit
// (~vector<float>() of a thread_local vector, then bad_alloc's constructor), undefined at link.
struct DeltaScratch {
    float* data = nullptr;
    size_t size = 0;
    float* get(size_t n);
    ~DeltaScratch();
};
float* DeltaScratch::get(size_t n) {
    if (n > size) {
        ::operator delete(data);
        data = nullptr, size = 0;
        data = static_cast<float*>(::operator new(n * sizeof(float)));  // throws bad_alloc itself
        size = n;
    }
    return data;
}
DeltaScratch::~DeltaScratch() { ::operator delete(data); }
thread_local DeltaScratch delta_scratch;

__attribute__((target_clones("avx512f", "avx2", "default")))
void delta_head(const DeltaArgs& a, int64_t h) {
    const int64_t Dk = a.Dk, Dv = a.Dv, C = CHUNK;
    const bool per_channel = a.Dg != 1;  // KDA: one decay per key channel; GatedDeltaNet: one per head
    const int64_t Dg = per_channel ? Dk : 1;
    const int64_t hk = a.interleave ? h / (a.Hv / a.Hk) : h % a.Hk;  // the q/k head this v head reads
    float* S = a.state_out + h * Dv * Dk;                                 // (Dv, Dk): S[j][i], i over keys
    if (a.reset) std::fill(S, S + Dv * Dk, 0.0f);
    else if (a.state != a.state_out) std::memcpy(S, a.state + h * Dv * Dk, size_t(Dv * Dk) * sizeof(float));

    float* kk = delta_scratch.get(size_t(C * (3 * Dk + 2 * Dv + 2 * C) + 3 * Dk));
    float *qq = kk + C * Dk, *gam = qq + C * Dk;                          // (n, Dk) (n, Dk) (n, Dg)
    float *u = gam + C * Dk, *delta = u + C * Dv, *A = delta + C * Dv, *M = A + C * C;
    float *kd = M + C * C, *qd = kd + Dk, *tmp = qd + Dk;

    for (int64_t c0 = 0; c0 < a.T; c0 += C) {
        const int64_t n = std::min(C, a.T - c0);
        // Gather the chunk: k and scaled q rows, cumulative log decays.
        for (int64_t t = 0; t < n; t++) {
            const int64_t tok = c0 + t;
            std::memcpy(kk + t * Dk, a.k + (tok * a.Hk + hk) * Dk, size_t(Dk) * sizeof(float));
            const float* qr = a.q + (tok * a.Hk + hk) * Dk;
            for (int64_t i = 0; i < Dk; i++) qq[t * Dk + i] = qr[i] * a.scale;
            const float* gr = a.g + (tok * a.Hv + h) * Dg;
            for (int64_t i = 0; i < Dg; i++) gam[t * Dg + i] = (t ? gam[(t - 1) * Dg + i] : 0.0f) + gr[i];
        }
        // Pairwise key·key and key·query products, decayed from s to t (s ≤ t: decays are ≤ 1).
        for (int64_t t = 0; t < n; t++)
            for (int64_t s = 0; s <= t; s++) {
                float ak = 0.0f, aq = 0.0f;
                if (!per_channel) {
                    float d = std::exp(gam[t] - gam[s]);
                    ak = d * dot(kk + t * Dk, kk + s * Dk, Dk);
                    aq = d * dot(qq + t * Dk, kk + s * Dk, Dk);
                } else {
                    for (int64_t i = 0; i < Dk; i++) tmp[i] = kk[s * Dk + i] * std::exp(gam[t * Dk + i] - gam[s * Dk + i]);
                    ak = dot(tmp, kk + t * Dk, Dk);
                    aq = dot(tmp, qq + t * Dk, Dk);
                }
                A[t * C + s] = ak;
                M[t * C + s] = aq;
            }
        // What the carried state contributes: u_t = S0 (k_t∘e^Γt), o_t = S0 (q_t∘e^Γt).
        for (int64_t t = 0; t < n; t++) {
            float* ot = a.o + ((c0 + t) * a.Hv + h) * Dv;
            for (int64_t i = 0; i < Dk; i++) {
                float e = std::exp(gam[t * Dg + (per_channel ? i : 0)]);
                kd[i] = kk[t * Dk + i] * e, qd[i] = qq[t * Dk + i] * e;
            }
            for (int64_t j = 0; j < Dv; j++) {
                u[t * Dv + j] = dot(S + j * Dk, kd, Dk);
                ot[j] = dot(S + j * Dk, qd, Dk);
            }
        }
        // The triangular solve for the corrections, then their contribution to the outputs.
        for (int64_t t = 0; t < n; t++) {
            const int64_t tok = c0 + t;
            const float b = a.beta[tok * a.Hv + h];
            const float* vt = a.v + (tok * a.Hv + h) * Dv;
            float* dt = delta + t * Dv;
            for (int64_t j = 0; j < Dv; j++) dt[j] = vt[j] - u[t * Dv + j];
            for (int64_t s = 0; s < t; s++) axpy(dt, -A[t * C + s], delta + s * Dv, Dv);
            for (int64_t j = 0; j < Dv; j++) dt[j] *= b;
            float* ot = a.o + (tok * a.Hv + h) * Dv;
            for (int64_t s = 0; s <= t; s++) axpy(ot, M[t * C + s], delta + s * Dv, Dv);
        }
        // Carry the state past the chunk: S = S0 diag(e^Γn) + Σ_s δ_s (k_s∘e^(Γn−Γs))ᵀ.
        const float* gl = gam + (n - 1) * Dg;
        for (int64_t i = 0; i < Dk; i++) tmp[i] = std::exp(gl[per_channel ? i : 0]);
        for (int64_t j = 0; j < Dv; j++)
            for (int64_t i = 0; i < Dk; i++) S[j * Dk + i] *= tmp[i];
        for (int64_t s = 0; s < n; s++) {
            if (per_channel) {
                for (int64_t i = 0; i < Dk; i++) kd[i] = kk[s * Dk + i] * std::exp(gl[i] - gam[s * Dk + i]);
            } else {
                float e = std::exp(gl[0] - gam[s]);
                for (int64_t i = 0; i < Dk; i++) kd[i] = kk[s * Dk + i] * e;
            }
            for (int64_t j = 0; j < Dv; j++) axpy(S + j * Dk, delta[s * Dv + j], kd, Dk);
        }
    }
}

}  // namespace

void delta_rule(const ops::DeltaRule& c, int64_t begin, int64_t end) {
    DeltaArgs a;
    a.T = c.T, a.Hk = c.Hk, a.Hv = c.Hv, a.Dk = c.Dk, a.Dv = c.Dv, a.Dg = c.Dg;
    a.reset = c.start_pos == 0, a.interleave = c.interleave;
    a.scale = c.scale;
    a.q = c.q, a.k = c.k, a.v = c.v, a.g = c.g, a.beta = c.beta, a.state = c.state;
    a.o = c.out;
    a.state_out = a.o + a.T * a.Hv * a.Dv;
    if (!c.seq) {
        for (int64_t h = begin; h < end; h++) delta_head(a, h);
        return;
    }
    // Batch form: each sequence's run of tokens from its own row of the states (or a checkpoint's),
    // updated in place.
    const int64_t n = a.Hv * a.Dv * a.Dk, per_head = a.Dv * a.Dk;
    for (const Segment& g : segments(c)) {
        DeltaArgs r = a;
        const int64_t qk = g.t0 * a.Hk * a.Dk, hv = g.t0 * a.Hv;
        r.T = g.t1 - g.t0, r.reset = g.reset;
        r.q = a.q + qk, r.k = a.k + qk, r.v = a.v + hv * a.Dv, r.g = a.g + hv * a.Dg, r.beta = a.beta + hv;
        r.o = a.o + hv * a.Dv;
        r.state = c.states + g.from * n;
        r.state_out = c.states + g.row * n;
        for (int64_t h = begin; h < end; h++) {
            delta_head(r, h);
            if (g.save >= 0) std::copy_n(r.state_out + h * per_head, per_head, c.states + g.save * n + h * per_head);
        }
    }
}

}  // namespace cpu_kernels
