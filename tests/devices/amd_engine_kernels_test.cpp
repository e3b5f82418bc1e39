// The engine's hand-kernel dispatch on "AMD" over the fake /dev/kfd: linear over GGUF weights through
// kernels_amd's code objects (q8 activations + GEMV for one token, WMMA/MFMA GEMM for several, fp16 GEMV)
// and attention through the split decode kernels — each dispatched through the AQL queue, executed by the
// kernels_amd emulator, and compared with a double-precision reference.
#include "amd_engine_test_util.h"

#include "gguf/types.h"

#include <cstring>

using namespace amd_engine_test;
using engine::f16;
using engine::f32;

namespace {

struct Weights {
    std::vector<uint8_t> blocks;  // GGUF rows
    std::vector<float> values;    // their exact dequantization
};

// GGUF rows of `type`: the reference quantizer's output where gguf has one, else random blocks whose fp16
// scale fields are set to finite values of the size real weights have (the rest of a block is any bits).
Weights quantized(gguf::Type type, int64_t n_out, int64_t n_in, uint32_t seed) {
    const gguf::TypeTraits& tt = gguf::type_traits(type);
    std::vector<float> w = uniform(size_t(n_out * n_in), seed, -0.5f, 0.5f);
    Weights r;
    r.blocks.resize(*gguf::row_bytes(type, n_out * n_in));
    if (tt.quantize) {
        tt.quantize(w.data(), r.blocks.data(), n_out * n_in);
    } else {
        std::vector<float> bits = uniform(r.blocks.size(), seed + 1, 0.0f, 256.0f);
        for (size_t i = 0; i < bits.size(); i++) r.blocks[i] = uint8_t(bits[i]);
        std::vector<float> scales = uniform(r.blocks.size() / tt.bytes_per_block * 2, seed + 2, 0.5f, 1.0f);
        auto set = [&](size_t at, float v) {
            uint16_t h = gguf::f32_to_f16(v);
            std::memcpy(r.blocks.data() + at, &h, 2);
        };
        for (size_t b = 0; b < r.blocks.size() / tt.bytes_per_block; b++) {
            size_t at = b * tt.bytes_per_block;
            if (type == gguf::Type::Q4_K || type == gguf::Type::Q5_K) set(at, scales[2 * b] / 64), set(at + 2, scales[2 * b + 1] / 256);
            else if (type == gguf::Type::Q6_K) set(at + 208, scales[2 * b] / 512);
            else if (type == gguf::Type::IQ4_XS) set(at, scales[2 * b] / 64);
            else FAIL("no scale layout for " << gguf::type_name(type));
        }
    }
    r.values.resize(w.size());
    tt.dequantize(r.blocks.data(), r.values.data(), n_out * n_in);
    return r;
}

std::vector<float> reference_linear(const std::vector<float>& x, const std::vector<float>& w, int64_t T, int64_t N, int64_t K) {
    std::vector<float> y(size_t(T * N));
    for (int64_t t = 0; t < T; t++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += double(x[t * K + k]) * w[n * K + k];
            y[t * N + n] = float(s);
        }
    return y;
}

std::vector<std::string> custom_kernels() {
    std::vector<std::string> names;
    for (const auto& k : engine::last_schedule())
        if (k.custom) names.push_back(k.name);
    return names;
}

// x as the q8 kernels see it: per 32 values a scale amax/127 and int8 values rounded to nearest even.
std::vector<float> q8_round_trip(const std::vector<float>& x) {
    std::vector<float> r(x.size());
    for (size_t g = 0; g < x.size(); g += 32) {
        float amax = 0.0f;
        for (size_t i = g; i < g + 32; i++) amax = std::fmax(amax, std::fabs(x[i]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (size_t i = g; i < g + 32; i++) r[i] = d * std::rint(x[i] * id);
    }
    return r;
}

std::vector<float> f16_round_trip(std::vector<float> v) {
    for (float& x : v) x = gguf::f16_to_f32(gguf::f32_to_f16(x));
    return v;
}

// linear on `device` for T tokens against a double-precision product of what the kernels multiply: the
// exact weights with q8 activations (GEMV), both rounded to fp16 (GEMM), or f32 activations (fp16 GEMV).
// What remains is f32 accumulation order.
void check_linear(const std::string& device, gguf::Type type, int64_t T, std::vector<std::string> kernels) {
    const int64_t N = 40, K = 512;
    Weights w = quantized(type, N, K, 7);
    std::vector<float> x = uniform(size_t(T * K), 8);
    DefaultDevice d(device);
    Tensor wt = Tensor::from_data(w.blocks.data(), w.blocks.size(), {N, K}, engine::DType::from_gguf(type));
    std::vector<float> got = engine::linear(on(device, x, {T, K}), wt).to_vector<float>();
    bool gemm = kernels == std::vector<std::string>{"C_amd_gemm"}, q8 = kernels.front() == "C_amd_q8_quantize";
    std::vector<float> xs = gemm ? f16_round_trip(x) : q8 ? q8_round_trip(x) : x;
    std::vector<float> want = reference_linear(xs, gemm ? f16_round_trip(w.values) : w.values, T, N, K);
    INFO(gguf::type_name(type) << " with " << T << " token(s) on " << device);
    CHECK(custom_kernels() == kernels);
    require_close(got, want, 0.0, 1e-5 * rms(want), "y");
}

}  // namespace

TEST_CASE("amd engine: linear decodes through q8 activations and the GEMV of each weight type") {
    std::string amd = fake_amd();
    for (gguf::Type t : {gguf::Type::Q4_K, gguf::Type::Q5_K, gguf::Type::Q6_K, gguf::Type::IQ4_XS, gguf::Type::Q8_0, gguf::Type::Q4_0})
        check_linear(amd, t, 1, {"C_amd_q8_quantize", "C_amd_gemv_q8"});
    check_linear(amd, gguf::Type::F16, 1, {"C_amd_gemv_f16"});
}

TEST_CASE("amd engine: linear over several tokens runs the matrix-core GEMM") {
    std::string amd = fake_amd();
    for (gguf::Type t : {gguf::Type::Q4_K, gguf::Type::Q6_K, gguf::Type::Q8_0, gguf::Type::F16}) check_linear(amd, t, 3, {"C_amd_gemm"});
}

TEST_CASE("amd engine: wave64 CDNA (gfx90a) runs the same dispatch code") {
    std::string cdna = fake_amd("gfx90a");
    CHECK(devices::get(cdna).target().cpu == "gfx90a");
    check_linear(cdna, gguf::Type::Q4_K, 1, {"C_amd_q8_quantize", "C_amd_gemv_q8"});
    check_linear(cdna, gguf::Type::Q8_0, 3, {"C_amd_gemm"});
}

TEST_CASE("amd engine: q8 activations are made once for every projection of the same input") {
    std::string amd = fake_amd();
    DefaultDevice d(amd);
    Weights a = quantized(gguf::Type::Q8_0, 16, 64, 1), b = quantized(gguf::Type::Q8_0, 24, 64, 2);
    Tensor wa = Tensor::from_data(a.blocks.data(), a.blocks.size(), {16, 64}, engine::DType::from_gguf(gguf::Type::Q8_0));
    Tensor wb = Tensor::from_data(b.blocks.data(), b.blocks.size(), {24, 64}, engine::DType::from_gguf(gguf::Type::Q8_0));
    Tensor x = on(amd, uniform(64, 3), {1, 64});
    Tensor ya = engine::linear(x, wa), yb = engine::linear(x, wb);
    engine::realize({ya, yb});
    CHECK(custom_kernels() == std::vector<std::string>{"C_amd_q8_quantize", "C_amd_gemv_q8", "C_amd_gemv_q8"});
}

TEST_CASE("amd engine: attention runs the split decode kernels per query token, causally") {
    std::string amd = fake_amd();
    const int64_t T = 3, H = 8, Hkv = 4, D = 8, C = 140, start = 66;  // keys 0..68: two 64-key chunks
    std::vector<float> q = uniform(size_t(T * H * D), 11, -2.0f, 2.0f);
    std::vector<float> k = uniform(size_t(C * Hkv * D), 12, -2.0f, 2.0f), v = uniform(size_t(C * Hkv * D), 13);
    auto graph = [&] {
        std::string dev = engine::default_device();
        Tensor kc = on(dev, k, {C, Hkv, D}).cast(f16).contiguous().realize();
        Tensor vc = on(dev, v, {C, Hkv, D}).cast(f16).contiguous().realize();
        return engine::attention(on(dev, q, {T, H, D}), kc, vc, start, 1.0 / std::sqrt(double(D)));
    };
    std::vector<float> want = [&] {
        DefaultDevice d("CPU");
        return graph().to_vector<float>();
    }();
    DefaultDevice d(amd);
    std::vector<float> got = graph().to_vector<float>();
    CHECK(custom_kernels() == std::vector<std::string>{"C_amd_attention"});
    require_close(got, want, 0.0, 2e-3, "attention");  // fp16 accumulators in the kernel
}

TEST_CASE("amd engine: f32 caches and head sizes without a kernel take the host path and still agree") {
    std::string amd = fake_amd();
    const int64_t T = 2, H = 4, Hkv = 2, D = 12, C = 8;
    std::vector<float> q = uniform(size_t(T * H * D), 21), k = uniform(size_t(C * Hkv * D), 22), v = uniform(size_t(C * Hkv * D), 23);
    auto graph = [&] {
        std::string dev = engine::default_device();
        return engine::attention(on(dev, q, {T, H, D}), on(dev, k, {C, Hkv, D}), on(dev, v, {C, Hkv, D}), 3, 0.3);
    };
    std::vector<float> want = [&] {
        DefaultDevice d("CPU");
        return graph().to_vector<float>();
    }();
    DefaultDevice d(amd);
    std::vector<float> got = graph().to_vector<float>();
    require_close(got, want, 1e-6, 1e-6, "attention on the host");
}

TEST_CASE("amd engine: Q6_K weights laid out at load (212-byte blocks) multiply as their raw blocks do") {
    std::string amd = fake_amd();
    DefaultDevice d(amd);
    const int64_t N = 40, K = 512;
    Weights w = quantized(gguf::Type::Q6_K, N, K, 7);
    Tensor raw = Tensor::from_data(w.blocks.data(), w.blocks.size(), {N, K}, engine::DType::from_gguf(gguf::Type::Q6_K));
    Tensor laid_out = engine::pack_for_linear(raw);  // the device's layout hook
    REQUIRE(laid_out.node().get() != raw.node().get());
    for (int64_t T : {1, 3}) {  // the GEMV and the GEMM
        Tensor x = on(amd, uniform(size_t(T * K), 8), {T, K});
        std::vector<float> want = engine::linear(x, raw).to_vector<float>();
        require_close(engine::linear(x, laid_out).to_vector<float>(), want, 0.0, 0.0, "Q6_K T=" + std::to_string(T));
    }
}
