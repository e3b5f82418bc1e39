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
#include <string>

namespace amd {

static_assert(sizeof(hsa_kernel_dispatch_packet_t) == 64, "AQL packets are 64 bytes");
static_assert(offsetof(amd_queue_t, write_dispatch_id) == 56 && offsetof(amd_queue_t, read_dispatch_id) == 128,
              "amd_queue_t layout (the CP reads these offsets)");
static_assert(offsetof(amd_signal_t, value) == 8 && offsetof(amd_signal_t, event_mailbox_ptr) == 16 &&
                  offsetof(amd_signal_t, event_id) == 24,
              "amd_signal_t layout (the CP writes these offsets)");

constexpr const char* KFD_TOPOLOGY = "/sys/devices/virtual/kfd/kfd/topology/nodes";
constexpr uint64_t PAGE = 4096;
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
};

// Sizes of the queue's context-save area (CWSR) the kernel requires for this GPU, as tinygrad computes
// them (kfd_queue.c's checks).
struct CwsrSizes {
    uint32_t ctl_stack = 0;
    uint32_t save_area = 0;  // ctx_save_restore_size: work-group data + control stack
    uint64_t buffer = 0;     // allocation: (save area + debugger memory) per XCC, page-rounded
};
CwsrSizes cwsr_sizes(const GpuInfo& gpu);

// The process's KFD context on one GPU: /dev/kfd and the render node, with the GPU VM acquired.
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

    KfdIO& io;
    const GpuInfo gpu;
    const std::string name;  // "AMD:0 (gfx1100)", for messages
    int kfd_fd = -1, drm_fd = -1;
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
    Allocation ring_, queue_mem_, signal_mem_, event_page_, eop_, cwsr_;
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
