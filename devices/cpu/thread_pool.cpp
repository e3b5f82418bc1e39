// The CPU thread pool: spin-then-sleep workers and a check-in barrier per job (see thread_pool.h).
#include "devices/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <immintrin.h>

namespace devices::cpu {

namespace {
// How long an idle worker spins before sleeping: longer than the gap between kernels of one token
// (sampling, host work), shorter than it takes to notice a busy machine.
constexpr auto SPIN_TIME = std::chrono::microseconds(2000);
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    // Workers start from generation 0 even if they get scheduled after the first job was posted.
    for (int i = 1; i < n_threads; i++) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::work_on_job() {
    for (;;) {
        int64_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
        int64_t b = c * chunk_;
        if (b >= n_) break;
        int64_t e = b + chunk_ < n_ ? b + chunk_ : n_;
        fn_(ctx_, b, e);
    }
}

void ThreadPool::worker_loop() {
    uint32_t seen = 0;
    for (;;) {
        auto spin_until = std::chrono::steady_clock::now() + SPIN_TIME;
        int spins = 0;
        while (generation_.load(std::memory_order_acquire) == seen) {
            _mm_pause();
            if (++spins % 1024 == 0 && std::chrono::steady_clock::now() > spin_until) {
                sleepers_.fetch_add(1, std::memory_order_seq_cst);
                generation_.wait(seen, std::memory_order_acquire);
                sleepers_.fetch_sub(1, std::memory_order_relaxed);
                spin_until = std::chrono::steady_clock::now() + SPIN_TIME;
            }
        }
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load()) return;
        work_on_job();
        checked_in_.fetch_add(1, std::memory_order_release);
    }
}

void ThreadPool::run(HostFn fn, const void* ctx, int64_t n, int64_t grain) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int64_t max_chunks = (n + grain - 1) / grain;
    if (workers_.empty() || max_chunks <= 1) {
        fn(ctx, 0, n);
        return;
    }
    // Twice as many chunks as threads: the caller and a worker that wakes late still share the load.
    int64_t n_chunks = std::min<int64_t>(max_chunks, 2 * int64_t(size()));
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    chunk_ = (n + n_chunks - 1) / n_chunks;
    next_chunk_.store(0, std::memory_order_relaxed);
    checked_in_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
    work_on_job();
    int expected = int(workers_.size());
    while (checked_in_.load(std::memory_order_acquire) != expected) _mm_pause();
}

}  // namespace devices::cpu
