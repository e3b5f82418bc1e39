// A fixed pool of worker threads for data-parallel kernels. The caller takes part in every job;
// workers spin briefly between jobs and then sleep, so back-to-back decode kernels dispatch in about
// a microsecond, and a worker the OS has descheduled never holds up a job it has not started.
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
    bool claim_and_run(uint64_t job);  // false once the job has no chunks left (or was replaced)

    std::vector<std::thread> workers_;
    // The job's fields are written before `claims_` publishes a new job id. Every claim is a CAS on
    // claims_ = job id | chunk count | next chunk, so a worker holding stale fields cannot claim a
    // chunk of a newer job, and a job cannot finish (freeing the fields) while a chunk is unclaimed.
    std::atomic<HostFn> fn_{nullptr};
    std::atomic<const void*> ctx_{nullptr};
    static constexpr int MAX_CHUNKS = 64;
    int64_t bounds_[MAX_CHUNKS + 1] = {};  // chunk i is [bounds_[i], bounds_[i + 1]), written before claims_
    alignas(64) std::atomic<uint64_t> claims_{0};
    alignas(64) std::atomic<int64_t> done_{0};
    alignas(64) std::atomic<uint32_t> wake_{0};  // futex word: bumped per job for sleeping workers
    std::atomic<int> sleepers_{0};
    std::atomic<bool> stop_{false};
    uint64_t next_job_ = 0;
};

}  // namespace devices::cpu
