// The AMD GPU as the engine's devices::Device ("AMD"): made by the registry, or on a fake /dev/kfd whose
// GPU runs host twins. The compiler behind it is amdgcn_compiler.h. Internal to devices/.
#pragma once

#include "devices/amd/amd.h"
#include "devices/device.h"

#include <memory>
#include <string>

namespace amd {

// The registry's "AMD": GPU 0 through the real /dev/kfd; with TINYLLM_FAKE_KFD set (a test-only switch),
// a fake /dev/kfd whose emulated GPU has the target it names ("1" = gfx1100), in binaries that link the
// fakes (devices/amd/fake) and installed them. Throws devices::Error with the reason when there is no GPU.
std::unique_ptr<devices::Device> make_engine_device();
// The engine device on a GPU that runs host twins (the fake /dev/kfd), which it owns: every kernel it
// loads gets a twin (generated kernels their IR compiled for the host, hand kernels kernels_amd's emulator).
std::unique_ptr<devices::Device> make_twin_engine_device(std::unique_ptr<TwinKfdIO> io);
// What make_engine_device() calls when TINYLLM_FAKE_KFD names a target; set by amd::install_fake_kfd().
using FakeEngineFactory = std::unique_ptr<devices::Device> (*)(const std::string& target);
void set_fake_engine_factory(FakeEngineFactory factory);

}  // namespace amd
