// The fake KFD's state, shared by fake_kfd.cpp (files, fds, ioctls, mmap) and fake_gpu.cpp (the "GPU").
#pragma once

#include "devices/amd/fake/fake_kfd.h"
#include "devices/amd/kfd_impl.h"

#include <map>
#include <set>

namespace amd {

struct FakeKfd::State {
    FakeKfdOptions options;
    std::map<std::string, std::string> files;                 // sysfs topology
    std::map<std::string, std::vector<std::string>> dirs;

    int next_fd = 1000;
    std::map<int, std::string> fds;  // open fd -> path
    std::set<uint32_t> vms;          // gpu_ids whose VM this process acquired
    bool runtime_enabled = false;    // RUNTIME_ENABLE: once per process

    // Address ranges the backend reserved through our mmap (we only ever remap those). Each is followed
    // by an unmapped guard, so running off the end of a buffer always faults instead of landing in a
    // neighbour (a real GPU faults only if the neighbour is unmapped).
    static constexpr uint64_t GUARD = 64 << 10;
    std::map<uint64_t, uint64_t> reservations;  // va -> size (the guard follows)

    struct Alloc {
        uint64_t va = 0, size = 0, handle = 0, mmap_offset = 0;
        uint32_t gpu_id = 0, flags = 0;
        std::set<uint32_t> mapped_on;  // GPUs it is mapped on (MAP_MEMORY_TO_GPU): they may touch it
        bool backed = true;       // host memory behind it (gone after munmap)
    };
    std::map<uint64_t, Alloc> allocs;  // by va
    uint64_t next_handle = 1;
    std::map<uint32_t, uint64_t> vram_used;  // per gpu_id

    struct Queue {
        uint32_t id = 0, gpu_id = 0;
        uint64_t ring = 0, ring_bytes = 0, wptr = 0, rptr = 0, doorbell_offset = 0;
        bool dead = false;  // stopped after a fault, like an evicted hardware queue
    };
    std::map<uint32_t, Queue> queues;
    uint32_t next_queue = 1;
    std::map<uint64_t, uint64_t> doorbell_pages;  // host address -> mmap offset (two pages each)

    struct Event {
        uint32_t id = 0, type = 0, slot = 0;
        bool auto_reset = false, signaled = false;
        kfd_hsa_memory_exception_data memory{};
        kfd_hsa_hw_exception_data hw{};
    };
    std::map<uint32_t, Event> events;
    uint32_t next_event = 1;
    uint64_t event_page_va = 0;

    std::map<std::string, HostTwin> twins;
    std::map<uint64_t, CodeObject> code_objects;  // parsed images by allocation va
    Stats stats;

    const FakeGpuSpec* gpu(uint32_t gpu_id) const;
    // The allocation holding all of [va, va+bytes) that GPU `gpu_id` may access, or nullptr.
    const Alloc* gpu_visible(uint64_t va, uint64_t bytes, uint32_t gpu_id) const;
    void setup_topology();

    // fake_gpu.cpp: the command processor.
    void process(Queue& q, uint64_t doorbell_value);
    void memory_fault(Queue& q, uint64_t va);
};

// The doorbell page offset KFD hands out for a GPU (KFD_MMAP_TYPE_DOORBELL | KFD_MMAP_GPU_ID).
inline uint64_t fake_doorbell_base(uint32_t gpu_id) { return (0x3ull << 62) | (uint64_t(gpu_id) << 46); }

}  // namespace amd
