// Scalar matrix products: F32/F16/BF16 weights (dot products accumulated in double, as ggml's scalar
// code does) and every quantized hand-kernel type through its codes-and-scales view, with exact
// integer sums per group.
#include "devices/cpu/kernels/scalar_impl.h"

#include <cstring>

namespace cpu_kernels::scalar {

using namespace gguf;

void split_activation(Type act, const void* row, int64_t n_cols, int group, const ActRow& out) {
    const int64_t n_groups = n_cols / group;
    if (act == Type::Q8_K) {
        auto b = static_cast<const block_q8_K*>(row);
        for (int64_t i = 0; i < n_cols / QK_K; i++) std::memcpy(out.q + i * QK_K, b[i].qs, QK_K);
        for (int64_t g = 0; g < n_groups; g++) {
            const block_q8_K& blk = b[g * group / QK_K];
            const int first = static_cast<int>(g * group % QK_K) / 16;
            int32_t sum = 0;
            for (int j = 0; j < group / 16; j++) sum += blk.bsums[first + j];
            out.d[g] = blk.d, out.sum[g] = sum, out.s[g] = blk.d * static_cast<float>(sum);
        }
        return;
    }
    // Q8_0 and Q8_1: one group per block
    const bool q8_1 = act == Type::Q8_1;
    const size_t block_bytes = q8_1 ? sizeof(block_q8_1) : sizeof(block_q8_0);
    for (int64_t g = 0; g < n_groups; g++) {
        auto blk = static_cast<const uint8_t*>(row) + g * block_bytes;
        uint16_t d;
        std::memcpy(&d, blk, 2);
        const int8_t* qs = reinterpret_cast<const int8_t*>(blk + (q8_1 ? 4 : 2));
        std::memcpy(out.q + g * 32, qs, 32);
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) sum += qs[j];
        out.d[g] = fp16_to_f32(d), out.sum[g] = sum;
        if (q8_1) {
            uint16_t s;
            std::memcpy(&s, blk + 2, 2);
            out.s[g] = fp16_to_f32(s);
        } else {
            out.s[g] = out.d[g] * static_cast<float>(sum);
        }
    }
}

namespace {

float to_f32(Type t, const void* p, int64_t i) {
    if (t == Type::F32) return static_cast<const float*>(p)[i];
    const uint16_t h = static_cast<const uint16_t*>(p)[i];
    return t == Type::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
}

void matmul_float(const Matmul& m, int64_t row_begin, int64_t row_end) {
    const int64_t elem = m.type == Type::F32 ? 4 : 2;  // weights and activations share the type
    for (int64_t r = row_begin; r < row_end; r++) {
        const void* w = static_cast<const uint8_t*>(m.w) + r * m.n_cols * elem;
        for (int64_t t = 0; t < m.n_tokens; t++) {
            const void* x = static_cast<const uint8_t*>(m.x) + t * m.n_cols * elem;
            double sum = 0.0;
            for (int64_t c = 0; c < m.n_cols; c++) sum += static_cast<double>(to_f32(m.type, w, c) * to_f32(m.type, x, c));
            m.y[t * m.y_stride + r] = static_cast<float>(sum);
        }
    }
}

void matmul_quant(const Matmul& m, int64_t row_begin, int64_t row_end) {
    const gguf::CodeLayout& layout = *quant_layout(m.type);
    const DecodeBlockFn decode = decode_block_fn(m.type);
    const TypeTraits& traits = type_traits(m.type);
    const Type act = activation_type(m.type);
    const int64_t K = m.n_cols, n_groups = K / layout.group, block = traits.block_size;
    const int64_t groups_per_block = block / layout.group;
    const size_t w_row_bytes = *row_bytes(m.type, K), x_row_bytes = *row_bytes(act, K);

    // scratch: the split activations of every token, then one decoded weight row
    const size_t act_bytes = K + 16 * n_groups, row_bytes_needed = K + 8 * n_groups;
    auto mem = static_cast<uint8_t*>(scratch(ScratchSlot::ACTIVATIONS, m.n_tokens * act_bytes + row_bytes_needed));
    auto act_row = [&](int64_t t) {
        uint8_t* p = mem + t * act_bytes;
        return ActRow{reinterpret_cast<int8_t*>(p), reinterpret_cast<float*>(p + K),
                      reinterpret_cast<int32_t*>(p + K + 4 * n_groups), reinterpret_cast<float*>(p + K + 8 * n_groups)};
    };
    for (int64_t t = 0; t < m.n_tokens; t++)
        split_activation(act, static_cast<const uint8_t*>(m.x) + t * x_row_bytes, K, layout.group, act_row(t));
    uint8_t* u = mem + m.n_tokens * act_bytes;
    auto s = reinterpret_cast<float*>(u + K);
    float* o = s + n_groups;

    for (int64_t r = row_begin; r < row_end; r++) {
        const uint8_t* w = static_cast<const uint8_t*>(m.w) + r * w_row_bytes;
        for (int64_t b = 0; b < K / block; b++)
            decode(w + b * traits.bytes_per_block, u + b * block, s + b * groups_per_block, o + b * groups_per_block);
        for (int64_t t = 0; t < m.n_tokens; t++) {
            const ActRow x = act_row(t);
            float sum = 0.0f;
            for (int64_t g = 0; g < n_groups; g++) {
                int32_t dot = 0;
                for (int j = 0; j < layout.group; j++) {
                    const int64_t c = g * layout.group + j;
                    dot += (u[c] - layout.zero) * x.q[c];
                }
                sum += s[g] * x.d[g] * static_cast<float>(dot);
                if (layout.has_min) sum += o[g] * x.s[g];
            }
            m.y[t * m.y_stride + r] = sum;
        }
    }
}

}  // namespace

void matmul(const Matmul& m, int64_t row_begin, int64_t row_end) {
    if (m.type == Type::F32 || m.type == Type::F16 || m.type == Type::BF16)
        matmul_float(m, row_begin, row_end);
    else
        matmul_quant(m, row_begin, row_end);
}

}  // namespace cpu_kernels::scalar

namespace cpu_kernels::scalar {
const Kernels kernels = {quantize_rows, matmul, attention, swiglu, rms_norm};
}  // namespace cpu_kernels::scalar
