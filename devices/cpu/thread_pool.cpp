// The CPU thread pool: spin-then-sleep workers claiming chunks with a job-tagged CAS (see thread_pool.h).
#include "devices/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <immintrin.h>

namespace devices::cpu {

namespace {
// How long an idle worker spins before sleeping: longer than the gap between kernels of one token
// (sampling, host work), short enough not to burn a core when idle.
constexpr auto SPIN_TIME = std::chrono::microseconds(2000);

// claims_ layout: job id (24 bits) | chunk count (20 bits) | next chunk (20 bits).
constexpr uint64_t CHUNK_BITS = 20, CHUNK_MASK = (uint64_t(1) << CHUNK_BITS) - 1;
uint64_t job_of(uint64_t c) { return c >> (2 * CHUNK_BITS); }
uint64_t count_of(uint64_t c) { return (c >> CHUNK_BITS) & CHUNK_MASK; }
uint64_t next_of(uint64_t c) { return c & CHUNK_MASK; }
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    for (int i = 1; i < n_threads; i++) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
    stop_.store(true);
    wake_.fetch_add(1);
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

bool ThreadPool::claim_and_run(uint64_t job) {
    uint64_t c = claims_.load(std::memory_order_acquire);
    if (job_of(c) != job) return false;
    HostFn fn = fn_.load(std::memory_order_relaxed);
    const void* ctx = ctx_.load(std::memory_order_relaxed);
    for (;;) {
        if (job_of(c) != job || next_of(c) >= count_of(c)) return false;
        if (claims_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) break;
    }
    // the claim holds the job open (done_ counts it), so its bounds cannot be rewritten under us
    const int64_t b = bounds_[next_of(c)], e = bounds_[next_of(c) + 1];
    if (b < e) fn(ctx, b, e);
    done_.fetch_add(1, std::memory_order_release);
    return true;
}

void ThreadPool::worker_loop() {
    uint64_t seen = 0;
    for (;;) {
        auto spin_until = std::chrono::steady_clock::now() + SPIN_TIME;
        int spins = 0;
        uint64_t job;
        while ((job = job_of(claims_.load(std::memory_order_acquire))) == seen) {
            _mm_pause();
            if (stop_.load(std::memory_order_relaxed)) return;
            if (++spins % 1024 == 0 && std::chrono::steady_clock::now() > spin_until) {
                uint32_t w = wake_.load(std::memory_order_acquire);
                sleepers_.fetch_add(1, std::memory_order_seq_cst);
                if (job_of(claims_.load(std::memory_order_seq_cst)) == seen && !stop_.load()) wake_.wait(w, std::memory_order_acquire);
                sleepers_.fetch_sub(1, std::memory_order_relaxed);
                spin_until = std::chrono::steady_clock::now() + SPIN_TIME;
            }
        }
        seen = job;
        while (claim_and_run(job)) {
        }
    }
}

void ThreadPool::run(HostFn fn, const void* ctx, int64_t n, int64_t grain) {
    if (n <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    if (workers_.empty() || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    // Chunks shrink towards the end (guided): each takes 1/(2·threads) of the work not yet in a chunk,
    // whole grains, so the threads run out of work together rather than one finishing a big last chunk
    // alone. Equal chunks (two per thread) left one thread waiting ~9% of a 1B decode (AMD EPYC Zen 4,
    // 2 threads, perf samples in the pool's loops: 9.3% -> 3.5%).
    int64_t n_chunks = 0;
    bounds_[0] = 0;
    while (bounds_[n_chunks] < n) {
        const int64_t left = n - bounds_[n_chunks];
        const int64_t share = std::max(grain, (left / (2 * int64_t(size())) + grain - 1) / grain * grain);
        bounds_[n_chunks + 1] = n_chunks + 1 == MAX_CHUNKS ? n : std::min(n, bounds_[n_chunks] + share);
        n_chunks++;
    }
    fn_.store(fn, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    uint64_t job = next_job_ = (next_job_ + 1) & ((uint64_t(1) << 24) - 1);
    if (job == 0) job = next_job_ = 1;  // 0 is "no job yet"
    claims_.store(job << (2 * CHUNK_BITS) | uint64_t(n_chunks) << CHUNK_BITS, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        wake_.fetch_add(1, std::memory_order_release);
        wake_.notify_all();
    }
    while (claim_and_run(job)) {
    }
    while (done_.load(std::memory_order_acquire) != n_chunks) _mm_pause();
}

}  // namespace devices::cpu
