// The AMD GPU backend over raw KFD (DESIGN.md §4, like tinygrad's ops_amd.py): GPUs from the KFD topology
// in sysfs, GPU memory, one AQL queue, code objects and kernel dispatch. Every OS call goes through KfdIO,
// so CI runs the whole backend against FakeKfd (fake/fake_kfd.h), whose "GPU" runs host twins of the kernels.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace amd {

// Every message starts with "[amd]".
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// No AMD GPU (or not the requested one) on this machine.
struct NoDevice : Error {
    using Error::Error;
};
// The GPU reported a fault while running our work. The queue is dead afterwards, as on real hardware.
struct GpuFault : Error {
    GpuFault(const std::string& message, uint64_t fault_va) : Error(message), va(fault_va) {}
    uint64_t va;  // the faulting GPU virtual address (0 when the fault was not a memory fault)
};

// Every OS call of the backend, with the syscalls' conventions (-1 / MAP_FAILED and errno).
class KfdIO {
public:
    virtual ~KfdIO() = default;
    virtual int open(const std::string& path, int flags) = 0;
    virtual int close(int fd) = 0;
    virtual int ioctl(int fd, unsigned long request, void* arg) = 0;
    virtual void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) = 0;
    virtual int munmap(void* addr, size_t length) = 0;
    virtual std::optional<std::string> read_file(const std::string& path) = 0;   // sysfs; nullopt if absent
    virtual std::vector<std::string> list_dir(const std::string& path) = 0;      // entry names; empty if absent
    // Stores to mmap'd device pages (on hardware, after a store fence that drains write-combined BAR
    // writes): the queue's doorbell — where the fake GPU wakes up — and the remapped HDP flush register.
    virtual void write_doorbell(volatile uint64_t* doorbell, uint64_t value) = 0;
    virtual void write_register(volatile uint32_t* reg, uint32_t value) = 0;
};
KfdIO& system_kfd_io();  // the real syscalls

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

// GPU memory as a host twin sees it. resolve() checks that [va, va+bytes) lies in memory mapped on this
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

// A KfdIO whose "GPU" runs a host twin of each dispatched kernel instead of its machine code: the fake
// /dev/kfd of the tests (devices/amd/fake). The engine device gives every kernel it loads a twin.
class TwinKfdIO : public KfdIO {
public:
    // The kernel the GPU runs when a dispatch names `kernel`.
    virtual void add_twin(const std::string& kernel, HostTwin twin) = 0;
};

// One GPU node of the KFD topology (/sys/devices/virtual/kfd/kfd/topology/nodes/N).
struct GpuInfo {
    uint32_t node = 0;
    uint32_t gpu_id = 0;
    std::string target;               // "gfx1100", from gfx_target_version
    uint32_t gfx_target_version = 0;  // 110000: major*10000 + minor*100 + stepping
    uint32_t vendor_id = 0, device_id = 0;
    uint32_t drm_render_minor = 0;    // its render node: /dev/dri/renderD<minor>
    uint32_t simd_count = 0, simd_per_cu = 0, max_waves_per_simd = 0, num_xcc = 1;
    uint32_t array_count = 0, simd_arrays_per_engine = 0, lds_size_kb = 0;
    uint64_t vram_bytes = 0;
    uint32_t cu_count() const { return simd_per_cu ? simd_count / simd_per_cu : 0; }
    std::string describe() const;  // "gfx1100, 96 CUs, 24.0 GiB VRAM"
};
// The GPUs KFD knows about, in node order; empty without /dev/kfd. Corrupt topology files throw Error.
std::vector<GpuInfo> list_gpus(KfdIO& io = system_kfd_io());

// A kernel of a code object, from its metadata note (msgpack) and its kernel descriptor (<name>.kd).
struct KernelArgInfo {
    std::string value_kind;  // "global_buffer", "by_value", "hidden_block_count_x", ...
    uint32_t offset = 0, size = 0;
    bool hidden() const { return value_kind.rfind("hidden_", 0) == 0; }
    bool pointer() const { return value_kind == "global_buffer"; }
};
struct KernelInfo {
    std::string name;
    uint64_t descriptor_offset = 0;  // of <name>.kd in the loaded image
    uint32_t kernarg_size = 0, kernarg_align = 16;
    uint32_t group_segment_size = 0, private_segment_size = 0;
    uint32_t wavefront_size = 64, max_workgroup_size = 1024;
    bool dynamic_stack = false;
    std::vector<KernelArgInfo> args;  // explicit arguments first, then hidden ones, as in the metadata
};
// An ELF code object for amdgcn-amd-amdhsa. `where` names it in error messages.
struct CodeObject {
    std::string target;            // "gfx1100"
    uint64_t image_size = 0;       // bytes the loaded image spans (highest PT_LOAD end)
    std::vector<KernelInfo> kernels;
    const KernelInfo* find(const std::string& name) const;
};
CodeObject parse_code_object(std::span<const uint8_t> elf, const std::string& where);

// A GPU allocation: its GPU virtual address is what kernels receive as a pointer. `host` is the CPU's
// mapping of it (always present: buffers are host-visible VRAM or GTT); touching it while queued kernels
// run is a race, which copy_in/copy_out avoid by synchronizing first.
struct Buffer {
    uint64_t va = 0;
    size_t size = 0;
    uint8_t* host = nullptr;
};

struct Kernel {
    KernelInfo info;
    uint64_t kernel_object = 0;  // GPU address of its kernel descriptor (the AQL packet's kernel_object)
};
class Program {
public:
    const Kernel& kernel(const std::string& name) const;  // throws Error naming the kernels it has
    const std::vector<Kernel>& kernels() const { return kernels_; }
    const std::string& name() const { return name_; }

private:
    friend class AmdDevice;
    std::string name_;
    Buffer image_;
    std::vector<Kernel> kernels_;
};

// One explicit kernel argument; its size and kind are checked against the kernel's metadata.
struct KernelArg {
    static KernelArg pointer(uint64_t va) { return make(&va, sizeof va, true); }
    static KernelArg buffer(const Buffer& b, size_t offset = 0) { return pointer(b.va + offset); }
    template <class T>
    static KernelArg value(T v) {
        static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16);
        return make(&v, sizeof v, false);
    }
    uint8_t bytes[16] = {};
    uint32_t size = 0;
    bool is_pointer = false;

private:
    static KernelArg make(const void* p, uint32_t n, bool ptr) {
        KernelArg a;
        std::memcpy(a.bytes, p, n);
        a.size = n;
        a.is_pointer = ptr;
        return a;
    }
};

struct Dim3 {
    uint32_t x = 1, y = 1, z = 1;
};

// A GPU opened through KFD with one AQL compute queue. Not thread-safe: one owner submits.
class AmdDevice {
public:
    // Opens GPU `index` in topology order. Throws NoDevice with the reason when there is none.
    static std::unique_ptr<AmdDevice> open(int index = 0, KfdIO& io = system_kfd_io());
    ~AmdDevice();
    AmdDevice(const AmdDevice&) = delete;
    AmdDevice& operator=(const AmdDevice&) = delete;

    const GpuInfo& info() const;
    std::string name() const;  // "AMD:0 (gfx1100)"

    // Memory is VRAM the CPU can reach through a large BAR, or GTT when the BAR is small.
    Buffer alloc(size_t bytes);
    void free(Buffer b);
    // Copies wait for queued work first, so they never race a running kernel.
    void copy_in(const Buffer& dst, const void* src, size_t bytes, size_t dst_offset = 0);
    void copy_out(void* dst, const Buffer& src, size_t bytes, size_t src_offset = 0);
    // After the CPU stored into buffers through Buffer::host (with no kernel running): makes the stores
    // visible to the GPU (VRAM writes pass the HDP, which must be flushed).
    void flush_host_writes();

    // Loads a code object for this GPU's target; it stays loaded while the device lives.
    const Program& load_program(std::span<const uint8_t> code_object, const std::string& name);
    // Queues kernel `k` on grid×block work-items (grid counts workgroups).
    void launch(const Kernel& k, Dim3 grid, Dim3 block, std::span<const KernelArg> args);
    // The same with the explicit arguments already laid out as the kernel's kernarg bytes.
    void launch_packed(const Kernel& k, Dim3 grid, Dim3 block, std::span<const uint8_t> explicit_args);
    // Waits for all queued work; a GPU fault surfaces here as GpuFault.
    void synchronize();

private:
    struct Impl;
    explicit AmdDevice(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace amd
