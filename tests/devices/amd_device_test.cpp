// The AMD backend end to end on the fake /dev/kfd: open, allocate, copy in, load the clang-built gfx1100
// code object, dispatch (the fake GPU runs the kernel's host twin), copy out, compare with a reference
// computed here — and bad pointers caught as GPU faults, clean teardown, clear errors without a GPU.
#include "amd_test_util.h"

#include <sys/stat.h>

#include <numeric>

using amd_test::test_kernels;

namespace {

struct Rig {
    amd::FakeKfd kfd;
    std::unique_ptr<amd::AmdDevice> dev;
    const amd::Program* prog = nullptr;

    explicit Rig(amd::FakeKfdOptions options = {}) : kfd(std::move(options)) {
        kfd.add_twin("vadd", amd_test::vadd_twin);
        dev = amd::AmdDevice::open(0, kfd);
        auto elf = test_kernels();
        prog = &dev->load_program(elf, "amd_test_kernels");
        uint32_t hidden = 0;
        for (const auto& a : prog->kernel("scale2d").info.args)
            if (a.value_kind == "hidden_block_count_x") hidden = a.offset;
        kfd.add_twin("scale2d", amd_test::scale2d_twin(hidden));
    }
};

std::vector<float> iota(size_t n, float start) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), start);
    return v;
}

// Runs vadd on n elements (grid rounded up to 64-wide workgroups) and returns c.
std::vector<float> run_vadd(Rig& r, uint32_t n) {
    auto a = iota(n, 1.0f), b = iota(n, 1000.0f);
    amd::Buffer da = r.dev->alloc(n * 4), db = r.dev->alloc(n * 4), dc = r.dev->alloc(n * 4);
    r.dev->copy_in(da, a.data(), n * 4);
    r.dev->copy_in(db, b.data(), n * 4);
    amd::KernelArg args[] = {amd::KernelArg::buffer(da), amd::KernelArg::buffer(db), amd::KernelArg::buffer(dc), amd::KernelArg::value(n)};
    r.dev->launch(r.prog->kernel("vadd"), {(n + 63) / 64}, {64}, args);
    std::vector<float> c(n);
    r.dev->copy_out(c.data(), dc, n * 4);
    for (auto buf : {da, db, dc}) r.dev->free(buf);
    return c;
}

}  // namespace

TEST_CASE("amd device: vector add on the fake gfx1100 matches the reference") {
    Rig r;
    CHECK(r.dev->name() == "AMD:0 (gfx1100)");
    CHECK(r.dev->info().cu_count() == 96);
    const uint32_t n = 1000;  // not a multiple of the workgroup: the tail work-items must do nothing
    auto c = run_vadd(r, n);
    for (uint32_t i = 0; i < n; i++) REQUIRE(c[i] == float(i + 1) + float(i + 1000));
    CHECK(r.kfd.stats().dispatches == 1);
    CHECK(r.kfd.stats().faults == 0);
    // CPU writes into VRAM (the code object, two inputs) pass the HDP, which must be flushed for the GPU.
    CHECK(r.kfd.stats().hdp_flushes == 3);
}

TEST_CASE("amd device: hidden arguments carry the grid (2-D scale kernel)") {
    Rig r;
    const uint32_t rows = 6, cols = 96;  // 2×3 workgroups of 48×2
    auto x = iota(rows * cols, 0.0f);
    amd::Buffer dx = r.dev->alloc(x.size() * 4);
    r.dev->copy_in(dx, x.data(), x.size() * 4);
    amd::KernelArg args[] = {amd::KernelArg::buffer(dx), amd::KernelArg::value(2.5f)};
    r.dev->launch(r.prog->kernel("scale2d"), {cols / 48, rows / 2}, {48, 2}, args);
    std::vector<float> out(x.size());
    r.dev->copy_out(out.data(), dx, out.size() * 4);
    for (size_t i = 0; i < x.size(); i++) REQUIRE(out[i] == x[i] * 2.5f);
}

TEST_CASE("amd device: a pointer outside GPU memory is a GPU fault, not a crash") {
    Rig r;
    amd::Buffer a = r.dev->alloc(256), c = r.dev->alloc(256);
    uint64_t wild = a.va + (64ull << 30);  // nothing is mapped 64 GiB past a buffer
    amd::KernelArg args[] = {amd::KernelArg::buffer(a), amd::KernelArg::pointer(wild), amd::KernelArg::buffer(c), amd::KernelArg::value(64u)};
    r.dev->launch(r.prog->kernel("vadd"), {1}, {64}, args);
    try {
        r.dev->synchronize();
        FAIL("no fault reported");
    } catch (const amd::GpuFault& f) {
        CHECK(f.va == wild);
        CHECK_THAT(f.what(), Catch::Contains("GPU memory fault") && Catch::Contains("AMD:0 (gfx1100)"));
    }
    CHECK(r.kfd.stats().faults == 1);
    // The queue is dead afterwards, as on hardware; the device says so instead of hanging.
    CHECK_THROWS_WITH(r.dev->synchronize(), Catch::Contains("dead after an earlier GPU fault"));
}

TEST_CASE("amd device: reading past the end of a buffer faults at its end") {
    Rig r;
    amd::Buffer a = r.dev->alloc(4096), b = r.dev->alloc(4096), c = r.dev->alloc(4096);
    amd::KernelArg args[] = {amd::KernelArg::buffer(a), amd::KernelArg::buffer(b), amd::KernelArg::buffer(c), amd::KernelArg::value(2048u)};
    r.dev->launch(r.prog->kernel("vadd"), {32}, {64}, args);  // n = 2048 floats, but the buffers hold 1024
    try {
        r.dev->synchronize();
        FAIL("no fault reported");
    } catch (const amd::GpuFault& f) {
        CHECK(f.va == a.va + 4096);
    }
}

TEST_CASE("amd device: a freed buffer is no longer GPU memory") {
    Rig r;
    amd::Buffer a = r.dev->alloc(256), b = r.dev->alloc(256), c = r.dev->alloc(256);
    r.dev->free(b);
    amd::KernelArg args[] = {amd::KernelArg::buffer(a), amd::KernelArg::buffer(b), amd::KernelArg::buffer(c), amd::KernelArg::value(64u)};
    r.dev->launch(r.prog->kernel("vadd"), {1}, {64}, args);
    CHECK_THROWS_AS(r.dev->synchronize(), amd::GpuFault);
}

TEST_CASE("amd device: arguments are checked against the kernel's metadata") {
    Rig r;
    amd::Buffer a = r.dev->alloc(256);
    const amd::Kernel& vadd = r.prog->kernel("vadd");
    amd::KernelArg three[] = {amd::KernelArg::buffer(a), amd::KernelArg::buffer(a), amd::KernelArg::buffer(a)};
    CHECK_THROWS_WITH(r.dev->launch(vadd, {1}, {64}, three), Catch::Contains("takes 4 arguments, got 3"));
    amd::KernelArg swapped[] = {amd::KernelArg::buffer(a), amd::KernelArg::buffer(a), amd::KernelArg::value(1.0), amd::KernelArg::value(1u)};
    CHECK_THROWS_WITH(r.dev->launch(vadd, {1}, {64}, swapped), Catch::Contains("argument 2 is a 8-byte global_buffer"));
    amd::KernelArg ok[] = {amd::KernelArg::buffer(a), amd::KernelArg::buffer(a), amd::KernelArg::buffer(a), amd::KernelArg::value(1u)};
    CHECK_THROWS_WITH(r.dev->launch(vadd, {1}, {2048}, ok), Catch::Contains("exceeds its limit of 1024"));
    CHECK_THROWS_WITH(r.prog->kernel("vmul"), Catch::Contains("has no kernel 'vmul' (it has: vadd, scale2d)"));
    CHECK_THROWS_WITH(r.dev->copy_in(a, ok, 512), Catch::Contains("exceed the 256-byte buffer"));
    CHECK(r.kfd.stats().dispatches == 0);
}

TEST_CASE("amd device: thousands of dispatches wrap the packet ring and the kernarg arena") {
    Rig r;
    const uint32_t n = 64, launches = 20000;  // ring: 4096 packets; kernargs: 16384 slots of 64 bytes
    std::vector<float> ones(n, 1.0f);
    amd::Buffer acc = r.dev->alloc(n * 4), one = r.dev->alloc(n * 4);
    r.dev->copy_in(acc, ones.data(), n * 4);
    r.dev->copy_in(one, ones.data(), n * 4);
    amd::KernelArg args[] = {amd::KernelArg::buffer(acc), amd::KernelArg::buffer(one), amd::KernelArg::buffer(acc), amd::KernelArg::value(n)};
    for (uint32_t i = 0; i < launches; i++) r.dev->launch(r.prog->kernel("vadd"), {1}, {64}, args);
    std::vector<float> out(n);
    r.dev->copy_out(out.data(), acc, n * 4);
    CHECK(out[0] == float(launches + 1));
    CHECK(out[n - 1] == float(launches + 1));
}

TEST_CASE("amd device: without a large BAR, memory comes from GTT and everything still works") {
    amd::FakeGpuSpec small_bar;
    small_bar.large_bar = false;
    Rig r({.kfd_present = true, .gpus = {small_bar}});
    auto c = run_vadd(r, 100);
    CHECK(c[99] == 100.0f + 1099.0f);
    CHECK(r.kfd.stats().hdp_flushes == 0);  // system memory does not pass the HDP
}

TEST_CASE("amd device: a code object for another target is refused") {
    amd::FakeGpuSpec rdna4;
    rdna4.gfx_target_version = 120001;
    amd::FakeKfd kfd({.kfd_present = true, .gpus = {rdna4}});
    auto dev = amd::AmdDevice::open(0, kfd);
    CHECK(dev->info().target == "gfx1201");
    auto elf = test_kernels();
    CHECK_THROWS_WITH(dev->load_program(elf, "k"), Catch::Contains("is for gfx1100, but AMD:0 (gfx1201) needs gfx1201"));
}

TEST_CASE("amd device: closing releases every KFD object it created") {
    amd::FakeKfd kfd;
    kfd.add_twin("vadd", amd_test::vadd_twin);
    {
        auto dev = amd::AmdDevice::open(0, kfd);
        auto elf = test_kernels();
        dev->load_program(elf, "k");
        dev->alloc(1 << 20);  // left allocated: the device frees it on close
        CHECK(kfd.stats().queues == 1);
        CHECK(kfd.stats().allocations > 0);
    }
    auto s = kfd.stats();
    CHECK(s.allocations == 0);
    CHECK(s.queues == 0);
    CHECK(s.events == 0);
    CHECK(s.open_fds == 0);
}

TEST_CASE("amd device: two GPUs in one process each run their own queue") {
    amd::FakeGpuSpec second;
    second.gpu_id = 0x2222;
    amd::FakeKfd kfd({.kfd_present = true, .gpus = {amd::FakeGpuSpec{}, second}});
    kfd.add_twin("vadd", amd_test::vadd_twin);
    auto elf = test_kernels();
    std::unique_ptr<amd::AmdDevice> devs[2] = {amd::AmdDevice::open(0, kfd), amd::AmdDevice::open(1, kfd)};
    for (uint32_t d = 0; d < 2; d++) {
        const amd::Program& p = devs[d]->load_program(elf, "k");
        std::vector<float> x(64, float(d + 1));
        amd::Buffer b = devs[d]->alloc(256);
        devs[d]->copy_in(b, x.data(), 256);
        amd::KernelArg args[] = {amd::KernelArg::buffer(b), amd::KernelArg::buffer(b), amd::KernelArg::buffer(b), amd::KernelArg::value(64u)};
        devs[d]->launch(p.kernel("vadd"), {1}, {64}, args);
        devs[d]->copy_out(x.data(), b, 256);
        CHECK(x[63] == 2.0f * float(d + 1));
    }
    CHECK(devs[1]->name() == "AMD:1 (gfx1100)");
    CHECK(kfd.stats().queues == 2);

    // Memory of one GPU is not mapped on the other: using it there faults.
    amd::Buffer on0 = devs[0]->alloc(256), on1 = devs[1]->alloc(256);
    amd::KernelArg args[] = {amd::KernelArg::buffer(on1), amd::KernelArg::buffer(on0), amd::KernelArg::buffer(on1), amd::KernelArg::value(64u)};
    devs[1]->launch(devs[1]->load_program(elf, "k2").kernel("vadd"), {1}, {64}, args);
    try {
        devs[1]->synchronize();
        FAIL("no fault reported");
    } catch (const amd::GpuFault& f) {
        CHECK(f.va == on0.va);
    }
}

TEST_CASE("amd device: no GPU is a clear message") {
    amd::FakeKfd no_driver({.kfd_present = false, .gpus = {}});
    CHECK(amd::list_gpus(no_driver).empty());
    CHECK_THROWS_WITH(amd::AmdDevice::open(0, no_driver), Catch::Contains("no AMD GPU: /dev/kfd does not exist"));

    amd::FakeKfd no_gpu({.kfd_present = true, .gpus = {}});
    CHECK_THROWS_WITH(amd::AmdDevice::open(0, no_gpu), Catch::Contains("KFD lists no GPU"));

    amd::FakeKfd one;
    CHECK_THROWS_AS(amd::AmdDevice::open(1, one), amd::NoDevice);
    CHECK_THROWS_WITH(amd::AmdDevice::open(1, one), Catch::Contains("AMD:1 does not exist (1 GPU(s): AMD:0 gfx1100)"));
}

TEST_CASE("amd device: this machine's /dev/kfd (real syscalls)") {
    struct stat st;
    if (stat("/dev/kfd", &st) == 0) {
        WARN("SKIPPED: this machine has /dev/kfd; the no-GPU message is tested on machines without one");
        return;
    }
    CHECK(amd::list_gpus().empty());
    CHECK_THROWS_WITH(amd::AmdDevice::open(), Catch::Contains("no AMD GPU: /dev/kfd does not exist"));
}

TEST_CASE("amd topology: GPU nodes with their properties, CPU nodes skipped") {
    amd::FakeGpuSpec a, b;
    b.gpu_id = 0x1234;
    b.gfx_target_version = 90010;  // gfx90a: the stepping prints in hex
    b.simd_count = 440;
    b.simd_per_cu = 4;
    b.vram_bytes = 64ull << 30;
    amd::FakeKfd kfd({.kfd_present = true, .gpus = {a, b}});
    auto gpus = amd::list_gpus(kfd);
    REQUIRE(gpus.size() == 2);
    CHECK(gpus[0].target == "gfx1100");
    CHECK(gpus[0].node == 1);
    CHECK(gpus[0].drm_render_minor == 128);
    CHECK(gpus[0].device_id == 0x744c);
    CHECK(gpus[0].describe() == "gfx1100, 96 CUs, 24.0 GiB VRAM");
    CHECK(gpus[1].target == "gfx90a");
    CHECK(gpus[1].gpu_id == 0x1234);
    CHECK(gpus[1].describe() == "gfx90a, 110 CUs, 64.0 GiB VRAM");
}

TEST_CASE("amd topology: a malformed properties file is a clear error") {
    // Only the sysfs side matters here: a KfdIO that serves two topology files.
    struct Sysfs : amd::KfdIO {
        int open(const std::string&, int) override { return -1; }
        int close(int) override { return 0; }
        int ioctl(int, unsigned long, void*) override { return -1; }
        void* mmap(void*, size_t, int, int, int, off_t) override { return nullptr; }
        int munmap(void*, size_t) override { return 0; }
        void write_doorbell(volatile uint64_t*, uint64_t) override {}
        void write_register(volatile uint32_t*, uint32_t) override {}
        std::vector<std::string> list_dir(const std::string& p) override {
            return p.ends_with("/nodes") ? std::vector<std::string>{"1", "not-a-node"} : std::vector<std::string>{};
        }
        std::optional<std::string> read_file(const std::string& p) override {
            if (p.ends_with("/1/gpu_id")) return "4660\n";
            if (p.ends_with("/1/properties")) return "simd_count 192\ngfx_target_version eleven\n";
            return std::nullopt;
        }
    } sysfs;
    CHECK_THROWS_WITH(amd::list_gpus(sysfs), Catch::Contains("nodes/1/properties: malformed line 'gfx_target_version eleven'"));
}
