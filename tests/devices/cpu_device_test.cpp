// The CPU device: memory, the thread pool, and a hand-written LLVM IR kernel through the ORC JIT.
#include "devices/device.h"
#include "devices/cpu/thread_pool.h"

#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

// y[i] = a[i] + b[i] * vars[0] over the outer-loop range [begin, end).
const char* AXPY_IR = R"(
define void @test_axpy(ptr %bufs, ptr %vars, i64 %begin, i64 %end) {
entry:
  %y = load ptr, ptr %bufs
  %pa = getelementptr ptr, ptr %bufs, i64 1
  %a = load ptr, ptr %pa
  %pb = getelementptr ptr, ptr %bufs, i64 2
  %b = load ptr, ptr %pb
  %s64 = load i64, ptr %vars
  %s = sitofp i64 %s64 to float
  %empty = icmp sge i64 %begin, %end
  br i1 %empty, label %exit, label %loop
loop:
  %i = phi i64 [ %begin, %entry ], [ %next, %loop ]
  %ap = getelementptr float, ptr %a, i64 %i
  %av = load float, ptr %ap
  %bp = getelementptr float, ptr %b, i64 %i
  %bv = load float, ptr %bp
  %m = fmul float %bv, %s
  %r = fadd float %av, %m
  %yp = getelementptr float, ptr %y, i64 %i
  store float %r, ptr %yp
  %next = add i64 %i, 1
  %done = icmp eq i64 %next, %end
  br i1 %done, label %exit, label %loop
exit:
  ret void
}
)";

}  // namespace

TEST_CASE("CPU device runs a JIT-compiled kernel across the pool") {
    devices::Device& dev = devices::get("cpu");
    REQUIRE(dev.name() == "CPU");
    const int n = 1001;
    std::vector<float> a(n), b(n), y(n);
    for (int i = 0; i < n; i++) a[i] = float(i), b[i] = float(2 * i + 1);
    devices::Memory my = dev.alloc(n * 4), ma = dev.alloc(n * 4), mb = dev.alloc(n * 4);
    dev.copy_in(ma, 0, a.data(), n * 4);
    dev.copy_in(mb, 0, b.data(), n * 4);
    auto prog = dev.compile({"test_axpy", AXPY_IR});
    const devices::Memory* bufs[] = {&my, &ma, &mb};
    int64_t vars[] = {3};
    dev.launch(*prog, {bufs, 3, vars, 1, n, 1, true});
    dev.copy_out(y.data(), my, 0, n * 4);
    for (int i = 0; i < n; i++) REQUIRE(y[i] == a[i] + 3 * b[i]);
    dev.free(my), dev.free(ma), dev.free(mb);
}

// Resident bytes of libLLVM's code in this process (and whether it is mapped at all).
static size_t llvm_code_resident(bool& mapped) {
    std::FILE* f = std::fopen("/proc/self/smaps", "r");
    REQUIRE(f);
    char line[1024];
    bool in_llvm_code = false;
    size_t total = 0;
    mapped = false;
    while (std::fgets(line, sizeof line, f)) {
        unsigned long begin, end;
        char perms[8];
        if (std::sscanf(line, "%lx-%lx %7s", &begin, &end, perms) == 3) {
            in_llvm_code = perms[2] == 'x' && std::strstr(line, "/libLLVM") != nullptr;
            mapped = mapped || in_llvm_code;
        } else if (size_t kb = 0; in_llvm_code && std::sscanf(line, "Rss: %zu kB", &kb) == 1) {
            total += kb << 10;
        }
    }
    std::fclose(f);
    return total;
}

TEST_CASE("CPU device gives back LLVM's code pages once a kernel is compiled") {
    devices::Device& dev = devices::get("cpu");
    dev.compile({"test_axpy_release", std::string(AXPY_IR).replace(std::string(AXPY_IR).find("@test_axpy"), 10, "@test_axpy_release")});
    bool mapped = false;
    const size_t resident = llvm_code_resident(mapped);
    REQUIRE(mapped);  // Debian's LLVM is a shared library
    INFO("libLLVM code resident: " << (resident >> 10) << " KiB");
    CHECK(resident < (size_t(4) << 20));  // its static constructors alone had touched ~40 MiB
}

TEST_CASE("CPU device reports bad IR and out-of-range copies as errors") {
    devices::Device& dev = devices::get("CPU");
    REQUIRE_THROWS_WITH(dev.compile({"broken", "define void @broken( {"}),
                        Catch::Contains("[devices] CPU: generated LLVM IR does not parse"));
    devices::Memory m = dev.alloc(16);
    char buf[32] = {};
    REQUIRE_THROWS_WITH(dev.copy_in(m, 8, buf, 16), Catch::Contains("exceeds a 16-byte buffer"));
    dev.free(m);
    REQUIRE_THROWS_WITH(devices::get("TPU"), Catch::Contains("unknown device 'TPU' (known: AMD, CPU, NULL)"));
}

// Large weights are copied into huge pages (CpuDevice::wrap); the copy must hold the same bytes, and
// releasing the source pages must never lose data: a file mapping refaults, heap memory is left alone.
TEST_CASE("CPU device wraps large buffers without changing their bytes or their source") {
    devices::Device& dev = devices::get("cpu");
    const size_t bytes = (size_t(3) << 20) + 100;
    std::vector<unsigned char> pattern(bytes);
    for (size_t i = 0; i < bytes; i++) pattern[i] = static_cast<unsigned char>(i * 2654435761u >> 13);

    char path[] = "/tmp/tinyllm_wrap_testXXXXXX";
    const int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, pattern.data(), bytes) == ssize_t(bytes));
    void* file = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    std::remove(path);
    REQUIRE(file != MAP_FAILED);

    std::vector<unsigned char> heap = pattern, out(bytes);
    for (const void* src : {static_cast<const void*>(file), static_cast<const void*>(heap.data())}) {
        devices::Memory m = dev.wrap(src, bytes, devices::Access::STREAMED);
        REQUIRE(m.size == bytes);
        dev.copy_out(out.data(), m, 0, bytes);
        REQUIRE(std::memcmp(out.data(), pattern.data(), bytes) == 0);
        REQUIRE(std::memcmp(src, pattern.data(), bytes) == 0);  // the source still reads the same
        dev.free(m);
    }
    devices::Memory sparse = dev.wrap(file, bytes, devices::Access::SPARSE);  // an embedding table: in place
    CHECK(sparse.host == file);
    CHECK(sparse.external);
    dev.free(sparse);
    munmap(file, bytes);
}

// Resident bytes of this process, from /proc/self/statm (pages).
static size_t resident_bytes() {
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (std::fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return resident * size_t(sysconf(_SC_PAGESIZE));
}

TEST_CASE("CPU device's large buffers take their own bytes of memory, not whole huge pages") {
    // A buffer just over 2 MiB (a packed weight, a KV cache) in transparent huge pages: its first 2 MiB
    // may be one huge page, but its tail must not round up to another (the 1B Q8_0 model lost 74 MiB so).
    devices::Device& dev = devices::get("cpu");
    const size_t bytes = (size_t(2) << 20) + 3 * 4096 + 100;
    devices::Memory m = dev.alloc(bytes);
    REQUIRE(m.size == bytes);
    CHECK(reinterpret_cast<uintptr_t>(m.host) % 64 == 0);
    const size_t before = resident_bytes();
    std::memset(m.host, 0x5A, bytes);  // every page touched
    const size_t grown = resident_bytes() - before;
    CHECK(grown >= bytes - 4096);
    CHECK(grown <= bytes + (size_t(512) << 10));  // (rounded up to 2 MiB it would be 4 MiB)
    std::vector<unsigned char> out(bytes);
    dev.copy_out(out.data(), m, 0, bytes);
    CHECK(out[0] == 0x5A);
    CHECK(out[bytes - 1] == 0x5A);
    dev.free(m);
}

TEST_CASE("CPU thread pool covers every work item exactly once in chunks of whole grains") {
    devices::cpu::ThreadPool pool(4);
    struct Seen {
        std::vector<std::atomic<int>> hits;
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> chunks;
    };
    for (int64_t n : {1, 2, 7, 64, 1000, 4097, 300000}) {
        for (int64_t grain : {1, 3, 64, 100}) {
            Seen seen{std::vector<std::atomic<int>>(n), {}, {}};
            auto fn = [](const void* ctx, int64_t b, int64_t e) {
                auto s = static_cast<Seen*>(const_cast<void*>(ctx));
                for (int64_t i = b; i < e; i++) s->hits[i]++;
                std::lock_guard<std::mutex> lock(s->mu);
                s->chunks.emplace_back(b, e);
            };
            for (int rep = 0; rep < 20; rep++) pool.run(fn, &seen, n, grain);
            REQUIRE(std::count_if(seen.hits.begin(), seen.hits.end(), [](const std::atomic<int>& h) { return h != 20; }) == 0);
            for (auto [b, e] : seen.chunks) REQUIRE(b % grain == 0);  // the split never cuts a grain
            std::sort(seen.chunks.begin(), seen.chunks.end());
            // every run makes the same chunks, which shrink towards its end (the last takes what is left
            // at the pool's chunk limit), so the threads run out of work together
            const size_t count = seen.chunks.size() / 20;
            REQUIRE(seen.chunks.size() == 20 * count);
            auto size = [&](size_t i) { return seen.chunks[20 * i].second - seen.chunks[20 * i].first; };
            for (size_t i = 0; i + 2 < count; i++) CHECK(size(i + 1) <= size(i));
            if (n >= 16 * grain) CHECK(count > 8);
        }
    }
}

TEST_CASE("NULL device compiles kernels and never runs them") {
    devices::Device& dev = devices::get("NULL");
    auto prog = dev.compile({"test_axpy", AXPY_IR});
    devices::Memory m = dev.alloc(16);
    const devices::Memory* bufs[] = {&m, &m, &m};
    int64_t vars[] = {1};
    dev.launch(*prog, {bufs, 3, vars, 1, 4, 1, true});
    float out[4];
    dev.copy_out(out, m, 0, 16);
    REQUIRE(out[0] == 0.0f);
    dev.free(m);
}
