// Reference CPU custom kernels (see ref_kernels_impl.h). Dequantization uses the gguf type table, so
// every type it knows works; the dot product is written so compilers vectorize it per ISA.
#include "engine/ref_kernels_impl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

namespace engine::ref_kernels {

namespace {

__attribute__((target_clones("avx512f", "avx2", "default")))
void axpy(float* y, float a, const float* x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

// Half rows convert with vcvtph2ps where the CPU has it (the reference converter is branchy and slow).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void f16_to_f32_row(const _Float16* h, float* out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = float(h[i]);
}
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void bf16_to_f32_row(const uint16_t* h, float* out, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits = uint32_t(h[i]) << 16;
        std::memcpy(out + i, &bits, 4);
    }
}

// Rows are taken in tiles: a tile's rows are dequantized once and every token's activations are read
// once per tile (not once per row), so prefill stays in cache.
void linear_dequant(const CustomArgs& a, int64_t begin, int64_t end) {
    constexpr int64_t TILE = 16;
    int64_t T = a.scalar[0], N = a.scalar[1], K = a.scalar[2];
    gguf::Type type = type_of(a.scalar[3]);
    auto x = static_cast<const float*>(a.in[0]);
    auto y = static_cast<float*>(a.out);
    thread_local std::vector<float> tile;
    tile.resize(size_t(TILE * K));
    const float* rows[TILE];
    for (int64_t r0 = begin; r0 < end; r0 += TILE) {
        int64_t n = std::min(TILE, end - r0);
        for (int64_t i = 0; i < n; i++) rows[i] = row_f32(a.in[1], type, r0 + i, K, tile.data() + i * K);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < n; i++) y[t * N + r0 + i] = dot(x + t * K, rows[i], K);
    }
}

void get_rows(const CustomArgs& a, int64_t begin, int64_t end) {
    int64_t V = a.scalar[0], D = a.scalar[1];
    auto ids = static_cast<const int32_t*>(a.in[1]);
    auto out = static_cast<float*>(a.out);
    for (int64_t i = begin; i < end; i++) {
        int64_t id = std::clamp<int64_t>(ids[i], 0, V - 1);
        const float* row = row_f32(a.in[0], type_of(a.scalar[2]), id, D, out + i * D);
        if (row != out + i * D) std::memcpy(out + i * D, row, size_t(D) * sizeof(float));
    }
}

void dequantize_rows(const CustomArgs& a, int64_t begin, int64_t end) {
    int64_t K = a.scalar[0];
    auto out = static_cast<float*>(a.out);
    for (int64_t r = begin; r < end; r++) {
        const float* row = row_f32(a.in[0], type_of(a.scalar[1]), r, K, out + r * K);
        if (row != out + r * K) std::memcpy(out + r * K, row, size_t(K) * sizeof(float));
    }
}

// A cache row as f32: f32 rows are used in place, f16 rows converted into `scratch`.
const float* cache_row(const void* base, bool is_f16, int64_t index, int64_t d, std::vector<float>& scratch) {
    if (!is_f16) return static_cast<const float*>(base) + index * d;
    auto h = static_cast<const uint16_t*>(base) + index * d;
    scratch.resize(size_t(d));
    f16_to_f32_row(reinterpret_cast<const _Float16*>(h), scratch.data(), d);
    return scratch.data();
}

void attention(const CustomArgs& a, int64_t begin, int64_t end) {
    int64_t H = a.scalar[1], Hkv = a.scalar[2], Dk = a.scalar[3], Dv = a.scalar[4], start = a.scalar[5];
    bool k16 = a.scalar[6] != 0, v16 = a.scalar[7] != 0;
    int64_t last_pos = a.scalar[8] - 1;  // cache capacity: never read past it, whatever start_pos says
    int64_t window = a.scalar[9];
    auto sinks = a.scalar[10] ? static_cast<const float*>(a.in[3]) : nullptr;
    float scale = float(a.fscalar[0]);
    auto q = static_cast<const float*>(a.in[0]);
    auto out = static_cast<float*>(a.out);
    int64_t group = H / Hkv;
    thread_local std::vector<float> acc, ks, vs;
    acc.resize(size_t(Dv));
    for (int64_t item = begin; item < end; item++) {
        int64_t t = item / H, h = item % H, kvh = h / group;
        const float* qv = q + item * Dk;
        std::fill(acc.begin(), acc.end(), 0.0f);
        float m = -INFINITY, l = 0.0f;
        int64_t n_keys = std::min(start + t, last_pos) + 1;  // causal: keys up to this query's own position
        int64_t first = window > 0 ? std::max<int64_t>(0, start + t - window + 1) : 0;
        for (int64_t p = first; p < n_keys; p++) {
            float s = scale * dot(qv, cache_row(a.in[1], k16, p * Hkv + kvh, Dk, ks), Dk);
            float m_new = std::max(m, s);
            float corr = std::exp(m - m_new), w = std::exp(s - m_new);
            l = l * corr + w;
            const float* vrow = cache_row(a.in[2], v16, p * Hkv + kvh, Dv, vs);
            for (int64_t i = 0; i < Dv; i++) acc[i] *= corr;
            axpy(acc.data(), w, vrow, Dv);
            m = m_new;
        }
        if (sinks) {  // the sink joins the denominator: rescale to the larger maximum first
            float m_new = std::max(m, sinks[h]), corr = std::exp(m - m_new);
            l = l * corr + std::exp(sinks[h] - m_new);
            for (int64_t i = 0; i < Dv; i++) acc[i] *= corr;
        }
        for (int64_t i = 0; i < Dv; i++) out[item * Dv + i] = acc[i] / l;
    }
}

void topk(const CustomArgs& a, int64_t begin, int64_t end) {
    int64_t N = a.scalar[0], k = a.scalar[1];
    auto x = static_cast<const float*>(a.in[0]);
    auto out = static_cast<int32_t*>(a.out);
    thread_local std::vector<int32_t> idx;
    idx.resize(size_t(N));
    for (int64_t r = begin; r < end; r++) {
        const float* row = x + r * N;
        std::iota(idx.begin(), idx.end(), 0);
        auto before = [row](int32_t i, int32_t j) {
            float a = row[i], b = row[j];
            bool an = std::isnan(a), bn = std::isnan(b);
            if (an != bn) return bn;  // numbers before NaN
            if (!an && a != b) return a > b;
            return i < j;
        };
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), before);
        std::copy(idx.begin(), idx.begin() + k, out + r * k);
    }
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default")))
float dot(const float* a, const float* b, int64_t n) {
    float acc[16] = {};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) acc[j] += a[i + j] * b[i + j];
    float s = 0.0f;
    for (; i < n; i++) s += a[i] * b[i];
    for (int j = 0; j < 16; j++) s += acc[j];
    return s;
}

const float* row_f32(const void* base, gguf::Type type, int64_t r, int64_t k, float* buf) {
    if (type == gguf::Type::F32) return static_cast<const float*>(base) + r * k;
    if (type == gguf::Type::F16) f16_to_f32_row(static_cast<const _Float16*>(base) + r * k, buf, k);
    else if (type == gguf::Type::BF16) bf16_to_f32_row(static_cast<const uint16_t*>(base) + r * k, buf, k);
    else {
        const gguf::TypeTraits& tr = gguf::type_traits(type);
        if (!tr.dequantize) throw Error(std::string("[engine] cpu kernel: no dequantizer for ") + tr.name);
        size_t row_bytes = size_t(k / tr.block_size) * tr.bytes_per_block;
        tr.dequantize(static_cast<const uint8_t*>(base) + size_t(r) * row_bytes, buf, k);
    }
    return buf;
}


const CustomKernel LINEAR_DEQUANT{"linear_dequant", linear_dequant, 1};
const CustomKernel GET_ROWS{"get_rows", get_rows, 1};
const CustomKernel DEQUANTIZE{"dequantize", dequantize_rows, 1};
const CustomKernel ATTENTION{"attention", attention, 1};
const CustomKernel TOPK{"topk", topk, 1};

}  // namespace engine::ref_kernels
