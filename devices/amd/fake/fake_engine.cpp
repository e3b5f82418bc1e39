// The engine's "AMD" device on the fake /dev/kfd: the fake GPUs the tests name by target, and the
// TINYLLM_FAKE_KFD switch for binaries that install it (test support: tinyllm_devices_fake).
#include "devices/amd/engine_impl.h"
#include "devices/amd/fake/fake_kfd.h"

namespace amd {

FakeGpuSpec fake_gpu_spec(const std::string& target) {
    FakeGpuSpec spec;
    if (target == "gfx1100") return spec;
    if (target == "gfx1201") {  // RX 9070 XT
        spec.gfx_target_version = 120001, spec.device_id = 0x7550, spec.simd_count = 128, spec.array_count = 8;
        spec.vram_bytes = 16ull << 30;
        return spec;
    }
    if (target == "gfx90a" || target == "gfx942") {  // MI210 / MI300X: wave64, 4 SIMDs per CU
        bool mi300 = target == "gfx942";
        spec.gfx_target_version = mi300 ? 90402 : 90010, spec.device_id = mi300 ? 0x74a1 : 0x740f;
        spec.simd_per_cu = 4, spec.simd_count = mi300 ? 4 * 304 : 4 * 104, spec.max_waves_per_simd = 8;
        spec.array_count = mi300 ? 32 : 8, spec.simd_arrays_per_engine = 1, spec.num_xcc = mi300 ? 8 : 1;
        spec.vram_bytes = (mi300 ? 192ull : 64ull) << 30;
        return spec;
    }
    throw devices::Error("[devices] AMD: no fake GPU for '" + target + "' (gfx1100, gfx1201, gfx90a, gfx942)");
}

std::unique_ptr<devices::Device> make_fake_engine_device(const FakeKfdOptions& options) {
    return make_twin_engine_device(std::make_unique<FakeKfd>(options));
}

std::unique_ptr<devices::Device> make_fake_engine_device(const std::string& target) {
    FakeKfdOptions options;
    options.gpus = {fake_gpu_spec(target)};
    return make_fake_engine_device(options);
}

void install_fake_kfd() {
    set_fake_engine_factory([](const std::string& target) { return make_fake_engine_device(target); });
}

}  // namespace amd
