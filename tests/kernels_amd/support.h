// Test support for the AMD kernels: a fake GPU memory map for emulate(), reference (de)quantizers that
// follow ggml's block layouts bit for bit, the golden quant vectors of ../shared, and random inputs.
#pragma once

#include "kernels_amd/kernels_amd.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace amdtest {

using namespace tinyllm::amd;

// Device memory as a fake GPU sees it: buffers sit at made-up GPU addresses (never the host address),
// and the resolver refuses any range that is not inside one allocation.
class DeviceMemory {
public:
    uint64_t alloc(size_t bytes);
    template <class T>
    uint64_t upload(const std::vector<T>& v) {
        uint64_t a = alloc(v.size() * sizeof(T));
        std::memcpy(host(a), v.data(), v.size() * sizeof(T));
        return a;
    }
    template <class T>
    std::vector<T> download(uint64_t address, size_t count) {
        std::vector<T> v(count);
        std::memcpy(v.data(), resolve(address, count * sizeof(T), false), count * sizeof(T));
        return v;
    }
    void* resolve(uint64_t address, uint64_t bytes, bool written);
    MemoryResolver resolver() {
        return [this](uint64_t a, uint64_t n, bool w) { return resolve(a, n, w); };
    }

private:
    void* host(uint64_t address) { return resolve(address, 1, false); }
    uint64_t next_ = 0x100000000ull;  // GPU-looking addresses, 4 GiB up
    std::map<uint64_t, std::vector<uint8_t>> buffers_;
};

template <class T>
T* gpu(uint64_t address) { return reinterpret_cast<T*>(address); }

// Runs `kernel` on the emulator with the launch shape it asks for.
template <class Args>
void run(std::string_view kernel, Target target, const Args& args, DeviceMemory& mem) {
    LaunchDims dims = launch_dims(kernel, kernarg_bytes(args), target);
    emulate(kernel, target, dims.grid, dims.block, kernarg_bytes(args), mem.resolver());
}

// ---- formats ----
struct Format {
    std::string type;    // ggml type name
    int block_elems;
    int block_bytes;     // as stored in GGUF
};
const Format& format(const std::string& type);  // q4_K q5_K q6_K iq4_xs q8_0 q4_0 f16
// ggml's reference dequantization (q6_K: the 210-byte GGUF blocks).
std::vector<float> dequantize(const std::string& type, const uint8_t* blocks, size_t n_elems);
// Random valid blocks with finite, moderate scales.
std::vector<uint8_t> random_blocks(const std::string& type, size_t n_blocks, uint64_t seed);
// Bytes the GPU kernels read: the GGUF rows, with Q6_K repacked to 212-byte blocks.
std::vector<uint8_t> device_layout(const std::string& type, const std::vector<uint8_t>& blocks);

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
inline float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

// ---- q8 activations (the layout of Q8QuantizeArgs) ----
struct Q8Activations {
    std::vector<uint32_t> q;      // (tokens, n_in / 4)
    std::vector<float> scale;     // (tokens, n_in / 32)
    std::vector<float> sum16;     // (tokens, n_in / 16)
    std::vector<float> values() const;  // scale * int8
};
Q8Activations quantize_q8(const std::vector<float>& x, size_t n_in);  // the kernel's formula, on the host
Q8Activations q8_from_ggml(const std::string& act_type, const uint8_t* blocks, size_t n_elems);  // q8_K / q8_0

// ---- golden quant vectors (../shared/golden/quants) ----
struct GoldenRow {
    double vec_dot_ref, abs_sum;
};
struct GoldenType {
    std::vector<uint8_t> blocks, random_blocks, act_blocks;
    std::vector<float> dequant, random_dequant;
    std::string act_type;
    size_t row_len = 0;
    std::vector<GoldenRow> rows, random_rows;
};
GoldenType load_golden(const std::string& type);

// ---- random inputs ----
class Random {
public:
    explicit Random(uint64_t seed) : state_(seed) {}
    uint64_t next();
    float normal();  // approximately N(0, 1)
    std::vector<float> normals(size_t n, float scale = 1.0f);

private:
    uint64_t state_;
};

// Largest |got - want| / tolerance over a vector; <= 1 passes.
double worst_ratio(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& tolerance);

// y[t][n] = sum_k w[n][k] * x[t][k] in double, and sum_k |w x| (the tolerance scale).
void reference_matmul(const std::vector<float>& w, const std::vector<float>& x, size_t n_out, size_t n_in, size_t n_tokens,
                      std::vector<double>& y, std::vector<double>& abs_sum);

}  // namespace amdtest
