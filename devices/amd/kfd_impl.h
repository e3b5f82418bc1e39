// KFD internals of the AMD device: the process's KFD context (fds, GPU memory, events) and the AQL queue.
// Only this header and the files that implement it see the KFD and HSA headers.
#pragma once

#include "devices/amd/amd.h"

#include <linux/kfd_ioctl.h>

#include <hsa/amd_hsa_queue.h>
#include <hsa/amd_hsa_signal.h>
#include <hsa/hsa.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace amd {

static_assert(sizeof(hsa_kernel_dispatch_packet_t) == 64, "AQL packets are 64 bytes");
static_assert(offsetof(amd_queue_t, write_dispatch_id) == 56 && offsetof(amd_queue_t, read_dispatch_id) == 128,
              "amd_queue_t layout (the CP reads these offsets)");
static_assert(offsetof(amd_signal_t, value) == 8 && offsetof(amd_signal_t, event_mailbox_ptr) == 16 &&
                  offsetof(amd_signal_t, event_id) == 24,
              "amd_signal_t layout (the CP writes these offsets)");

// KFD 1.14 added RUNTIME_ENABLE (Debian's header is 1.11); tinygrad calls it with mode_mask 0 on 1.14+.
struct kfd_ioctl_runtime_enable_args {
    uint64_t r_debug;
    uint32_t mode_mask;
    uint32_t capabilities_mask;
};
constexpr unsigned long AMDKFD_IOC_RUNTIME_ENABLE = 0xC0104B25;  // _IOWR('K', 0x25, 16 bytes)
static_assert(AMDKFD_IOC_RUNTIME_ENABLE == AMDKFD_IOWR(0x25, struct kfd_ioctl_runtime_enable_args));

constexpr const char* KFD_TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes";
constexpr uint64_t PAGE = 4096;
constexpr uint32_t EVENT_PAGE_BYTES = 0x8000;
constexpr uint64_t KFD_MMAP_GPU_ID_SHIFT = 46;  // mmap offsets of /dev/kfd pages carry the gpu_id here  // KFD_SIGNAL_EVENT_LIMIT mailboxes of 8 bytes
inline uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// A KFD ioctl that failed: keeps errno so callers can choose a fallback.
struct KfdCallError : Error {
    KfdCallError(const std::string& m, int e) : Error(m), err(e) {}
    int err;
};

enum class MemKind {
    VRAM,          // device memory; CPU-visible only with `cpu_access` (needs a large BAR)
    GTT_UNCACHED,  // system memory both sides see coherently: rings, signals, kernargs
};

struct Allocation {
    uint64_t va = 0;
    uint64_t size = 0;
    uint64_t handle = 0;
    uint8_t* cpu = nullptr;  // CPU mapping (same address as va), or null
    bool vram = false, gpu_mapped = false;
};

// Sizes of the queue's context-save area (CWSR) the kernel requires for this GPU, as tinygrad computes
// them (kfd_queue.c's checks).
struct CwsrSizes {
    uint32_t ctl_stack = 0;
    uint32_t save_area = 0;  // ctx_save_restore_size: work-group data + control stack
    uint64_t buffer = 0;     // allocation: (save area + debugger memory) per XCC, page-rounded
};
CwsrSizes cwsr_sizes(const GpuInfo& gpu);

// What KFD keeps per process, shared by every GPU opened through the same KfdIO: the /dev/kfd fd (all
// fds of a process name one KFD process), the runtime enable, and the page holding every signal event's
// mailbox, which KFD accepts once per process (CREATE_EVENT with event_page_offset; again is EINVAL).
class KfdProcess {
public:
    static std::shared_ptr<KfdProcess> get(KfdIO& io);  // opens /dev/kfd for the first GPU
    ~KfdProcess();

    KfdIO& io;
    int fd = -1;
    uint32_t minor_version = 0;
    // The event page: allocated on the first GPU that needs it, mapped onto each later one.
    Allocation event_page;
    std::vector<uint32_t> event_page_gpus;
    bool event_page_bound = false;  // handed to KFD

private:
    explicit KfdProcess(KfdIO& io);
};

// The process's KFD context on one GPU: the render node with the GPU VM acquired, and GPU memory.
class Kfd {
public:
    Kfd(KfdIO& io, const GpuInfo& gpu, const std::string& name);
    ~Kfd();
    Kfd(const Kfd&) = delete;
    Kfd& operator=(const Kfd&) = delete;

    Allocation alloc(uint64_t bytes, MemKind kind, bool cpu_access);
    void free(const Allocation& a);
    // Wraps one ioctl on /dev/kfd: throws KfdCallError("[amd] <name>: <what>: <strerror>").
    void call(unsigned long request, void* arg, const char* what);
    // The process's event page, mapped on this GPU; `bind` is true when KFD has not been given it yet.
    const Allocation& event_page(bool& bind);
    // Makes CPU writes to VRAM through the BAR visible to the GPU: they pass through the HDP (host data
    // path), which is flushed by writing its register in the page KFD remaps for user space.
    void hdp_flush();

    KfdIO& io;
    const GpuInfo gpu;
    const std::string name;  // "AMD:0 (gfx1100)", for messages
    std::shared_ptr<KfdProcess> process;
    int kfd_fd = -1, drm_fd = -1;

private:
    Allocation allocate(uint64_t size, uint32_t flags, int cpu_fd, bool map_gpu, const char* what);
    Allocation mmio_remap_;  // the remapped register page (HDP flush), allocated on first use
    bool mmio_remap_failed_ = false;
};

// One AQL compute queue with a completion signal counting the dispatches in flight, and the KFD events
// that report completion interrupts and GPU faults.
class AqlQueue {
public:
    explicit AqlQueue(Kfd& kfd);
    ~AqlQueue();
    AqlQueue(const AqlQueue&) = delete;
    AqlQueue& operator=(const AqlQueue&) = delete;

    // Publishes a kernel-dispatch packet (its header and setup are set here) and rings the doorbell.
    void dispatch(hsa_kernel_dispatch_packet_t packet, uint16_t dims);
    // Waits until every dispatch completed: GpuFault if the GPU faulted, Error on timeout.
    void wait_idle();
    int64_t in_flight() const;

private:
    void release();  // undoes whatever the constructor got done
    void check_alive() const;
    void poll_events(uint32_t timeout_ms);

    Kfd& kfd_;
    Allocation ring_, queue_mem_, signal_mem_, eop_, cwsr_;
    amd_queue_t* queue_ = nullptr;
    amd_signal_t* signal_ = nullptr;
    uint32_t packets_ = 0;  // ring capacity
    uint64_t write_index_ = 0;
    uint32_t queue_id_ = 0;
    bool queue_created_ = false;
    void* doorbell_page_ = nullptr;
    volatile uint64_t* doorbell_ = nullptr;
    uint32_t signal_event_ = 0, memory_event_ = 0, hw_event_ = 0;
    std::string dead_;  // why the queue is unusable (after a fault), or empty
    std::chrono::milliseconds timeout_;
};

}  // namespace amd
