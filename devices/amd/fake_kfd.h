// A fake /dev/kfd behind KfdIO, so CI runs the whole AMD backend without a GPU: fake topology (sysfs),
// a memory model where every GPU allocation is host memory at the same address, and a fake AQL queue
// whose "GPU" processes packets when the doorbell is written. It runs the dispatched kernel's host twin
// (looked up by the kernel's name in the code object it finds in GPU memory) and checks every pointer
// the kernel is given and touches: an unmapped address becomes a KFD memory-fault event, never a crash.
#pragma once

#include "devices/amd/amd.h"

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace amd {

// A dispatch as the kernel's host twin sees it.
struct Dispatch {
    std::string kernel;
    uint32_t dims = 1;
    std::array<uint32_t, 3> grid{};       // work-items per dimension (AQL grid_size)
    std::array<uint16_t, 3> workgroup{};  // work-items per workgroup
    std::span<const uint8_t> kernarg;     // the kernarg segment as the GPU reads it
    template <class T>
    T arg(size_t offset) const {  // kernarg bytes at `offset` (the kernel's metadata gives offsets)
        if (offset > kernarg.size() || sizeof(T) > kernarg.size() - offset)
            throw Error("[fake-kfd] kernel '" + kernel + "' read kernarg bytes past its segment");
        T t;
        std::memcpy(&t, kernarg.data() + offset, sizeof(T));
        return t;
    }
};

// GPU memory as the fake GPU sees it. resolve() checks that [va, va+bytes) lies in memory mapped on this
// GPU and returns the host address; otherwise the dispatch stops with a GPU memory fault at that address.
class GpuMemory {
public:
    virtual ~GpuMemory() = default;
    virtual uint8_t* resolve(uint64_t va, size_t bytes) = 0;
    template <class T>
    T* array(uint64_t va, size_t count) {
        return reinterpret_cast<T*>(resolve(va, count * sizeof(T)));
    }
};

// Runs a whole dispatch (every work-item) on the host.
using HostTwin = std::function<void(const Dispatch&, GpuMemory&)>;

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

class FakeKfd final : public KfdIO {
public:
    explicit FakeKfd(FakeKfdOptions options = {});
    ~FakeKfd() override;

    // The kernel the fake GPU runs when a dispatch names `kernel`. A dispatch of a kernel without a twin
    // throws Error from the doorbell write: it is a test-setup mistake, not GPU behaviour.
    void add_twin(const std::string& kernel, HostTwin twin);

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

}  // namespace amd
