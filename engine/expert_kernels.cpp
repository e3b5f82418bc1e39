// The expert-indexed matrix product on CPU: for one tile of one expert's weight rows, every (token,
// slot) row the plan assigns to that expert. Weight types go through the hand kernels when they are
// built (activations packed like ggml's), MXFP4 through its own Q8_0 dot product, the rest through
// reference dequantization and an f32 dot product.
#include "engine/experts_impl.h"
#include "engine/ref_kernels_impl.h"
#include "gguf/blocks.h"

#ifdef TINYLLM_HAND_KERNELS  // set by engine/CMakeLists.txt when devices/cpu/kernels exists
#include "devices/cpu/kernels/kernels.h"
#endif

#include <algorithm>
#include <cstring>
#include <vector>

namespace engine::experts {

namespace {

using ref_kernels::type_of;

int64_t bytes_per_row(gguf::Type t, int64_t n) { return int64_t(*gguf::row_bytes(t, n)); }

// Per-thread scratch, grown on demand.
template <class T> T* scratch(std::vector<T>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
}

void matmul(const CustomArgs& a, int64_t begin, int64_t end) {
    const int64_t k = a.scalar[1], N = a.scalar[2], K = a.scalar[3], E = a.scalar[7];
    const gguf::Type type = type_of(a.scalar[4]), act = type_of(a.scalar[6]);
    const bool per_slot = a.scalar[5] != 0;
    const auto x = static_cast<const uint8_t*>(a.in[0]);
    const auto w = static_cast<const uint8_t*>(a.in[1]);
    const auto offsets = static_cast<const int32_t*>(a.in[2]);
    const int32_t* rows = offsets + E + 1;
    const auto out = static_cast<float*>(a.out);
    const int64_t w_row = bytes_per_row(type, K), x_row = bytes_per_row(act, K);
    thread_local std::vector<float> ybuf, tile_f32;
    thread_local std::vector<uint8_t> xbuf;
    thread_local std::vector<const uint8_t*> xptr;

    for (int64_t item = begin; item < end; item++) {
        const int64_t e = item % E, r0 = item / E * ROW_TILE, r1 = std::min(N, r0 + ROW_TILE), n = r1 - r0;
        const int64_t count = offsets[e + 1] - offsets[e];
        if (count == 0) continue;
        const int32_t* group = rows + offsets[e];
        const uint8_t* w_tile = w + (e * N + r0) * w_row;
        auto x_at = [&](int64_t j) { return x + (per_slot ? group[j] : group[j] / k) * x_row; };
        float* y = scratch(ybuf, size_t(count * n));  // (count, n)

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
                for (int64_t r = 0; r < n; r++) y[j * n + r] = ref_kernels::dot(xf, wf + r * K, K);
            }
        } else {
#ifdef TINYLLM_HAND_KERNELS
            uint8_t* xs = scratch(xbuf, size_t(count * x_row));
            for (int64_t j = 0; j < count; j++) std::memcpy(xs + j * x_row, x_at(j), size_t(x_row));
            ::cpu_kernels::Matmul m;
            m.type = type;
            m.w = w_tile;
            m.n_rows = n;
            m.n_cols = K;
            m.x = xs;
            m.n_tokens = count;
            m.y = y;
            m.y_stride = n;
            ::cpu_kernels::matmul(m, 0, n);
#else
            throw Error("[engine] linear_experts: activations packed as " + std::string(gguf::type_name(act)) +
                        " need the hand-written CPU kernels");
#endif
        }
        for (int64_t j = 0; j < count; j++) std::memcpy(out + int64_t(group[j]) * N + r0, y + j * n, size_t(n) * sizeof(float));
    }
}

void quantize(const CustomArgs& a, int64_t begin, int64_t end) {
    const int64_t K = a.scalar[0];
    const gguf::Type act = type_of(a.scalar[1]);
    const gguf::TypeTraits& tr = gguf::type_traits(act);
    const int64_t bytes = bytes_per_row(act, K);
    auto x = static_cast<const float*>(a.in[0]);
    auto out = static_cast<uint8_t*>(a.out);
    for (int64_t r = begin; r < end; r++) tr.quantize(x + r * K, out + r * bytes, K);
}

}  // namespace

const CustomKernel MATMUL{"matmul_experts", matmul, 1};
const CustomKernel QUANTIZE{"quantize_experts", quantize, 8};

gguf::Type activation_type(gguf::Type weight) {
    if (weight == gguf::Type::MXFP4) return gguf::Type::Q8_0;
    return ref_kernels::hand_kernels() ? ref_kernels::hand_activation_type(weight) : gguf::Type::F32;
}

Tensor pack_activations(const Tensor& x, gguf::Type act) {
    if (act == gguf::Type::F32) return x;
    Dim R = x.dim(0), K = x.dim(1);
    if (K.value() % gguf::type_traits(act).block_size)
        throw Error("[engine] linear_experts: " + K.str() + " columns do not fill " + std::string(gguf::type_name(act)) + " blocks");
    CustomCall q;
    // The hand kernels' quantizers are bit-exact with ggml's and fast; gguf's reference ones serve without them.
    q.kernel = ref_kernels::hand_kernels() ? &ref_kernels::HAND_QUANTIZE : &QUANTIZE;
    q.inputs = {x};
    q.out_shape = {R, Dim(bytes_per_row(act, K.value()))};
    q.out_dtype = u8;
    q.scalars = {K, int64_t(act)};
    q.n_work = R;
    return custom(q);
}

}  // namespace engine::experts
