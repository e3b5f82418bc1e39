// Mixture-of-experts products (ggml's mul_mat_id) and ggml-ordered top-k. A plan groups the (token,
// slot) rows by expert once per layer; each product then reads only the selected experts' weights, and
// every expert's weight rows are streamed once for all the tokens that chose it.
#include "engine/experts_impl.h"
#include "engine/ref_kernels_impl.h"

#include <algorithm>
#include <numeric>

namespace engine {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(std::string("[engine] ") + op + ": " + what); }

int64_t weight_type_id(DType d) { return d.weight_type() ? int64_t(*d.weight_type()) : -1; }

// ggml's argsort is std::sort with a descending comparator; top-k is its first k entries. For more
// than 16 elements std::sort is not stable, so ties can only be broken like llama.cpp by the same call.
void top_k_ggml(const CustomArgs& a, int64_t begin, int64_t end) {
    int64_t n = a.scalar[0], k = a.scalar[1];
    auto x = static_cast<const float*>(a.in[0]);
    auto out = static_cast<int32_t*>(a.out);
    thread_local std::vector<int32_t> idx;
    idx.resize(size_t(n));
    for (int64_t r = begin; r < end; r++) {
        const float* row = x + r * n;
        std::iota(idx.begin(), idx.end(), 0);
        std::sort(idx.begin(), idx.end(), [row](int32_t i, int32_t j) { return row[i] > row[j]; });
        std::copy(idx.begin(), idx.begin() + k, out + r * k);
    }
}

const CustomKernel TOP_K_GGML{"top_k_ggml", top_k_ggml, 64};

}  // namespace

namespace experts {

// ids (T, k) i32 -> plan: offsets[E + 1], then the rows t*k + slot grouped by expert (ascending within
// an expert). Out-of-range ids are clamped, so every row belongs to exactly one expert.
void plan(const CustomArgs& a, int64_t, int64_t) {
    int64_t n_rows = a.scalar[0], E = a.scalar[1];
    auto ids = static_cast<const int32_t*>(a.in[0]);
    auto offsets = static_cast<int32_t*>(a.out);
    int32_t* rows = offsets + E + 1;
    std::fill(offsets, offsets + E + 1, 0);
    auto expert = [&](int64_t r) { return std::clamp<int64_t>(ids[r], 0, E - 1); };
    for (int64_t r = 0; r < n_rows; r++) offsets[expert(r) + 1]++;
    for (int64_t e = 0; e < E; e++) offsets[e + 1] += offsets[e];
    thread_local std::vector<int32_t> fill;
    fill.assign(offsets, offsets + E);
    for (int64_t r = 0; r < n_rows; r++) rows[fill[size_t(expert(r))]++] = int32_t(r);
}

const CustomKernel PLAN{"expert_plan", plan, 1};

}  // namespace experts

Tensor top_k_ggml(const Tensor& x_in, int k) {
    Tensor x = x_in.cast(f32);
    Dim n = x.dim(-1);
    if (k < 1 || k > n.min()) fail("top_k_ggml", "k = " + std::to_string(k) + " outside [1, " + n.str() + "]");
    Shape out_shape = x.shape();
    out_shape.back() = k;
    Dim rows = numel(Shape(x.shape().begin(), x.shape().end() - 1));
    CustomCall call;
    call.kernel = &TOP_K_GGML;
    call.inputs = {x.reshape({rows, n})};
    call.out_shape = {rows, k};
    call.out_dtype = i32;
    call.scalars = {n, k};
    call.n_work = rows;
    return custom(call).reshape(out_shape);
}

ExpertSelection select_experts(const Tensor& ids, int n_expert) {
    if (ids.ndim() != 2 || !ids.dtype().is_int()) fail("select_experts", "ids must be (tokens, k) integers, got " + shape_str(ids.shape()));
    if (n_expert < 1) fail("select_experts", "needs at least one expert");
    ExpertSelection s;
    s.ids = ids.cast(i32);
    s.n_expert = n_expert;
    Dim n_rows = ids.dim(0) * ids.dim(1);
    CustomCall call;
    call.kernel = &experts::PLAN;
    call.inputs = {s.ids.reshape({n_rows})};
    call.out_shape = {n_expert + 1 + n_rows};
    call.out_dtype = i32;
    call.scalars = {n_rows, n_expert};
    call.n_work = 1;
    s.plan = custom(call);
    return s;
}

Tensor linear_experts(const Tensor& x_in, const Tensor& w, const ExpertSelection& sel) {
    if (!sel.plan.defined()) fail("linear_experts", "no expert selection");
    if (w.ndim() != 3) fail("linear_experts", "expert weights must be (experts, rows, cols), got " + shape_str(w.shape()));
    const int64_t type = weight_type_id(w.dtype());
    if (type < 0) fail("linear_experts", "unsupported weight dtype " + w.dtype().name());
    if (w.dtype().is_quantized() && !gguf::type_traits(w.dtype().block).dequantize)
        fail("linear_experts", "no dequantizer for " + w.dtype().name() + " yet");
    Dim T = sel.ids.dim(0), k = sel.ids.dim(1), E = w.dim(0), N = w.dim(1), K = w.dim(2);
    if (E.value() != sel.n_expert) fail("linear_experts", "weights hold " + E.str() + " experts, the selection " + std::to_string(sel.n_expert));
    if (!same(x_in.dim(-1), K)) fail("linear_experts", "input " + shape_str(x_in.shape()) + " does not match weights " + shape_str(w.shape()));
    // x is (T, K): one row per token, used by each of its experts; or (T, k, K): one row per slot.
    bool per_slot = x_in.ndim() == 3;
    if (!(x_in.ndim() == 2 && same(x_in.dim(0), T)) && !(per_slot && same(x_in.dim(0), T) && same(x_in.dim(1), k)))
        fail("linear_experts", "input " + shape_str(x_in.shape()) + " is neither (tokens, cols) nor (tokens, k, cols) for ids " +
                                   shape_str(sel.ids.shape()));
    Dim n_x = per_slot ? T * k : T;
    gguf::Type act = experts::activation_type(gguf::Type(type));
    Tensor xa = experts::pack_activations(x_in.cast(f32).reshape({n_x, K}), act);
    int64_t tiles = (N.value() + experts::ROW_TILE - 1) / experts::ROW_TILE;
    CustomCall call;
    call.kernel = &experts::MATMUL;
    call.inputs = {xa, w, sel.plan};
    call.out_shape = {T, k, N};
    call.scalars = {T, k, N, K, type, int64_t(per_slot), int64_t(act), E};
    call.n_work = tiles * E.value();  // tile-major: every thread gets a share of each selected expert
    return custom(call);
}

}  // namespace engine
