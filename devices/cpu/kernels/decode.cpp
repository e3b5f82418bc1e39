// The common "codes and scales" view of each quantized weight type (kernels.h): its layout and
// a reference decoder per block. s·(u − zero) + o reproduces ggml's dequantization bit for bit
// (same products in the same order). Block layouts: ../shared/golden/quants/README.md.
#include "devices/cpu/kernels/kernels_impl.h"

#include <cassert>
#include <cstring>

namespace cpu_kernels {

using namespace gguf;

float fp16_to_f32(uint16_t h) { return gguf::f16_to_f32(h); }

namespace {

const int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void decode_q4_0(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q4_0*>(block);
    for (int j = 0; j < 16; j++) u[j] = b->qs[j] & 15, u[j + 16] = b->qs[j] >> 4;
    s[0] = fp16_to_f32(b->d), o[0] = 0.0f;
}

void decode_q4_1(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q4_1*>(block);
    for (int j = 0; j < 16; j++) u[j] = b->qs[j] & 15, u[j + 16] = b->qs[j] >> 4;
    s[0] = fp16_to_f32(b->d), o[0] = fp16_to_f32(b->m);
}

// The fifth bit of element j is bit j of qh.
void decode_q5_bits(const uint8_t* qs, const uint8_t* qh_bytes, uint8_t* u) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
    for (int j = 0; j < 16; j++) {
        u[j] = (qs[j] & 15) | (((qh >> j) << 4) & 16);
        u[j + 16] = (qs[j] >> 4) | ((qh >> (j + 12)) & 16);
    }
}

void decode_q5_0(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q5_0*>(block);
    decode_q5_bits(b->qs, b->qh, u);
    s[0] = fp16_to_f32(b->d), o[0] = 0.0f;
}

void decode_q5_1(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q5_1*>(block);
    decode_q5_bits(b->qs, b->qh, u);
    s[0] = fp16_to_f32(b->d), o[0] = fp16_to_f32(b->m);
}

void decode_q8_0(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q8_0*>(block);
    for (int j = 0; j < 32; j++) u[j] = static_cast<uint8_t>(b->qs[j] + 128);
    s[0] = fp16_to_f32(b->d), o[0] = 0.0f;
}

void decode_iq4_nl(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_iq4_nl*>(block);
    for (int j = 0; j < 16; j++) {
        u[j] = static_cast<uint8_t>(kIq4nlValues[b->qs[j] & 15] + 128);
        u[j + 16] = static_cast<uint8_t>(kIq4nlValues[b->qs[j] >> 4] + 128);
    }
    s[0] = fp16_to_f32(b->d), o[0] = 0.0f;
}

void decode_iq4_xs(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_iq4_xs*>(block);
    float d = fp16_to_f32(b->d);
    for (int ib = 0; ib < 8; ib++) {
        int ls = ((b->scales_l[ib / 2] >> 4 * (ib % 2)) & 15) | (((b->scales_h >> 2 * ib) & 3) << 4);
        s[ib] = d * (ls - 32), o[ib] = 0.0f;
        const uint8_t* qs = b->qs + 16 * ib;
        for (int j = 0; j < 16; j++) {
            u[32 * ib + j] = static_cast<uint8_t>(kIq4nlValues[qs[j] & 15] + 128);
            u[32 * ib + j + 16] = static_cast<uint8_t>(kIq4nlValues[qs[j] >> 4] + 128);
        }
    }
}

// q2_K and q3_K: element 128h + 32(shift/2) + 16k + l takes bits `shift` of qs[32h + 16k + l].
void decode_q2_K(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q2_K*>(block);
    float d = fp16_to_f32(b->d), dmin = fp16_to_f32(b->dmin);
    for (int i = 0; i < QK_K; i++) {
        int h = i / 128, shift = 2 * ((i % 128) / 32), k = (i % 32) / 16, l = i % 16;
        u[i] = (b->qs[32 * h + 16 * k + l] >> shift) & 3;
    }
    for (int g = 0; g < 16; g++) s[g] = d * (b->scales[g] & 15), o[g] = -(dmin * (b->scales[g] >> 4));
}

void decode_q3_K(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q3_K*>(block);
    float d = fp16_to_f32(b->d);
    for (int i = 0; i < QK_K; i++) {
        int h = i / 128, shift = 2 * ((i % 128) / 32), k = (i % 32) / 16, l = i % 16;
        int low = (b->qs[32 * h + 16 * k + l] >> shift) & 3;
        bool high = b->hmask[16 * k + l] & (1 << (4 * h + shift / 2));
        u[i] = static_cast<uint8_t>(low + (high ? 4 : 0));  // (low − 4·!high) + 4
    }
    const uint8_t* sc = b->scales;
    for (int g = 0; g < 16; g++) {
        int low = g < 8 ? sc[g] & 15 : sc[g - 8] >> 4;
        int scale = low | (((sc[8 + g % 4] >> (2 * (g / 4))) & 3) << 4);
        s[g] = d * (scale - 32), o[g] = 0.0f;
    }
}

// q4_K / q5_K: 6-bit scale and min of sub-block j, packed in 12 bytes.
void k4_scale_min(const uint8_t* s, int j, int& sc, int& m) {
    if (j < 4) {
        sc = s[j] & 63, m = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

void decode_q4_K(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q4_K*>(block);
    float d = fp16_to_f32(b->d), dmin = fp16_to_f32(b->dmin);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) u[64 * c + l] = b->qs[32 * c + l] & 15, u[64 * c + 32 + l] = b->qs[32 * c + l] >> 4;
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale_min(b->scales, j, sc, m);
        s[j] = d * sc, o[j] = -(dmin * m);
    }
}

void decode_q5_K(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q5_K*>(block);
    float d = fp16_to_f32(b->d), dmin = fp16_to_f32(b->dmin);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            u[64 * c + l] = (b->qs[32 * c + l] & 15) | (((b->qh[l] >> (2 * c)) & 1) << 4);
            u[64 * c + 32 + l] = (b->qs[32 * c + l] >> 4) | (((b->qh[l] >> (2 * c + 1)) & 1) << 4);
        }
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale_min(b->scales, j, sc, m);
        s[j] = d * sc, o[j] = -(dmin * m);
    }
}

void decode_q6_K(const void* block, uint8_t* u, float* s, float* o) {
    auto b = static_cast<const block_q6_K*>(block);
    for (int n = 0; n < 2; n++) {
        const uint8_t* ql = b->ql + 64 * n;
        const uint8_t* qh = b->qh + 32 * n;
        uint8_t* y = u + 128 * n;
        for (int l = 0; l < 32; l++) {
            y[l] = (ql[l] & 15) | ((qh[l] & 3) << 4);
            y[l + 32] = (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4);
            y[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            y[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
    float d = fp16_to_f32(b->d);
    for (int g = 0; g < 16; g++) s[g] = d * b->scales[g], o[g] = 0.0f;
}

// The types with hand kernels: their codes-and-scales view is the type table's `codes` column.
const struct {
    Type type;
    DecodeBlockFn decode;
} kDecoders[] = {
    {Type::Q4_0, decode_q4_0}, {Type::Q4_1, decode_q4_1}, {Type::Q5_0, decode_q5_0},     {Type::Q5_1, decode_q5_1},
    {Type::Q8_0, decode_q8_0}, {Type::IQ4_NL, decode_iq4_nl}, {Type::IQ4_XS, decode_iq4_xs}, {Type::Q2_K, decode_q2_K},
    {Type::Q3_K, decode_q3_K}, {Type::Q4_K, decode_q4_K}, {Type::Q5_K, decode_q5_K},     {Type::Q6_K, decode_q6_K},
};

}  // namespace

DecodeBlockFn decode_block_fn(Type t) {
    for (const auto& e : kDecoders)
        if (e.type == t) return e.decode;
    return nullptr;
}

const gguf::CodeLayout* quant_layout(Type t) {
    if (!decode_block_fn(t)) return nullptr;
    const gguf::CodeLayout& codes = gguf::type_traits(t).codes;
    assert(codes.group > 0 && "a type with a block decoder needs its codes column in gguf/types.cpp");
    return &codes;
}

int64_t lane_act_bytes(int64_t K) { return (K + 64 + 2 * 4 * (K / 16 + 16) + 63) / 64 * 64; }

void prepare_lane_acts(Type type, bool interleaved, const uint8_t* x, int64_t K, int64_t n_tokens, uint8_t* mem,
                       LaneAct* out) {
    const gguf::CodeLayout& layout = *quant_layout(type);
    const Type act = activation_type(type);
    const size_t row_bytes = *gguf::row_bytes(act, K);
    const float zero = layout.has_min ? 1.0f : -static_cast<float>(layout.zero);
    for (int64_t t = 0; t < n_tokens; t++) {
        const uint8_t* row = x + t * row_bytes;
        auto q = reinterpret_cast<int8_t*>(mem + t * lane_act_bytes(K));
        auto d = reinterpret_cast<float*>(q + K + 64);
        float* s = d + K / 16 + 16;
        out[t] = {q, d, s};
        std::memset(q + K, 0, 64);
        if (act == Type::Q8_K) {
            for (int64_t b = 0; b < K / 256; b++) {
                auto blk = reinterpret_cast<const gguf::block_q8_K*>(row) + b;
                d[b] = blk->d;
                if (interleaved)
                    for (int h = 0; h < 256; h += 128)
                        for (int i = 0; i < 4; i++) std::memcpy(q + 256 * b + h + 32 * i, blk->qs + h + 32 * ((i % 2) * 2 + i / 2), 32);
                else
                    std::memcpy(q + 256 * b, blk->qs, 256);
                int32_t sums[16] = {};  // Σq per weight group, from the 16-element sums
                for (int j = 0; j < 16; j++) sums[j * 16 / layout.group] += blk->bsums[j];
                for (int g = 0; g < 16; g++) s[16 * b + g] = zero * blk->d * static_cast<float>(sums[g]);
            }
        } else {  // Q8_0 (34-byte blocks) or Q8_1 (36)
            const bool q8_1 = act == Type::Q8_1;
            const int bpb = q8_1 ? 36 : 34;
            for (int64_t b = 0; b < K / 32; b++) {
                const uint8_t* blk = row + b * bpb;
                std::memcpy(q + 32 * b, blk + (q8_1 ? 4 : 2), 32);
                uint16_t h[2];
                std::memcpy(h, blk, 4);
                d[b] = fp16_to_f32(h[0]);
                int32_t sum = 0;
                for (int i = 0; i < 32; i++) sum += q[32 * b + i];
                s[b] = q8_1 ? fp16_to_f32(h[1]) : zero * d[b] * static_cast<float>(sum);
            }
            for (int i = 0; i < 4; i++) d[K / 32 + i] = 0.0f, s[K / 32 + i] = 0.0f;
        }
    }
}

}  // namespace cpu_kernels
