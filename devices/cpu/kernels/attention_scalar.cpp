// Scalar attention over a KV cache (F32, F16, Q8_0, Q4_0): causal, grouped-query, optional sliding
// window and per-head sinks, with an online (streaming) softmax so one pass over the keys suffices.
#include "devices/cpu/kernels/scalar_impl.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace cpu_kernels::scalar {

using gguf::Type;

namespace {

// Value i of a cache row as ggml dequantizes it (Q8_0: d·q; Q4_0: d·(u − 8), value i of a block in the
// low nibble of byte i, value i + 16 in the high nibble of byte i).
float load(Type t, const uint8_t* row, int64_t i) {
    switch (t) {
        case Type::F32: return reinterpret_cast<const float*>(row)[i];
        case Type::F16: return fp16_to_f32(reinterpret_cast<const uint16_t*>(row)[i]);
        case Type::Q8_0: {
            const auto& b = reinterpret_cast<const gguf::block_q8_0*>(row)[i / 32];
            return float(b.qs[i % 32]) * fp16_to_f32(b.d);
        }
        default: {
            const auto& b = reinterpret_cast<const gguf::block_q4_0*>(row)[i / 32];
            const int u = i % 32 < 16 ? b.qs[i % 32] & 15 : b.qs[i % 32 - 16] >> 4;
            return float(u - 8) * fp16_to_f32(b.d);
        }
    }
}

}  // namespace

void attention(const Attention& a, int64_t pair_begin, int64_t pair_end) {
    const int64_t group = a.n_head / a.n_head_kv;
    const KvView K = key_view(a), V = value_view(a);
    auto acc = static_cast<float*>(scratch(ScratchSlot::TILE, sizeof(float) * a.head_dim_v));
    for (int64_t pair = pair_begin; pair < pair_end; pair++) {
        const int64_t t = a.n_tokens - 1 - pair / a.n_head, h = pair % a.n_head, hk = h / group;
        const int64_t pos = query_pos(a, t);
        const int64_t first = a.window > 0 ? std::max<int64_t>(0, pos - a.window + 1) : 0;
        const float* q = a.q + t * a.q_token_stride + h * a.q_head_stride;

        float max = -std::numeric_limits<float>::infinity(), sum = 0.0f;
        std::fill(acc, acc + a.head_dim_v, 0.0f);
        for (int64_t j = first; j <= pos; j++) {
            const int64_t row = key_row(a, t, j);
            const uint8_t* k = K.at(row, hk);
            float logit = 0.0f;
            for (int64_t c = 0; c < a.head_dim_k; c++) logit += q[c] * load(a.kv_type, k, c);
            logit *= a.scale;
            if (logit > max) {  // rescale what was accumulated against the old maximum
                const float correction = std::exp(max - logit);
                sum *= correction;
                for (int64_t c = 0; c < a.head_dim_v; c++) acc[c] *= correction;
                max = logit;
            }
            const float p = std::exp(logit - max);
            sum += p;
            const uint8_t* v = V.at(row, hk);
            for (int64_t c = 0; c < a.head_dim_v; c++) acc[c] += p * load(a.kv_type, v, c);
        }
        if (a.sinks) {  // the sink joins the softmax denominator but carries no value
            const float sink = a.sinks[h], new_max = std::max(max, sink);
            const float correction = std::exp(max - new_max);
            sum = sum * correction + std::exp(sink - new_max);
            for (int64_t c = 0; c < a.head_dim_v; c++) acc[c] *= correction;
        }
        float* out = a.out + t * a.out_token_stride + h * a.out_head_stride;
        for (int64_t c = 0; c < a.head_dim_v; c++) out[c] = acc[c] / sum;
    }
}

}  // namespace cpu_kernels::scalar
