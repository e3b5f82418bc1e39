// Table rows as f32 (embedding lookups, dequantization) and top-k over rows: the hot ops ROWS and TOPK
// on the CPU, for every type the gguf table can dequantize.
#include "devices/cpu/kernels/kernels_impl.h"
#include "devices/cpu/kernels/ops_impl.h"
#include "gguf/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace cpu_kernels {

namespace {

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

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default")))
float dot_f32(const float* a, const float* b, int64_t n) {
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
        if (!tr.dequantize) throw std::invalid_argument(std::string("[rows] no dequantizer for ") + tr.name);
        size_t row_bytes = size_t(k / tr.block_size) * tr.bytes_per_block;
        tr.dequantize(static_cast<const uint8_t*>(base) + size_t(r) * row_bytes, buf, k);
    }
    return buf;
}


void rows(const ops::Rows& a, int64_t begin, int64_t end) {
    thread_local std::vector<uint8_t> unpacked;  // a packed table's row back in GGUF form
    if (a.packed) unpacked.resize(bytes_per_row(a.type, a.D));
    for (int64_t i = begin; i < end; i++) {
        const int64_t id = a.ids ? std::clamp<int64_t>(a.ids[i], 0, a.V - 1) : i;
        float* o = a.out + i * a.D;
        if (a.packed) unpack_rows(a.type, a.table, a.V, a.D, unpacked.data(), id, id + 1);
        const float* row = a.packed ? row_f32(unpacked.data(), a.type, 0, a.D, o) : row_f32(a.table, a.type, id, a.D, o);
        if (row != o) std::memcpy(o, row, size_t(a.D) * sizeof(float));
    }
}

void topk(const ops::TopK& a, int64_t begin, int64_t end) {
    thread_local std::vector<int32_t> idx;
    idx.resize(size_t(a.n));
    for (int64_t r = begin; r < end; r++) {
        const float* row = a.x + r * a.n;
        std::iota(idx.begin(), idx.end(), 0);
        if (a.ggml_order) {
            // ggml's argsort is std::sort with a descending comparator; top-k is its first k entries. For more
            // than 16 elements std::sort is not stable, so ties can only be broken like llama.cpp by the same call.
            std::sort(idx.begin(), idx.end(), [row](int32_t i, int32_t j) { return row[i] > row[j]; });
        } else {
            auto before = [row](int32_t i, int32_t j) {
                float x = row[i], y = row[j];
                bool xn = std::isnan(x), yn = std::isnan(y);
                if (xn != yn) return yn;  // numbers before NaN
                if (!xn && x != y) return x > y;
                return i < j;
            };
            std::partial_sort(idx.begin(), idx.begin() + a.k, idx.end(), before);
        }
        std::copy(idx.begin(), idx.begin() + a.k, a.out + r * a.k);
    }
}

}  // namespace cpu_kernels
