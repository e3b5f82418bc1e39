// Helpers for the CPU kernel tests: ggml's golden quantization data (../shared/golden/quants), running
// a check on every instruction-set variant, random weights, and naive double-precision references.
#pragma once

#include "common/test_data.h"
#include "devices/cpu/kernels/kernels.h"
#include "gguf/blocks.h"
#include "gguf/types.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace kernels_test {

using cpu_kernels::Isa;
using gguf::Type;

// ---- golden data ----------------------------------------------------------------------------------

inline const nlohmann::json& golden_index() {
    static const nlohmann::json index = [] {
        std::ifstream f(test_data::shared("golden/quants/index.json"));
        REQUIRE(f.good());
        return nlohmann::json::parse(f);
    }();
    return index;
}

// One type's .bin file and its index entry.
struct Golden {
    nlohmann::json info;
    std::vector<uint8_t> bytes;

    explicit Golden(const std::string& name) : info(golden_index()["types"][name]) {
        std::ifstream f(test_data::shared("golden/quants/" + name + ".bin"), std::ios::binary);
        REQUIRE(f.good());
        bytes.assign(std::istreambuf_iterator<char>(f), {});
        REQUIRE(bytes.size() == info["file_bytes"].get<size_t>());
    }
    bool has(const std::string& section) const { return info["sections"].contains(section); }
    const uint8_t* section(const std::string& name) const {
        return bytes.data() + info["sections"][name]["offset"].get<size_t>();
    }
    size_t section_bytes(const std::string& name) const { return info["sections"][name]["length"].get<size_t>(); }
    std::vector<float> floats(const std::string& name) const {
        std::vector<float> v(section_bytes(name) / 4);
        std::memcpy(v.data(), section(name), v.size() * 4);
        return v;
    }
};

// ---- variants -------------------------------------------------------------------------------------

inline std::vector<Isa> supported_isas() {
    std::vector<Isa> isas;
    for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512})
        if (cpu_kernels::isa_supported(isa)) isas.push_back(isa);
    if (isas.size() < 3) WARN("this CPU lacks some variants; only these run: " << isas.size() << " of 3");
    return isas;
}

// Makes `isa` active for the scope.
struct ActiveIsa {
    Isa saved = cpu_kernels::active_isa();
    explicit ActiveIsa(Isa isa) { cpu_kernels::set_active_isa(isa); }
    ~ActiveIsa() { cpu_kernels::set_active_isa(saved); }
};

// ---- random data ----------------------------------------------------------------------------------

struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(seed) {}
    uint64_t next() {  // splitmix64
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform() { return static_cast<float>(next() >> 40) / 16777216.0f; }  // [0, 1)
    float normal() {
        float s = 0;
        for (int i = 0; i < 12; i++) s += uniform();
        return s - 6.0f;
    }
};

inline std::vector<float> random_floats(Rng& rng, size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = rng.normal() * scale;
    return v;
}

// Offsets of the fp16 scale fields in a block, which random bytes would make inf/NaN or absurd.
inline std::vector<int> fp16_fields(Type t) {
    switch (t) {
        case Type::Q4_0: case Type::Q5_0: case Type::Q8_0: case Type::IQ4_NL: case Type::IQ4_XS: return {0};
        case Type::Q4_1: case Type::Q5_1: case Type::Q4_K: case Type::Q5_K: return {0, 2};
        case Type::Q2_K: return {80, 82};
        case Type::Q3_K: return {108};
        case Type::Q6_K: return {208};
        default: return {};
    }
}

// Random but valid blocks: random bytes (every code and sub-scale reachable), fp16 scales of random
// sign and magnitude 2^-10 .. 2^-5. For F32/F16/BF16 random normal values.
inline std::vector<uint8_t> random_weights(Rng& rng, Type t, int64_t n_rows, int64_t n_cols) {
    const size_t row_bytes = *gguf::row_bytes(t, n_cols);
    std::vector<uint8_t> w(n_rows * row_bytes);
    if (t == Type::F32 || t == Type::F16 || t == Type::BF16) {
        const std::vector<float> f = random_floats(rng, n_rows * n_cols);
        gguf::type_traits(t).quantize(f.data(), w.data(), static_cast<int64_t>(f.size()));
        return w;
    }
    for (uint8_t& b : w) b = static_cast<uint8_t>(rng.next() >> 56);
    const size_t bpb = gguf::type_traits(t).bytes_per_block;
    for (size_t off = 0; off < w.size(); off += bpb)
        for (int field : fp16_fields(t)) {
            const float mag = std::ldexp(1.0f + rng.uniform(), -10 + static_cast<int>(rng.next() % 6));
            const uint16_t h = gguf::f32_to_f16(rng.next() & 1 ? -mag : mag);
            std::memcpy(&w[off + field], &h, 2);
        }
    return w;
}

// ---- references -----------------------------------------------------------------------------------

// The weights as floats, through the codes-and-scales decoders (checked bit-exact against ggml by
// kernels_golden.cpp) or gguf's float conversions.
inline std::vector<float> dequantize(Type t, const uint8_t* w, int64_t n) {
    std::vector<float> out(n);
    if (t == Type::F32 || t == Type::F16 || t == Type::BF16) {
        gguf::type_traits(t).dequantize(w, out.data(), n);
        return out;
    }
    const gguf::CodeLayout& layout = *cpu_kernels::quant_layout(t);
    const auto decode = cpu_kernels::decode_block_fn(t);
    const int64_t bs = gguf::type_traits(t).block_size;
    std::vector<uint8_t> u(bs);
    std::vector<float> s(bs / layout.group), o(bs / layout.group);
    for (int64_t b = 0; b < n / bs; b++) {
        decode(w + b * gguf::type_traits(t).bytes_per_block, u.data(), s.data(), o.data());
        for (int64_t i = 0; i < bs; i++) {  // no "+ 0" without a min: it would turn ggml's −0.0 into +0.0
            out[b * bs + i] = s[i / layout.group] * static_cast<float>(u[i] - layout.zero);
            if (layout.has_min) out[b * bs + i] += o[i / layout.group];
        }
    }
    return out;
}

// An activation row in a Q8/F16/BF16/F32 format as floats (d·q).
inline std::vector<float> dequantize_activation(Type act, const uint8_t* x, int64_t n) {
    std::vector<float> out(n);
    if (act == Type::Q8_K) {
        for (int64_t b = 0; b < n / 256; b++) {
            auto blk = reinterpret_cast<const gguf::block_q8_K*>(x) + b;
            for (int i = 0; i < 256; i++) out[b * 256 + i] = blk->d * blk->qs[i];
        }
    } else if (act == Type::Q8_0 || act == Type::Q8_1) {
        const size_t bpb = act == Type::Q8_0 ? 34 : 36, qoff = act == Type::Q8_0 ? 2 : 4;
        for (int64_t b = 0; b < n / 32; b++) {
            uint16_t d;
            std::memcpy(&d, x + b * bpb, 2);
            for (int i = 0; i < 32; i++) out[b * 32 + i] = gguf::f16_to_f32(d) * static_cast<int8_t>(x[b * bpb + qoff + i]);
        }
    } else {
        gguf::type_traits(act).dequantize(x, out.data(), n);
    }
    return out;
}

struct RefDot {
    double value;
    double abs_sum;  // Σ|w·x|, the scale of the allowed rounding error
};

// Σ w·x in double. For Q8_1 activations the min term uses the stored s = fp16(d·Σq) as ggml does
// (golden README: q4_1/q5_1 need care).
inline RefDot reference_dot(Type wt, const uint8_t* w_row, const uint8_t* x_row, int64_t n) {
    const std::vector<float> w = dequantize(wt, w_row, n);
    const Type act = cpu_kernels::activation_type(wt);
    const std::vector<float> x = dequantize_activation(act, x_row, n);
    RefDot r{0.0, 0.0};
    for (int64_t i = 0; i < n; i++) {
        r.value += static_cast<double>(w[i]) * x[i];
        r.abs_sum += std::fabs(static_cast<double>(w[i]) * x[i]);
    }
    if (act == Type::Q8_1) {  // replace o·d·Σq by o·s, block by block
        const auto decode = cpu_kernels::decode_block_fn(wt);
        const size_t bpb = gguf::type_traits(wt).bytes_per_block;
        uint8_t u[32];
        float s, o;
        for (int64_t b = 0; b < n / 32; b++) {
            decode(w_row + b * bpb, u, &s, &o);
            const uint8_t* xb = x_row + b * 36;
            uint16_t d16, s16;
            std::memcpy(&d16, xb, 2);
            std::memcpy(&s16, xb + 2, 2);
            double sum_q = 0;
            for (int i = 0; i < 32; i++) sum_q += static_cast<int8_t>(xb[4 + i]);
            r.value += static_cast<double>(o) * (gguf::f16_to_f32(s16) - static_cast<double>(gguf::f16_to_f32(d16)) * sum_q);
        }
    }
    return r;
}

}  // namespace kernels_test
