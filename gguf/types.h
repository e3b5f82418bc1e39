// ggml tensor types: ids as stored in GGUF, block geometry, names, reference (de)quantization.
// Block layouts are in gguf/blocks.h; facts from ggml-common.h, code ours.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace gguf {

enum class Type : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
    IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

using DequantizeFn = void (*)(const void* blocks, float* out, int64_t n);  // n: multiple of block_size
using QuantizeFn = void (*)(const float* in, void* blocks, int64_t n);

// A block's weights as unsigned 8-bit codes u with, per group of `group` elements, a scale s and an
// offset o:  w[i] = s[g] · (u[i] − zero) + o[g],  g = i / group.  Dot-product kernels on every device
// read this view; group 0: the type has none (floats, and types decoded only by the generic path).
struct CodeLayout {
    int group = 0;         // elements per scale: 16 or 32
    int zero = 0;          // subtracted from every code
    bool has_min = false;  // o[g] is not always 0
};

struct TypeTraits {
    Type type;
    const char* name;          // ggml's name: "q4_K", "iq4_xs", "f16", ...
    int64_t block_size;        // elements per block
    size_t bytes_per_block;
    DequantizeFn dequantize;   // reference, bit-exact with ggml's to_float; nullptr if none
    QuantizeFn quantize;       // reference quantizer (ggml's *_ref); nullptr if none
    Type act_type;             // activations for a hand-kernel dot product with it: f32/f16/bf16, q8_0, q8_1
                               // or q8_K (ggml's vec_dot_type); f32 for types only the generic path reads
    CodeLayout codes;          // its codes-and-scales view (for hand kernels); group 0 if none
};

// nullptr for ids that are not known types.
const TypeTraits* type_traits(uint32_t id);
const TypeTraits& type_traits(Type t);  // t must be a known type (asserts)
// Every known type, in ggml id order.
std::span<const TypeTraits> all_types();
std::string_view type_name(Type t);
std::optional<Type> type_from_name(std::string_view name);  // case-insensitive ("Q4_K", "q4_k")

// Bytes for `n` elements of `t`; std::nullopt when n is not a multiple of the block size or overflows.
std::optional<uint64_t> row_bytes(Type t, int64_t n);

// Half-precision conversions (round to nearest even), as ggml does them.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);

}  // namespace gguf
