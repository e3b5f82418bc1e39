// The expert-indexed matrix product on CPU (ops::LinearExperts): for one tile of one expert's weight
// rows, every (token, slot) row the plan assigns to that expert. Weight types go through the hand
// matmul (activations packed like ggml's), MXFP4 through its own Q8_0 dot product, F32 activations
// through dequantized rows and an f32 dot product.
#include "devices/cpu/kernels/kernels.h"
#include "devices/cpu/kernels/ops_impl.h"
#include "gguf/blocks.h"
#include "gguf/gguf.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace cpu_kernels {

namespace {

int64_t bytes_per_row(gguf::Type t, int64_t n) { return int64_t(*gguf::row_bytes(t, n)); }

// Per-thread scratch, grown on demand.
template <class T> T* scratch(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

}  // namespace

void expert_plan(const ops::ExpertPlan& a) {
    const int64_t E = a.E;
    int32_t* offsets = a.plan;
    int32_t* rows = offsets + E + 1;
    std::fill(offsets, offsets + E + 1, 0);
    auto expert = [&](int64_t r) { return std::clamp<int64_t>(a.ids[r], 0, E - 1); };
    for (int64_t r = 0; r < a.n_rows; r++) offsets[expert(r) + 1]++;
    for (int64_t e = 0; e < E; e++) offsets[e + 1] += offsets[e];
    thread_local std::vector<int32_t> fill;
    fill.assign(offsets, offsets + E);
    for (int64_t r = 0; r < a.n_rows; r++) rows[fill[size_t(expert(r))]++] = int32_t(r);
}

void linear_experts(const ops::LinearExperts& a, int64_t begin, int64_t end) {
    const int64_t k = a.k, N = a.N, K = a.K, E = a.E;
    const gguf::Type type = a.type, act = a.act;
    const bool per_slot = a.per_slot;
    const auto x = static_cast<const uint8_t*>(a.x);
    const auto w = static_cast<const uint8_t*>(a.w);
    const int32_t* offsets = a.plan;
    const int32_t* rows = offsets + E + 1;
    float* const out = a.out;
    const int64_t w_row = bytes_per_row(type, K), x_row = bytes_per_row(act, K);
    thread_local std::vector<float> ybuf, tile_f32;
    thread_local std::vector<uint8_t> xbuf;
    thread_local std::vector<const uint8_t*> xptr;

    for (int64_t item = begin; item < end; item++) {
        const int64_t e = item % E, r0 = item / E * kExpertRowTile, r1 = std::min(N, r0 + kExpertRowTile), n = r1 - r0;
        const int64_t count = offsets[e + 1] - offsets[e];
        if (count == 0) continue;
        const int32_t* group = rows + offsets[e];
        const uint8_t* w_tile = w + (e * N + r0) * w_row;
        auto x_at = [&](int64_t j) { return x + (per_slot ? group[j] : group[j] / k) * x_row; };
        float* y = scratch(ybuf, size_t(count * n));  // (count, n)

        if (a.packed && (act == gguf::Type::F32 || type == gguf::Type::MXFP4))
            throw Error("[cpu_kernels] linear_experts: packed " + std::string(gguf::type_name(type)) + " experts with " +
                        std::string(gguf::type_name(act)) + " activations");
        if (type == gguf::Type::MXFP4 && act == gguf::Type::Q8_0) {
            const uint8_t** xs = scratch(xptr, size_t(count));
            for (int64_t j = 0; j < count; j++) xs[j] = x_at(j);
            mxfp4_q8_0_tile(w_tile, w_row, n, xs, count, K / gguf::QK_MXFP4, y);
        } else if (act == gguf::Type::F32) {
            const float* wf = reinterpret_cast<const float*>(w_tile);
            if (type != gguf::Type::F32) {
                float* t = scratch(tile_f32, size_t(n * K));
                for (int64_t r = 0; r < n; r++) gguf::type_traits(type).dequantize(w_tile + r * w_row, t + r * K, K);
                wf = t;
            }
            for (int64_t j = 0; j < count; j++) {
                auto xf = reinterpret_cast<const float*>(x_at(j));
                for (int64_t r = 0; r < n; r++) y[j * n + r] = dot_f32(xf, wf + r * K, K);
            }
        } else {
            uint8_t* xs = scratch(xbuf, size_t(count * x_row));
            for (int64_t j = 0; j < count; j++) std::memcpy(xs + j * x_row, x_at(j), size_t(x_row));
            Matmul m;
            m.type = type;
            m.w = w_tile;  // packed: a panel takes its rows' bytes, and a tile of rows is one panel
            m.packed = a.packed;
            m.n_rows = n;
            m.n_cols = K;
            m.x = xs;
            m.n_tokens = count;
            m.y = y;
            m.y_stride = n;
            matmul(m, 0, n);
        }
        for (int64_t j = 0; j < count; j++) std::memcpy(out + int64_t(group[j]) * N + r0, y + j * n, size_t(n) * sizeof(float));
    }
}

}  // namespace cpu_kernels
