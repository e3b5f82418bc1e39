// The CPU's implementations of the hot ops (devices/ops.h): each spreads its work items over the
// thread pool (Device::run_host) and calls the loops of devices/cpu/kernels. Every device that runs
// host code falls back on these (Device::op's default).
#include "devices/cpu/cpu_impl.h"
#include "devices/cpu/kernels/kernels.h"
#include "devices/cpu/kernels/ops_impl.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace devices::cpu {

namespace {

using namespace devices::ops;

// Runs F(args, begin, end) over [0, n_work) on the device's host threads.
template <class A, void (*F)(const A&, int64_t, int64_t)> void over(Device& dev, const A& a, int64_t n_work, int64_t grain) {
    dev.run_host([](const void* p, int64_t b, int64_t e) { F(*static_cast<const A*>(p), b, e); }, &a, n_work, grain);
}

void quantize_rows(const Quantize& a, int64_t b, int64_t e) {
    if (!a.rms_norm && !a.glu) return ::cpu_kernels::quantize_rows(a.act, a.x, a.n_cols, a.n_cols, a.out, b, e);
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(a.n_cols));
    const auto row_bytes = static_cast<int64_t>(*gguf::row_bytes(a.act, a.n_cols));
    for (int64_t r = b; r < e; r++) {
        if (a.glu)
            ::cpu_kernels::swiglu_row(a.x + 2 * r * a.n_cols, a.x + (2 * r + 1) * a.n_cols, a.n_cols, row.data());
        else
            ::cpu_kernels::rms_norm_row(a.x + r * a.n_cols, a.norm, a.n_cols, a.eps, row.data());
        ::cpu_kernels::quantize_rows(a.act, row.data(), a.n_cols, a.n_cols, static_cast<uint8_t*>(a.out) + r * row_bytes, 0, 1);
    }
}
void quantize(Device& dev, const Quantize& a) { over<Quantize, quantize_rows>(dev, a, a.rows, 1); }

// Items are the weight rows h * N + n: one hand matmul per matrix over the part of [b, e) in it.
struct LinearCall {
    const Linear& a;
    uint64_t key;  // of this call's activations, key + h for matrix h (Matmul::acts_key)
};
void linear_rows(const LinearCall& call, int64_t b, int64_t e) {
    const Linear& a = call.a;
    const int64_t x_row = int64_t(*gguf::row_bytes(a.act, a.K)), w_row = int64_t(*gguf::row_bytes(a.type, a.K));
    for (int64_t h = b / a.N; h < a.H && h * a.N < e; h++) {
        ::cpu_kernels::Matmul m;
        m.type = a.type;
        m.w = static_cast<const uint8_t*>(a.w) + h * a.N * w_row;
        m.n_rows = a.N, m.n_cols = a.K;
        m.x = static_cast<const uint8_t*>(a.x) + h * a.T * x_row;
        m.n_tokens = a.T;
        m.y = a.y + h * a.T * a.N;
        m.y_stride = a.N;
        m.packed = a.packed;
        m.acts_key = call.key + uint64_t(h);
        ::cpu_kernels::matmul(m, std::max(b, h * a.N) - h * a.N, std::min(e, (h + 1) * a.N) - h * a.N);
    }
}
void linear(Device& dev, const Linear& a) {
    static std::atomic<uint64_t> next_key{1};
    const LinearCall call{a, next_key.fetch_add(uint64_t(std::max<int64_t>(a.H, 1)))};
    over<LinearCall, linear_rows>(dev, call, a.H * a.N, ::cpu_kernels::kMatmulRowGrain);
}

// The kernel's view of q, the caches and out, shared by both attention forms (the v strides and the
// positions are each form's own).
template <class A>
::cpu_kernels::Attention kernel_view(const A& a) {
    ::cpu_kernels::Attention at;
    at.q = a.q;
    at.q_token_stride = a.H * a.Dk, at.q_head_stride = a.Dk;
    at.kv_type = a.kv_type;
    at.k = a.k;
    at.k_pos_stride = a.Hkv * a.Dk, at.k_head_stride = a.Dk;
    at.v = a.v;
    at.out = a.out;
    at.out_token_stride = a.H * a.Dv, at.out_head_stride = a.Dv;
    at.n_tokens = a.T;
    at.n_head = a.H, at.n_head_kv = a.Hkv, at.head_dim_k = a.Dk, at.head_dim_v = a.Dv;
    at.scale = a.scale;
    at.window = a.window;
    at.sinks = a.sinks;
    return at;
}

// Items are (token, head) pairs, shared between threads in whole groups of heads over one KV head
// (decode reads a KV head's rows once for its group) — unless there are fewer groups than threads:
// MLA's decode is 16 heads over one KV head, one group, which left the other threads idle while one
// ran the whole attention; its heads are split, and each thread reads the rows itself.
void run_attention(Device& dev, const ::cpu_kernels::Attention& at) {
    const int64_t group = at.n_head_kv > 0 && at.n_head % at.n_head_kv == 0 ? at.n_head / at.n_head_kv : 1;
    const int64_t threads = dev.n_threads(), groups = at.n_tokens * (at.n_head / group);
    const int64_t grain = groups >= threads ? group : std::max<int64_t>(1, group / threads);
    dev.run_host([](const void* p, int64_t b, int64_t e) { ::cpu_kernels::attention(*static_cast<const ::cpu_kernels::Attention*>(p), b, e); },
                 &at, at.n_tokens * at.n_head, grain);
}

void attention(Device& dev, const Attention& a) {
    ::cpu_kernels::Attention at = kernel_view(a);
    at.v_pos_stride = a.v_pos_stride, at.v_head_stride = a.v_head_stride;
    at.start_pos = std::min(a.start_pos, a.C - a.T);  // never past the cache
    run_attention(dev, at);
}

// The same kernels as attention, reading keys through the block table.
void paged_attention(Device& dev, const PagedAttention& a) {
    ::cpu_kernels::Attention at = kernel_view(a);
    at.v_pos_stride = a.v_pos_stride ? a.v_pos_stride : a.Hkv * a.Dv;
    at.v_head_stride = a.v_head_stride ? a.v_head_stride : a.Dv;
    at.pos = a.pos, at.seq = a.seq, at.block_table = a.block_table;
    at.n_seqs = a.S, at.blocks_per_seq = a.MB, at.block_size = a.BS, at.n_blocks = a.n_blocks;
    run_attention(dev, at);
}

// Items are tokens: row t of x into pool row slot[t] (f16 rounded to nearest even, as a cast; q8_0 and
// q4_0 as ggml's reference quantizers round).
void kv_store_rows(const KvStore& a, int64_t b, int64_t e) {
    const size_t row_bytes = size_t(*gguf::row_bytes(a.kv_type, a.row));
    for (int64_t t = b; t < e; t++) {
        const int64_t slot = a.slot[t];
        if (slot >= 0 && slot < a.n_rows)
            ::cpu_kernels::quantize_rows(a.kv_type, a.x + t * a.row, a.row, a.row, static_cast<uint8_t*>(a.pool) + slot * row_bytes, 0, 1);
        a.out[t] = static_cast<int32_t>(slot);
    }
}
void kv_store(Device& dev, const KvStore& a) { over<KvStore, kv_store_rows>(dev, a, a.T, 1); }

void topk(Device& dev, const TopK& a) { over<TopK, ::cpu_kernels::topk>(dev, a, a.rows, a.ggml_order ? 64 : 1); }
void rows(Device& dev, const Rows& a) { over<Rows, ::cpu_kernels::rows>(dev, a, a.n, 1); }
void conv1d(Device& dev, const Conv1d& a) { over<Conv1d, ::cpu_kernels::conv1d>(dev, a, a.C, 64); }
void delta_rule(Device& dev, const DeltaRule& a) { over<DeltaRule, ::cpu_kernels::delta_rule>(dev, a, a.Hv, 1); }

void plan_items(const ExpertPlan& a, int64_t, int64_t) { ::cpu_kernels::expert_plan(a); }
void expert_plan(Device& dev, const ExpertPlan& a) { over<ExpertPlan, plan_items>(dev, a, 1, 1); }
// Tile-major items: every thread gets a share of each selected expert.
void linear_experts(Device& dev, const LinearExperts& a) {
    const int64_t tiles = (a.N + ::cpu_kernels::kExpertRowTile - 1) / ::cpu_kernels::kExpertRowTile;
    over<LinearExperts, ::cpu_kernels::linear_experts>(dev, a, tiles * a.E, 1);
}

}  // namespace

ops::Impl host_op(ops::Kind kind, gguf::Type) {
    switch (kind) {
        case Kind::QUANTIZE: return impl<Quantize, quantize>();
        case Kind::LINEAR: return impl<Linear, linear>();
        case Kind::LINEAR_EXPERTS: return impl<LinearExperts, linear_experts>();
        case Kind::EXPERT_PLAN: return impl<ExpertPlan, expert_plan>();
        case Kind::ATTENTION: return impl<Attention, attention>();
        case Kind::TOPK: return impl<TopK, topk>();
        case Kind::ROWS: return impl<Rows, rows>();
        case Kind::CONV1D: return impl<Conv1d, conv1d>();
        case Kind::DELTA_RULE: return impl<DeltaRule, delta_rule>();
        case Kind::PAGED_ATTENTION: return impl<PagedAttention, paged_attention>();
        case Kind::KV_STORE: return impl<KvStore, kv_store>();
    }
    return {};
}

gguf::Type host_activation_type(gguf::Type weight) { return ::cpu_kernels::activation_type(weight); }

}  // namespace devices::cpu
