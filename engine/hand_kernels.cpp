// Glue from custom-kernel calls to the hand-written CPU kernels (devices/cpu/kernels/kernels.h): linear
// = quantize the activations to the weight's partner format, then the matmul over output rows; and
// causal GQA attention. Built only where those kernels exist; otherwise the reference kernels serve.
#include "engine/ref_kernels_impl.h"
#include "devices/env.h"

#ifdef TINYLLM_HAND_KERNELS  // set by engine/CMakeLists.txt when devices/cpu/kernels exists
#include "devices/cpu/kernels/kernels.h"
#endif

namespace engine::ref_kernels {

#ifdef TINYLLM_HAND_KERNELS

namespace {

// scalar {n_cols, activation type}: rows [b, e) of x (rows, n_cols) f32 -> activation rows.
void quantize(const CustomArgs& a, int64_t b, int64_t e) {
    ::cpu_kernels::quantize_rows(type_of(a.scalar[1]), static_cast<const float*>(a.in[0]), a.scalar[0], a.scalar[0], a.out, b, e);
}

// scalar {T, N, K, weight type}; in {activations, weights}.
void matmul(const CustomArgs& a, int64_t b, int64_t e) {
    ::cpu_kernels::Matmul m;
    m.type = type_of(a.scalar[3]);
    m.w = a.in[1];
    m.n_rows = a.scalar[1];
    m.n_cols = a.scalar[2];
    m.x = a.in[0];
    m.n_tokens = a.scalar[0];
    m.y = static_cast<float*>(a.out);
    m.y_stride = a.scalar[1];
    m.packed = a.scalar[4] != 0;
    ::cpu_kernels::matmul(m, b, e);
}

// The reference kernel's arguments (ref_kernels_impl.h), contiguous layouts.
void attention(const CustomArgs& a, int64_t b, int64_t e) {
    int64_t H = a.scalar[1], Hkv = a.scalar[2], Dk = a.scalar[3], Dv = a.scalar[4];
    ::cpu_kernels::Attention at;
    at.q = static_cast<const float*>(a.in[0]);
    at.q_token_stride = H * Dk, at.q_head_stride = Dk;
    at.kv_type = a.scalar[6] ? gguf::Type::F16 : gguf::Type::F32;
    at.k = a.in[1];
    at.k_pos_stride = Hkv * Dk, at.k_head_stride = Dk;
    at.v = a.in[2];
    at.v_pos_stride = Hkv * Dv, at.v_head_stride = Dv;
    at.out = static_cast<float*>(a.out);
    at.out_token_stride = H * Dv, at.out_head_stride = Dv;
    at.n_tokens = a.scalar[0];
    at.start_pos = std::min(a.scalar[5], a.scalar[8] - a.scalar[0]);  // never past the cache (C)
    at.n_head = H, at.n_head_kv = Hkv, at.head_dim_k = Dk, at.head_dim_v = Dv;
    at.scale = float(a.fscalar[0]);
    at.window = a.scalar[9];
    at.sinks = a.scalar[10] ? static_cast<const float*>(a.in[3]) : nullptr;
    ::cpu_kernels::attention(at, b, e);
}

}  // namespace

const CustomKernel HAND_QUANTIZE{"quantize_rows", quantize, 1};
const CustomKernel HAND_MATMUL{"matmul", matmul, ::cpu_kernels::kMatmulRowAlign};
const CustomKernel HAND_ATTENTION{"attention", attention, 1};

bool hand_kernels() { return true; }
bool hand_can_pack(gguf::Type weight, int64_t n_rows, int64_t n_cols) {
    return devices::env::cpu_pack() && ::cpu_kernels::active_isa() == ::cpu_kernels::Isa::AVX512 &&
           ::cpu_kernels::can_pack(weight, n_rows, n_cols);
}
void hand_pack(gguf::Type weight, const void* w, int64_t n_rows, int64_t n_cols, void* out, int64_t p0, int64_t p1) {
    ::cpu_kernels::pack_rows(weight, w, n_rows, n_cols, out, p0, p1);
}
gguf::Type hand_activation_type(gguf::Type weight) { return ::cpu_kernels::activation_type(weight); }
int64_t hand_activation_row_bytes(gguf::Type weight, int64_t n_cols) { return ::cpu_kernels::activation_row_bytes(weight, n_cols); }

#else

const CustomKernel HAND_QUANTIZE{"quantize_rows", nullptr, 1};
const CustomKernel HAND_MATMUL{"matmul", nullptr, 1};
const CustomKernel HAND_ATTENTION{"attention", nullptr, 1};

bool hand_kernels() { return false; }
bool hand_can_pack(gguf::Type, int64_t, int64_t) { return false; }
void hand_pack(gguf::Type, const void*, int64_t, int64_t, void*, int64_t, int64_t) {}
gguf::Type hand_activation_type(gguf::Type) { return gguf::Type::F32; }
int64_t hand_activation_row_bytes(gguf::Type, int64_t n_cols) { return 4 * n_cols; }

#endif

}  // namespace engine::ref_kernels
