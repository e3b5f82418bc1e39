// Shared by the amd_engine tests: the engine's "AMD" device on a fake /dev/kfd (the test-only registration
// hook), deterministic data, and comparisons that name the first mismatch.
#pragma once

#include "devices/amd/fake/fake_kfd.h"
#include "devices/device.h"
#include "engine/tensor.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

namespace amd_engine_test {

using engine::Tensor;

// Registers "AMD" (and "AMD_<TARGET>" for other targets) as an engine device on a fake /dev/kfd whose GPU
// runs host twins. Returns the registry name.
inline std::string fake_amd(const std::string& target = "gfx1100") {
    std::string name = target == "gfx1100" ? "AMD" : "AMD_" + target;
    devices::register_device(name, [target] { return amd::make_fake_engine_device(target); });
    return name;
}

// Makes `device` the default for the test's duration (graphs built inside go there).
struct DefaultDevice {
    std::string saved = engine::default_device();
    explicit DefaultDevice(const std::string& device) { engine::set_default_device(device); }
    ~DefaultDevice() { engine::set_default_device(saved); }
};

// Uniform values in [lo, hi) from a small LCG: the same on every machine.
inline std::vector<float> uniform(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(n);
    uint64_t s = seed * 2654435761ull + 12345;
    for (auto& x : v) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x = lo + (hi - lo) * float(double(s >> 11) / double(1ull << 53));
    }
    return v;
}

inline Tensor on(const std::string& device, const std::vector<float>& v, const engine::Shape& shape) {
    return Tensor::from_data(v.data(), v.size() * sizeof(float), shape, engine::f32, device);
}

// |got - want| <= atol + rtol * |want| everywhere; names the first element that is not.
inline void require_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol,
                          const std::string& what = "") {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); i++) {
        if (std::fabs(double(got[i]) - want[i]) > atol + rtol * std::fabs(double(want[i]))) {
            INFO(what << " element " << i << ": got " << got[i] << ", want " << want[i]);
            REQUIRE(std::fabs(double(got[i]) - want[i]) <= atol + rtol * std::fabs(double(want[i])));
        }
    }
}

// The root mean square of v (for tolerances relative to a result's scale).
inline double rms(const std::vector<float>& v) {
    double s = 0;
    for (float x : v) s += double(x) * x;
    return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

}  // namespace amd_engine_test
