// Helpers for engine tests: deterministic data, tensors from doubles in any dtype, dtype rounding for
// references, and element-wise comparison that reports the first mismatch.
#pragma once

#include "engine/tensor.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace etest {

using engine::DType;
using engine::Shape;
using engine::Tensor;

// Uniform values in [lo, hi) from a small LCG: the same on every machine.
inline std::vector<double> uniform(size_t n, uint32_t seed, double lo = -2.0, double hi = 2.0) {
    std::vector<double> v(n);
    uint64_t s = seed * 2654435761ull + 12345;
    for (auto& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = lo + (hi - lo) * double(s >> 11) / double(1ull << 53);
    }
    return v;
}

// The value a dtype stores for v (round to nearest even for floats, wrap for ints).
inline double to_dtype(double v, DType d) {
    switch (d.code) {
        case DType::F32: return double(float(v));
        case DType::F16: return gguf::f16_to_f32(gguf::f32_to_f16(float(v)));
        case DType::BF16: return gguf::bf16_to_f32(gguf::f32_to_bf16(float(v)));
        case DType::BOOL: return v != 0.0;
        case DType::U8: return double(uint8_t(int64_t(v)));
        case DType::I8: return double(int8_t(int64_t(v)));
        case DType::U16: return double(uint16_t(int64_t(v)));
        case DType::I16: return double(int16_t(int64_t(v)));
        case DType::U32: return double(uint32_t(int64_t(v)));
        case DType::I32: return double(int32_t(int64_t(v)));
        default: return double(int64_t(v));
    }
}

// A realized tensor holding `v` (converted to the dtype's storage).
inline Tensor tensor(const std::vector<double>& v, const Shape& shape, DType d) {
    std::vector<uint8_t> raw(v.size() * d.itemsize());
    for (size_t i = 0; i < v.size(); i++) {
        uint8_t* p = raw.data() + i * d.itemsize();
        double x = to_dtype(v[i], d);
        switch (d.code) {
            case DType::F32: { float f = float(x); std::memcpy(p, &f, 4); break; }
            case DType::F16: { uint16_t h = gguf::f32_to_f16(float(x)); std::memcpy(p, &h, 2); break; }
            case DType::BF16: { uint16_t h = gguf::f32_to_bf16(float(x)); std::memcpy(p, &h, 2); break; }
            default: { int64_t iv = int64_t(x); std::memcpy(p, &iv, d.itemsize()); break; }  // little endian
        }
    }
    return Tensor::from_data(raw.data(), raw.size(), shape, d);
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

inline bool close(double got, double want, double rtol, double atol) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == want;
    return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

inline void require_close(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol = 0.0,
                          const std::string& what = "") {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); i++) {
        if (!close(got[i], want[i], rtol, atol)) {
            INFO(what << " element " << i << ": got " << got[i] << ", want " << want[i]);
            REQUIRE(close(got[i], want[i], rtol, atol));
        }
    }
}

// Row-major coordinates of a flat index, and the flat index of coordinates under broadcasting.
inline std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& shape) {
    std::vector<int64_t> c(shape.size());
    for (size_t k = shape.size(); k-- > 0;) {
        c[k] = i % shape[k];
        i /= shape[k];
    }
    return c;
}
inline int64_t ravel_broadcast(const std::vector<int64_t>& c, const std::vector<int64_t>& shape) {
    int64_t idx = 0;
    size_t off = c.size() - shape.size();
    for (size_t k = 0; k < shape.size(); k++) idx = idx * shape[k] + (shape[k] == 1 ? 0 : c[off + k]);
    return idx;
}
inline int64_t count(const std::vector<int64_t>& s) {
    int64_t n = 1;
    for (auto d : s) n *= d;
    return n;
}
inline Shape dims(const std::vector<int64_t>& s) { return Shape(s.begin(), s.end()); }

}  // namespace etest
