// Test support for the AMD kernels (see support.h). The dequantizers follow ggml's reference order of
// float operations so they reproduce ../shared/golden/quants dequant_f32 bit for bit.
#include "support.h"

#include "common/test_data.h"
#include "gguf/types.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <stdexcept>

namespace amdtest {

uint64_t DeviceMemory::alloc(size_t bytes) {
    size_t capacity = (bytes + 255) / 256 * 256;
    uint64_t address = next_;
    next_ += (capacity + 4096 + 4095) / 4096 * 4096;  // an unmapped gap after every buffer
    buffers_[address] = std::vector<uint8_t>(capacity, 0xcd);
    return address;
}

void* DeviceMemory::resolve(uint64_t address, uint64_t bytes, bool) {
    auto it = buffers_.upper_bound(address);
    if (it != buffers_.begin()) {
        --it;
        uint64_t base = it->first, size = it->second.size();
        if (address >= base && address - base + bytes <= size) return it->second.data() + (address - base);
    }
    throw std::runtime_error("[test gpu] range " + std::to_string(address) + "+" + std::to_string(bytes) + " is not mapped");
}

float f16_to_f32(uint16_t h) { return gguf::f16_to_f32(h); }
uint16_t f32_to_f16(float f) { return gguf::f32_to_f16(f); }

const Format& format(const std::string& type) {
    static const std::vector<Format> formats = {{"q4_K", 256, 144}, {"q5_K", 256, 176}, {"q6_K", 256, 210}, {"iq4_xs", 256, 136},
                                                {"q8_0", 32, 34},   {"q4_0", 32, 18},   {"f16", 1, 2}};
    for (const Format& f : formats)
        if (f.type == type) return f;
    throw std::runtime_error("no test format " + type);
}

namespace {

float half_at(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_to_f32(h);
}

void scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
    if (j < 4) {
        d = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

constexpr int8_t KVALUES_IQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void dequant_block(const std::string& type, const uint8_t* b, float* y) {
    if (type == "q4_K" || type == "q5_K") {
        bool q5 = type == "q5_K";
        float d = half_at(b), min = half_at(b + 2);
        const uint8_t* scales = b + 4;
        const uint8_t* qh = b + 16;
        const uint8_t* q = b + (q5 ? 48 : 16);
        for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
            uint8_t sc, m;
            scale_min_k4(is, scales, sc, m);
            float d1 = d * sc, m1 = min * m;
            scale_min_k4(is + 1, scales, sc, m);
            float d2 = d * sc, m2 = min * m;
            int u1 = 1 << is, u2 = 2 << is;
            for (int l = 0; l < 32; l++) *y++ = d1 * ((q[l] & 0xF) + (q5 && (qh[l] & u1) ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * ((q[l] >> 4) + (q5 && (qh[l] & u2) ? 16 : 0)) - m2;
        }
    } else if (type == "q6_K") {
        float d = half_at(b + 208);
        const uint8_t *ql = b, *qh = b + 128;
        const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
        for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = static_cast<int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
    } else if (type == "iq4_xs") {
        float d = half_at(b);
        uint16_t scales_h;
        std::memcpy(&scales_h, b + 2, 2);
        const uint8_t *scales_l = b + 4, *qs = b + 8;
        for (int ib = 0; ib < 8; ib++, qs += 16, y += 32) {
            int ls = ((scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
            float dl = d * (ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * KVALUES_IQ4NL[qs[j] & 0xf];
                y[j + 16] = dl * KVALUES_IQ4NL[qs[j] >> 4];
            }
        }
    } else if (type == "q8_0") {
        float d = half_at(b);
        for (int j = 0; j < 32; j++) y[j] = static_cast<int8_t>(b[2 + j]) * d;
    } else if (type == "q4_0") {
        float d = half_at(b);
        for (int j = 0; j < 16; j++) {
            y[j] = ((b[2 + j] & 0x0F) - 8) * d;
            y[j + 16] = ((b[2 + j] >> 4) - 8) * d;
        }
    } else if (type == "f16") {
        y[0] = half_at(b);
    } else {
        throw std::runtime_error("no test dequantizer for " + type);
    }
}

}  // namespace

std::vector<float> dequantize(const std::string& type, const uint8_t* blocks, size_t n_elems) {
    const Format& f = format(type);
    std::vector<float> y(n_elems);
    for (size_t i = 0; i < n_elems / f.block_elems; i++) dequant_block(type, blocks + i * f.block_bytes, y.data() + i * f.block_elems);
    return y;
}

std::vector<uint8_t> random_blocks(const std::string& type, size_t n_blocks, uint64_t seed) {
    const Format& f = format(type);
    Random rng(seed);
    std::vector<uint8_t> bytes(n_blocks * f.block_bytes);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng.next() >> 56);
    auto scale = [&](size_t offset, float magnitude) {  // a finite fp16 scale with a random sign
        float v = magnitude * (0.5f + static_cast<float>(rng.next() >> 40) / 16777216.0f);
        uint16_t h = f32_to_f16((rng.next() >> 63) ? -v : v);
        std::memcpy(bytes.data() + offset, &h, 2);
    };
    for (size_t i = 0; i < n_blocks; i++) {
        size_t b = i * f.block_bytes;
        if (type == "q4_K" || type == "q5_K") scale(b, 1.0f / 64), scale(b + 2, 1.0f / 256);
        else if (type == "q6_K") scale(b + 208, 1.0f / 512);
        else if (type == "f16") scale(b, 2.0f);
        else scale(b, 1.0f / 64);
    }
    return bytes;
}

std::vector<uint8_t> device_layout(const std::string& type, const std::vector<uint8_t>& blocks) {
    return type == "q6_K" ? repack_q6_k(blocks) : blocks;
}

std::vector<float> Q8Activations::values() const {
    std::vector<float> v(q.size() * 4);
    for (size_t i = 0; i < v.size(); i++) v[i] = scale[i / 32] * static_cast<int8_t>((q[i / 4] >> (8 * (i % 4))) & 0xff);
    return v;
}

Q8Activations quantize_q8(const std::vector<float>& x, size_t n_in) {
    Q8Activations a;
    size_t groups = x.size() / 32;
    a.q.resize(x.size() / 4);
    a.scale.resize(groups);
    a.sum16.resize(groups * 2);
    (void)n_in;
    for (size_t g = 0; g < groups; g++) {
        const float* v = x.data() + g * 32;
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = std::fmax(amax, std::fabs(v[i]));
        float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        a.scale[g] = d;
        for (int i = 0; i < 32; i++) {
            int q = static_cast<int>(std::rint(v[i] * id));
            a.q[g * 8 + i / 4] |= (static_cast<uint32_t>(q) & 0xff) << (8 * (i % 4));
            a.sum16[g * 2 + i / 16] += static_cast<float>(q);
        }
    }
    return a;
}

Q8Activations q8_from_ggml(const std::string& act_type, const uint8_t* blocks, size_t n_elems) {
    Q8Activations a;
    a.q.resize(n_elems / 4);
    a.scale.resize(n_elems / 32);
    a.sum16.resize(n_elems / 16);
    bool k = act_type == "q8_K";
    if (!k && act_type != "q8_0") throw std::runtime_error("no activation type " + act_type);
    for (size_t g = 0; g < n_elems / 32; g++) {
        const uint8_t* b = k ? blocks + (g / 8) * 292 : blocks + g * 34;
        const uint8_t* qs = k ? b + 4 + (g % 8) * 32 : b + 2;
        if (k) std::memcpy(&a.scale[g], b, 4);
        else a.scale[g] = half_at(b);
        std::memcpy(&a.q[g * 8], qs, 32);
        for (int i = 0; i < 32; i++) a.sum16[g * 2 + i / 16] += static_cast<int8_t>(qs[i]);
        if (k)  // ggml's own 16-sums must agree with the values
            for (int h = 0; h < 2; h++) {
                int16_t bsum;
                std::memcpy(&bsum, b + 260 + 2 * ((g % 8) * 2 + h), 2);
                if (bsum != a.sum16[g * 2 + h]) throw std::runtime_error("q8_K bsums disagree with qs");
            }
    }
    return a;
}

GoldenType load_golden(const std::string& type) {
    std::string dir = test_data::shared("golden/quants/");
    std::ifstream index_file(dir + "index.json");
    nlohmann::json index = nlohmann::json::parse(index_file).at("types").at(type);
    std::ifstream bin(dir + type + ".bin", std::ios::binary);
    std::vector<uint8_t> data((std::istreambuf_iterator<char>(bin)), std::istreambuf_iterator<char>());
    auto section = [&](const char* name) {
        const auto& s = index.at("sections").at(name);
        size_t offset = s.at("offset"), length = s.at("length");
        if (offset + length > data.size()) throw std::runtime_error("golden " + type + ": section " + name + " past the end");
        return std::vector<uint8_t>(data.begin() + offset, data.begin() + offset + length);
    };
    auto floats = [&](const char* name) {
        auto bytes = section(name);
        std::vector<float> v(bytes.size() / 4);
        std::memcpy(v.data(), bytes.data(), bytes.size());
        return v;
    };
    GoldenType g;
    g.blocks = section("blocks");
    g.random_blocks = section("random_blocks");
    g.act_blocks = section("act_blocks");
    g.dequant = floats("dequant_f32");
    g.random_dequant = floats("random_dequant_f32");
    const auto& vd = index.at("vec_dot");
    g.act_type = vd.at("vec_dot_type");
    g.row_len = vd.at("row_len");
    for (const char* set : {"rows", "random_rows"})
        for (const auto& r : vd.at(set))
            (std::string(set) == "rows" ? g.rows : g.random_rows)
                .push_back({r.at("vec_dot_ref").at("value").get<double>(), r.at("abs_sum_f64").get<double>()});
    return g;
}

uint64_t Random::next() {  // splitmix64
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float Random::normal() {
    double s = 0;
    for (int i = 0; i < 12; i++) s += static_cast<double>(next() >> 40) / 16777216.0;
    return static_cast<float>(s - 6.0);
}

std::vector<float> Random::normals(size_t n, float scale) {
    std::vector<float> v(n);
    for (auto& x : v) x = normal() * scale;
    return v;
}

double worst_ratio(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& tolerance) {
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        double r = std::fabs(got[i] - want[i]) / tolerance[i];
        if (!(r <= worst)) worst = std::isnan(r) ? INFINITY : r;
    }
    return worst;
}

void reference_matmul(const std::vector<float>& w, const std::vector<float>& x, size_t n_out, size_t n_in, size_t n_tokens,
                      std::vector<double>& y, std::vector<double>& abs_sum) {
    y.assign(n_tokens * n_out, 0.0);
    abs_sum.assign(n_tokens * n_out, 0.0);
    for (size_t t = 0; t < n_tokens; t++)
        for (size_t n = 0; n < n_out; n++) {
            double s = 0, a = 0;
            for (size_t k = 0; k < n_in; k++) {
                double p = static_cast<double>(w[n * n_in + k]) * x[t * n_in + k];
                s += p;
                a += std::fabs(p);
            }
            y[t * n_out + n] = s;
            abs_sum[t * n_out + n] = a;
        }
}

}  // namespace amdtest
