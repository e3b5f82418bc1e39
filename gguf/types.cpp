// The type table (ggml's type_traits, ours): geometry, names and reference conversions per type.
#include "gguf/types.h"

#include "gguf/blocks.h"
#include "gguf/quants.h"
#include "gguf/quants_impl.h"

#include <array>
#include <cassert>
#include <cctype>
#include <cstring>

namespace gguf {

namespace {

using namespace ref;

// Adapts a typed public quantizer (gguf/quants.h) to the table's untyped signature.
template <class Block, void (*F)(const float*, Block*, int64_t)>
void quantize_as(const float* x, void* y, int64_t n) {
    F(x, static_cast<Block*>(y), n);
}

// In ggml id order. Types without a dequantizer (integers, f64) are storage-only. The last two columns
// are what the hand kernels read: the activation format and the codes-and-scales view.
const TypeTraits TABLE[] = {
    {Type::F32, "f32", 1, 4, dequantize_f32, quantize_f32, Type::F32, {}},
    {Type::F16, "f16", 1, 2, dequantize_f16, quantize_f16, Type::F16, {}},
    {Type::Q4_0, "q4_0", QK4_0, sizeof(block_q4_0), dequantize_q4_0, quantize_as<block_q4_0, quantize_row_q4_0>, Type::Q8_0, {32, 8, false}},
    {Type::Q4_1, "q4_1", QK4_1, sizeof(block_q4_1), dequantize_q4_1, quantize_as<block_q4_1, quantize_row_q4_1>, Type::Q8_1, {32, 0, true}},
    {Type::Q5_0, "q5_0", QK5_0, sizeof(block_q5_0), dequantize_q5_0, quantize_as<block_q5_0, quantize_row_q5_0>, Type::Q8_0, {32, 16, false}},
    {Type::Q5_1, "q5_1", QK5_1, sizeof(block_q5_1), dequantize_q5_1, quantize_as<block_q5_1, quantize_row_q5_1>, Type::Q8_1, {32, 0, true}},
    {Type::Q8_0, "q8_0", QK8_0, sizeof(block_q8_0), dequantize_q8_0, quantize_as<block_q8_0, quantize_row_q8_0>, Type::Q8_0, {32, 128, false}},
    {Type::Q8_1, "q8_1", QK8_1, sizeof(block_q8_1), dequantize_q8_1, quantize_as<block_q8_1, quantize_row_q8_1>, Type::F32, {}},
    {Type::Q2_K, "q2_K", QK_K, sizeof(block_q2_K), dequantize_q2_K, nullptr, Type::Q8_K, {16, 0, true}},
    {Type::Q3_K, "q3_K", QK_K, sizeof(block_q3_K), dequantize_q3_K, nullptr, Type::Q8_K, {16, 4, false}},
    {Type::Q4_K, "q4_K", QK_K, sizeof(block_q4_K), dequantize_q4_K, nullptr, Type::Q8_K, {32, 0, true}},
    {Type::Q5_K, "q5_K", QK_K, sizeof(block_q5_K), dequantize_q5_K, nullptr, Type::Q8_K, {32, 0, true}},
    {Type::Q6_K, "q6_K", QK_K, sizeof(block_q6_K), dequantize_q6_K, nullptr, Type::Q8_K, {16, 32, false}},
    {Type::Q8_K, "q8_K", QK_K, sizeof(block_q8_K), dequantize_q8_K, quantize_as<block_q8_K, quantize_row_q8_K>, Type::F32, {}},
    {Type::IQ2_XXS, "iq2_xxs", QK_K, sizeof(block_iq2_xxs), dequantize_iq2_xxs, nullptr, Type::F32, {}},
    {Type::IQ2_XS, "iq2_xs", QK_K, sizeof(block_iq2_xs), dequantize_iq2_xs, nullptr, Type::F32, {}},
    {Type::IQ3_XXS, "iq3_xxs", QK_K, sizeof(block_iq3_xxs), dequantize_iq3_xxs, nullptr, Type::F32, {}},
    {Type::IQ1_S, "iq1_s", QK_K, sizeof(block_iq1_s), dequantize_iq1_s, nullptr, Type::F32, {}},
    {Type::IQ4_NL, "iq4_nl", QK4_NL, sizeof(block_iq4_nl), dequantize_iq4_nl, nullptr, Type::Q8_0, {32, 128, false}},
    {Type::IQ3_S, "iq3_s", QK_K, sizeof(block_iq3_s), dequantize_iq3_s, nullptr, Type::F32, {}},
    {Type::IQ2_S, "iq2_s", QK_K, sizeof(block_iq2_s), dequantize_iq2_s, nullptr, Type::F32, {}},
    {Type::IQ4_XS, "iq4_xs", QK_K, sizeof(block_iq4_xs), dequantize_iq4_xs, nullptr, Type::Q8_K, {32, 128, false}},
    {Type::I8, "i8", 1, 1, nullptr, nullptr, Type::F32, {}},
    {Type::I16, "i16", 1, 2, nullptr, nullptr, Type::F32, {}},
    {Type::I32, "i32", 1, 4, nullptr, nullptr, Type::F32, {}},
    {Type::I64, "i64", 1, 8, nullptr, nullptr, Type::F32, {}},
    {Type::F64, "f64", 1, 8, nullptr, nullptr, Type::F32, {}},
    {Type::IQ1_M, "iq1_m", QK_K, sizeof(block_iq1_m), dequantize_iq1_m, nullptr, Type::F32, {}},
    {Type::BF16, "bf16", 1, 2, dequantize_bf16, quantize_bf16, Type::BF16, {}},
    {Type::TQ1_0, "tq1_0", QK_K, sizeof(block_tq1_0), dequantize_tq1_0, nullptr, Type::F32, {}},
    {Type::TQ2_0, "tq2_0", QK_K, sizeof(block_tq2_0), dequantize_tq2_0, nullptr, Type::F32, {}},
    {Type::MXFP4, "mxfp4", QK_MXFP4, sizeof(block_mxfp4), dequantize_mxfp4, nullptr, Type::F32, {}},
    {Type::NVFP4, "nvfp4", QK_NVFP4, sizeof(block_nvfp4), dequantize_nvfp4, nullptr, Type::F32, {}},
    {Type::Q1_0, "q1_0", QK1_0, sizeof(block_q1_0), dequantize_q1_0, nullptr, Type::F32, {}},
    {Type::Q2_0, "q2_0", QK2_0, sizeof(block_q2_0), dequantize_q2_0, nullptr, Type::F32, {}},
};

constexpr uint32_t MAX_ID = 64;

// id -> entry, so lookups in hot loops cost one load.
const std::array<const TypeTraits*, MAX_ID>& by_id() {
    static const std::array<const TypeTraits*, MAX_ID> index = [] {
        std::array<const TypeTraits*, MAX_ID> a{};
        for (const TypeTraits& t : TABLE) a[static_cast<uint32_t>(t.type)] = &t;
        return a;
    }();
    return index;
}

}  // namespace

const TypeTraits* type_traits(uint32_t id) { return id < MAX_ID ? by_id()[id] : nullptr; }

const TypeTraits& type_traits(Type t) {
    const TypeTraits* tr = type_traits(static_cast<uint32_t>(t));
    assert(tr && "gguf::type_traits: not a known type");
    return *tr;
}

std::span<const TypeTraits> all_types() { return TABLE; }

std::string_view type_name(Type t) { return type_traits(t).name; }

std::optional<Type> type_from_name(std::string_view name) {
    for (const TypeTraits& t : TABLE) {
        std::string_view n = t.name;
        if (n.size() != name.size()) continue;
        bool eq = true;
        for (size_t i = 0; i < n.size() && eq; i++)
            eq = std::tolower(static_cast<unsigned char>(n[i])) == std::tolower(static_cast<unsigned char>(name[i]));
        if (eq) return t.type;
    }
    return std::nullopt;
}

std::optional<uint64_t> row_bytes(Type t, int64_t n) {
    const TypeTraits& tr = type_traits(t);
    if (n < 0 || n % tr.block_size != 0) return std::nullopt;
    uint64_t blocks = static_cast<uint64_t>(n / tr.block_size);
    if (blocks > UINT64_MAX / tr.bytes_per_block) return std::nullopt;
    return blocks * tr.bytes_per_block;
}

float f16_to_f32(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: normalize
            int e = -1;
            do { e++; mant <<= 1; } while ((mant & 0x400) == 0);
            bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000 | mant << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | mant << 13;
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00);  // NaN
    if (absx >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // overflow (incl. inf)
    if (absx < 0x38800000) {  // subnormal or zero in f16: round at the f16 subnormal grid
        float a;
        std::memcpy(&a, &absx, 4);
        // 2^-24 is the smallest subnormal; adding 0.5f shifts the value into float's rounding position.
        float r = a + 0.5f;
        uint32_t rb;
        std::memcpy(&rb, &r, 4);
        return static_cast<uint16_t>(sign | (rb - 0x3f000000));  // may carry into the smallest normal
    }
    uint32_t mant_odd = (absx >> 13) & 1;
    absx += 0xc8000fff + mant_odd;  // rebias exponent (-112 << 23) and round to nearest even
    return static_cast<uint16_t>(sign | (absx >> 13));
}

float bf16_to_f32(uint16_t h) {
    uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 64);  // quiet NaN
    return static_cast<uint16_t>((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

}  // namespace gguf
