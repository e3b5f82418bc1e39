// A fixed pool of worker threads for data-parallel kernels. The caller takes part in every job; workers
// spin briefly between jobs and then sleep, so back-to-back decode kernels dispatch in about a microsecond.
#pragma once

#include "devices/device.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace devices::cpu {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // counts the calling thread; 1 = run everything inline
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return int(workers_.size()) + 1; }
    // Runs fn(ctx, b, e) over [0, n) in chunks of at least `grain` items; returns when all are done.
    // Not reentrant: one job at a time (the engine launches kernels from one thread).
    void run(HostFn fn, const void* ctx, int64_t n, int64_t grain);

private:
    void worker_loop();
    void work_on_job();

    std::vector<std::thread> workers_;
    // The current job. Fields are written before `generation_` is bumped (release) and read after a
    // worker sees the bump (acquire); the caller waits for every worker to check in before the next job.
    HostFn fn_ = nullptr;
    const void* ctx_ = nullptr;
    int64_t n_ = 0, chunk_ = 0;
    alignas(64) std::atomic<int64_t> next_chunk_{0};
    alignas(64) std::atomic<uint32_t> generation_{0};
    alignas(64) std::atomic<int> checked_in_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<bool> stop_{false};
};

}  // namespace devices::cpu
