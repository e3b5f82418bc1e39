// Test support, never in the production binary (tinyllm_devices_fake).
// A fake /dev/kfd behind KfdIO, so CI runs the whole AMD backend without a GPU: fake topology (sysfs),
// a memory model where every GPU allocation is host memory at the same address, and a fake AQL queue
// whose "GPU" processes packets when the doorbell is written. It runs the dispatched kernel's host twin
// (looked up by the kernel's name in the code object it finds in GPU memory) and checks every pointer
// the kernel is given and touches: an unmapped address becomes a KFD memory-fault event, never a crash.
#pragma once

#include "devices/amd/amd.h"
#include "devices/device.h"

#include <memory>
#include <string>
#include <vector>

namespace amd {

struct FakeGpuSpec {
    uint32_t gfx_target_version = 110000;  // gfx1100 (RX 7900 XTX)
    uint32_t gpu_id = 0xb3c1;
    uint32_t device_id = 0x744c;
    uint32_t simd_count = 192, simd_per_cu = 2, max_waves_per_simd = 16;
    uint32_t array_count = 12, simd_arrays_per_engine = 2, lds_size_kb = 64, num_xcc = 1;
    uint64_t vram_bytes = 24ull << 30;
    bool large_bar = true;  // false: KFD refuses CPU-visible VRAM (EINVAL), as without resizable BAR
};

struct FakeKfdOptions {
    bool kfd_present = true;                     // false: no /dev/kfd, as on a machine without amdgpu
    std::vector<FakeGpuSpec> gpus = {FakeGpuSpec{}};
};

class FakeKfd final : public TwinKfdIO {
public:
    explicit FakeKfd(FakeKfdOptions options = {});
    ~FakeKfd() override;

    // The kernel the fake GPU runs when a dispatch names `kernel`. A dispatch of a kernel without a twin
    // throws Error from the doorbell write: it is a test-setup mistake, not GPU behaviour.
    void add_twin(const std::string& kernel, HostTwin twin) override;

    struct Stats {
        size_t dispatches = 0, doorbells = 0, faults = 0, hdp_flushes = 0;
        size_t allocations = 0, queues = 0, events = 0, open_fds = 0;  // live objects (leak checks)
    };
    Stats stats() const;

    int open(const std::string& path, int flags) override;
    int close(int fd) override;
    int ioctl(int fd, unsigned long request, void* arg) override;
    void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) override;
    int munmap(void* addr, size_t length) override;
    std::optional<std::string> read_file(const std::string& path) override;
    std::vector<std::string> list_dir(const std::string& path) override;
    void write_doorbell(volatile uint64_t* doorbell, uint64_t value) override;
    void write_register(volatile uint32_t* reg, uint32_t value) override;

    struct State;

private:
    std::unique_ptr<State> s_;
};

// The engine's "AMD" device on a fake /dev/kfd with one GPU of `target` (gfx1100, gfx1201, gfx90a,
// gfx942), or as `options` describe it (no /dev/kfd at all, no GPU, ...).
std::unique_ptr<devices::Device> make_fake_engine_device(const std::string& target = "gfx1100");
std::unique_ptr<devices::Device> make_fake_engine_device(const FakeKfdOptions& options);
// The fake GPU spec for `target`; throws devices::Error if unknown.
FakeGpuSpec fake_gpu_spec(const std::string& target);
// From now on the registry's "AMD" is a fake /dev/kfd whenever TINYLLM_FAKE_KFD is set (the test-only
// switch, devices/env.h); binaries that do not call this refuse the switch.
void install_fake_kfd();

}  // namespace amd
