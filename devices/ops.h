// The hot ops a device implements by hand: one typed argument struct per op, filled once per launch by
// the engine, and per device a table of implementations looked up when a graph is captured (DESIGN.md §4).
// Pointers are host addresses for host implementations and device addresses for device ones.
#pragma once

#include "devices/device.h"
#include "gguf/types.h"

namespace devices::ops {

enum class Kind : uint8_t { QUANTIZE, LINEAR, LINEAR_EXPERTS, EXPERT_PLAN, ATTENTION, TOPK, ROWS, CONV1D, DELTA_RULE, PAGED_ATTENTION,
                            KV_STORE };
const char* name(Kind kind);

// Activation quantization: x (rows, n_cols) f32 -> rows of `act` (the format linear's weights multiply
// against: Q8_0, Q8_K, F16, ...), each row activation_row_bytes long. On a device whose LinearPlan says
// fuse_norm, the rows may be made first: with `rms_norm`, each row RMS-normalized and multiplied by
// `norm` (rms_norm(x, norm, eps)); with `glu`, x's rows are 2 · n_cols long, [gate | up], and the row
// quantized is silu(gate) · up (SwiGLU).
struct Quantize {
    static constexpr Kind KIND = Kind::QUANTIZE;
    const float* x = nullptr;     // (rows, n_cols)
    const float* norm = nullptr;  // (n_cols) the norm's weight, with rms_norm
    void* out = nullptr;          // (rows, row bytes)
    int64_t rows = 0, n_cols = 0;
    gguf::Type act = gguf::Type::F32;
    bool rms_norm = false, glu = false;
    float eps = 0.0f;
};

// y[h] (T, N) f32 = x[h] (T, K) . W[h] (N, K)^T for each of H matrices (H = 1: linear; MLA's per-head
// attn_k_b / attn_v_b), x already in the weight type's activation format (Quantize).
struct Linear {
    static constexpr Kind KIND = Kind::LINEAR;
    const void* x = nullptr;  // (H, T, activation row bytes)
    const void* w = nullptr;  // (H, N, K) rows of `type`, or the device's layout when `packed`
    float* y = nullptr;       // (H, T, N)
    int64_t H = 1, T = 0, N = 0, K = 0;
    gguf::Type type = gguf::Type::F32;
    gguf::Type act = gguf::Type::F32;  // the activations' format
    bool packed = false;      // w is in the layout the device's weight hook (Device::pack) made
};

// Mixture of experts (ggml's mul_mat_id): out[t, s] = W[ids[t, s]] . x[t] (one row per token) or
// . x[t, s] (per_slot), reading only the experts the plan (ExpertPlan) groups rows under.
struct LinearExperts {
    static constexpr Kind KIND = Kind::LINEAR_EXPERTS;
    const void* x = nullptr;         // (T or T*k, activation row bytes) in `act`
    const void* w = nullptr;         // (E, N, K) `type`
    const int32_t* plan = nullptr;   // (E + 1 + T*k): ExpertPlan's output
    float* out = nullptr;            // (T, k, N)
    int64_t T = 0, k = 0, N = 0, K = 0, E = 0;
    gguf::Type type = gguf::Type::F32, act = gguf::Type::F32;
    bool per_slot = false;
    bool packed = false;             // w is the (E*N, K) rows in the layout Device::pack made
};

// ids (n_rows) i32 -> plan: offsets (E + 1), then the rows grouped by expert (ascending within one).
// Out-of-range ids are clamped, so every row belongs to exactly one expert.
struct ExpertPlan {
    static constexpr Kind KIND = Kind::EXPERT_PLAN;
    const int32_t* ids = nullptr;  // (n_rows)
    int32_t* plan = nullptr;       // (E + 1 + n_rows)
    int64_t n_rows = 0, E = 0;
};

// Causal GQA attention over a KV cache at positions start_pos .. start_pos+T-1; query head h reads KV
// head h / (H / Hkv). Strides are in elements, so V may be a view of K (MLA's latent cache).
struct Attention {
    static constexpr Kind KIND = Kind::ATTENTION;
    const float* q = nullptr;     // (T, H, Dk)
    const void* k = nullptr;      // (C, Hkv, Dk) `kv_type`
    const void* v = nullptr;      // (C, Hkv, Dv) `kv_type`, rows v_pos_stride apart
    const float* sinks = nullptr; // (H) or null: a logit per head that counts in each softmax sum only
    float* out = nullptr;         // (T, H, Dv)
    int64_t T = 0, H = 0, Hkv = 0, Dk = 0, Dv = 0;
    int64_t start_pos = 0;
    int64_t C = 0;                // cache rows: start_pos is clamped to C - T
    int64_t v_pos_stride = 0, v_head_stride = 0;
    gguf::Type kv_type = gguf::Type::F32;  // F32, F16, Q8_0 or Q4_0 (Device::kv_cache_types), both caches
    int64_t window = 0;           // > 0: the query at p sees keys p-window+1 .. p
    float scale = 1.0f;           // logits = scale . q.k
};

// Attention of a mixed batch through block tables (paged KV): token t is at position pos[t] of sequence
// seq[t] and sees that sequence's keys 0 .. pos[t] (or the window); the key at position p of sequence s
// is pool row block_table[s * MB + p / BS] * BS + p % BS. Scale, window and sinks as Attention.
// Positions, sequences and block ids are clamped into range (a bad table reads a wrong row, never past
// the pool).
struct PagedAttention {
    static constexpr Kind KIND = Kind::PAGED_ATTENTION;
    const float* q = nullptr;            // (T, H, Dk)
    const void* k = nullptr;             // (n_blocks * BS, Hkv, Dk) `kv_type`
    const void* v = nullptr;             // (n_blocks * BS, Hkv, Dv) `kv_type`
    const int32_t* pos = nullptr;        // (T)
    const int32_t* seq = nullptr;        // (T) rows of block_table
    const int32_t* block_table = nullptr;  // (S, MB) block ids
    const float* sinks = nullptr;        // (H) or null
    float* out = nullptr;                // (T, H, Dv)
    int64_t T = 0, H = 0, Hkv = 0, Dk = 0, Dv = 0;
    int64_t S = 0, MB = 0, BS = 0, n_blocks = 0;
    gguf::Type kv_type = gguf::Type::F32;  // F32, F16, Q8_0 or Q4_0 (Device::kv_cache_types), both pools
    int64_t window = 0;                  // > 0: the query at p sees keys p-window+1 .. p
    float scale = 1.0f;                  // logits = scale . q.k
    int64_t v_pos_stride = 0, v_head_stride = 0;  // 0: v is (rows, Hkv, Dv); else MLA's latent, v inside k's rows
};

// Rows x (T, row) f32 into pool rows slot[t], converted to the pool's type (F32, F16, or Q8_0 / Q4_0
// blocks: each row quantized as it is written, by ggml's reference rounding). The pool is written in
// place; the output is the slots written, which the engine orders the pool's readers after. A slot
// outside [0, n_rows) is skipped. It is the single-sequence cache's store too for block types.
struct KvStore {
    static constexpr Kind KIND = Kind::KV_STORE;
    const float* x = nullptr;        // (T, row)
    const int32_t* slot = nullptr;   // (T)
    void* pool = nullptr;            // (n_rows, row) `kv_type`, an input written in place
    int32_t* out = nullptr;          // (T) the slots
    int64_t T = 0, row = 0, n_rows = 0;
    gguf::Type kv_type = gguf::Type::F32;
};

// Indices (rows, k) i32 of the k largest values of each row of x (rows, n) f32, descending, ties by
// lower index, NaN last.
struct TopK {
    static constexpr Kind KIND = Kind::TOPK;
    const float* x = nullptr;  // (rows, n)
    int32_t* out = nullptr;    // (rows, k)
    int64_t rows = 0, n = 0, k = 0;
    bool ggml_order = false;   // ties as ggml's argsort (std::sort, descending) leaves them
};

// Rows of a table as f32 (embedding lookups; dequantization when ids is null): out[i] = table[ids[i]]
// for any table type, ids clamped to [0, V).
struct Rows {
    static constexpr Kind KIND = Kind::ROWS;
    const void* table = nullptr;    // (V, D) `type`
    const int32_t* ids = nullptr;   // (n) or null: rows 0 .. n-1
    float* out = nullptr;           // (n, D)
    int64_t n = 0, V = 0, D = 0;
    gguf::Type type = gguf::Type::F32;
    bool packed = false;            // table is in the layout Device::pack made (Device::rows_read_packed)
};

// Causal depthwise convolution over time that carries its last K-1 inputs:
// y[t][c] = sum_j w[c][j] . in[t+j][c] over in = concat(state, x); at start_pos 0 the state reads as zeros.
// Batch form (seq set): the tokens of several sequences, each one's contiguous and in position order;
// sequence seq[t] (clamped to [0, S)) carries row seq[t] of `states`, read and updated in place, and
// starts from zeros where its first token here is at position 0; out is y alone. Checkpoints, when
// load/save are set: a sequence whose first token here has load[t] >= 0 starts from row load[t] instead
// (a saved state), and after a token with save[t] >= 0 its state is also copied to row save[t].
struct Conv1d {
    static constexpr Kind KIND = Kind::CONV1D;
    const float* x = nullptr;      // (T, C)
    const float* state = nullptr;  // (K-1, C)
    const float* w = nullptr;      // (C, K)
    float* out = nullptr;          // (T + K-1, C): y, then the new state; batch form: (T, C) y
    int64_t T = 0, C = 0, K = 0, start_pos = 0;
    const int32_t *pos = nullptr, *seq = nullptr;  // batch form: (T) each
    float* states = nullptr;                       // batch form: (S, K-1, C), an input written in place
    int64_t S = 0;
    const int32_t *load = nullptr, *save = nullptr;  // batch form, optional: (T) rows of `states` or -1
};

// The gated delta rule (GatedDeltaNet, Kimi delta attention), per v head h with state S (Dv, Dk):
// S <- S diag(e^g_t); S <- S + beta_t (v_t - S k_t) k_t^T; o_t = scale . S q_t. At start_pos 0 the
// state reads as zeros. V head h reads q/k head h / (Hv/Hk) (interleave) or h % Hk.
// Batch form (seq set): as Conv1d's (checkpoints too), with `states` (S, Hv, Dv, Dk) and out o alone.
struct DeltaRule {
    static constexpr Kind KIND = Kind::DELTA_RULE;
    const float *q = nullptr, *k = nullptr;  // (T, Hk, Dk)
    const float* v = nullptr;                // (T, Hv, Dv)
    const float* g = nullptr;                // (T, Hv, Dg): Dg 1 (per head) or Dk (per key channel)
    const float* beta = nullptr;             // (T, Hv)
    const float* state = nullptr;            // (Hv, Dv, Dk)
    float* out = nullptr;                    // o (T, Hv, Dv), then the new state (Hv, Dv, Dk); batch form: o
    int64_t T = 0, Hk = 0, Hv = 0, Dk = 0, Dv = 0, Dg = 1, start_pos = 0;
    bool interleave = false;
    float scale = 1.0f;
    const int32_t *pos = nullptr, *seq = nullptr;  // batch form: (T) each
    float* states = nullptr;                       // batch form: (S, Hv, Dv, Dk), an input written in place
    int64_t S = 0;
    const int32_t *load = nullptr, *save = nullptr;  // batch form, optional: (T) rows of `states` or -1
};

// One device's implementation of one op: runs a launch over the filled argument struct. `host`: it
// runs host code (Device::run_host) and reads host addresses; else device addresses. `name`: the kernel
// it runs, as schedules and DEBUG=2 show it (null: the op's name).
struct Impl {
    void (*run)(Device& device, const void* args) = nullptr;
    bool host = true;
    const char* name = nullptr;
    explicit operator bool() const { return run != nullptr; }
};

// Makes an Impl from a function over the typed struct.
template <class A, void (*F)(Device&, const A&)> constexpr Impl impl(bool host = true, const char* name = nullptr) {
    return Impl{[](Device& d, const void* a) { F(d, *static_cast<const A*>(a)); }, host, name};
}

}  // namespace devices::ops
