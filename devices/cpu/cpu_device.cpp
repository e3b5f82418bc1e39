// The CPU device: 64-byte aligned host memory, external buffers wrapped in place (large ones copied
// into huge pages), kernels from the LLVM JIT, and a thread pool that splits each kernel's outer loop
// (or a custom kernel's work items).
#include "devices/cpu/cpu_impl.h"
#include "devices/cpu/kernels/kernels.h"
#include "devices/cpu/thread_pool.h"
#include "devices/env.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <string>

namespace devices::cpu {

namespace {

// x86-64 entry point of a generated kernel (see KernelSource).
using KernelFn = void (*)(void** buffers, const int64_t* vars, int64_t begin, int64_t end);

struct CpuProgram : Program {
    KernelFn fn = nullptr;
};

struct KernelCall {
    KernelFn fn;
    void** buffers;
    const int64_t* vars;
};

// Weights wrapped from the mmap'd file sit in 4 KiB pages, and decode streams all of them once per
// token: from 2 MiB pages the same kernels read them 10-30% faster (fewer TLB misses; measured with
// bench_cpu_kernels --thp). So large read-only buffers are copied into transparent huge pages.
constexpr size_t HUGE_PAGE = size_t(2) << 20;
constexpr size_t THP_MIN_BYTES = HUGE_PAGE;  // smaller tensors (norms, biases) stay in place

// Whether [p, p + bytes) lies in one read-only mapping of a file (the GGUF), per /proc/self/maps.
bool in_read_only_file_mapping(const void* p, size_t bytes) {
    std::FILE* maps = std::fopen("/proc/self/maps", "r");
    if (!maps) return false;
    bool found = false;
    unsigned long begin, end, inode;
    char perms[8];
    char line[512];
    while (!found && std::fgets(line, sizeof line, maps))
        if (std::sscanf(line, "%lx-%lx %7s %*s %*s %lu", &begin, &end, perms, &inode) == 4)
            found = begin <= uintptr_t(p) && uintptr_t(p) + bytes <= end && perms[1] == '-' && inode != 0;
    std::fclose(maps);
    return found;
}

// Releases the whole pages of [host, host + bytes) from this process when they are a read-only file
// mapping: they are clean and refault from the page cache if read again, so a copy (or a dropped
// tensor) does not keep them in the RSS.
void release_file_pages(const void* host, size_t bytes) {
    const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (uintptr_t(host) + page - 1) / page * page, end = (uintptr_t(host) + bytes) / page * page;
    if (end > begin && in_read_only_file_mapping(host, bytes))
        madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Whether a buffer of this size lives in huge pages (alloc_huge), decided the same way at free().
bool is_huge(size_t bytes) { return bytes >= THP_MIN_BYTES && env::cpu_thp(); }

// The mapping behind a huge buffer: whole 4 KiB pages, not whole huge pages. The kernel backs only the 2 MiB
// ranges the mapping covers with huge pages, so the tail (under 2 MiB) stays in small pages and holds only
// the buffer's bytes: rounding every weight up to 2 MiB cost the 1B Q8_0 model ~74 MiB of RSS.
size_t mapped_bytes(size_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// 2 MiB-aligned zero pages of their own mapping, advised into transparent huge pages (or nullptr).
// Their own mapping, not the heap: a dropped one (a weight replaced by its packed copy) goes back to
// the system at once instead of staying in the RSS as free heap memory.
void* alloc_huge(size_t bytes) {
    const size_t size = mapped_bytes(bytes);
    void* raw = mmap(nullptr, size + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const uintptr_t begin = uintptr_t(raw), aligned = (begin + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    if (aligned > begin) munmap(raw, aligned - begin);
    if (begin + HUGE_PAGE > aligned) munmap(reinterpret_cast<void*>(aligned + size), begin + HUGE_PAGE - aligned);
    madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);  // advisory: without THP still valid memory
    return reinterpret_cast<void*>(aligned);
}

void free_huge(void* p, size_t bytes) { munmap(p, mapped_bytes(bytes)); }

// Buffers from 128 KiB up get a mapping of their own, whose pages the kernel zeroes when first touched:
// a KV cache's rows past the context in use, or a prefill buffer sized for the largest chunk, then cost
// no memory (zeroing them here with memset made every byte resident: 16 MiB of spare KV rows for the 1B).
constexpr size_t MAPPED_MIN_BYTES = size_t(128) << 10;
bool is_mapped(size_t bytes) { return bytes >= MAPPED_MIN_BYTES; }

// A copy of `bytes` at `host` in huge pages, or nullptr if that fails; the source's file pages are released.
void* copy_to_huge_pages(const void* host, size_t bytes) {
    void* p = alloc_huge(bytes);
    if (!p) return nullptr;
    std::memcpy(p, host, bytes);
    release_file_pages(host, bytes);
    return p;
}

void run_kernel_chunk(const void* ctx, int64_t begin, int64_t end) {
    const KernelCall& c = *static_cast<const KernelCall*>(ctx);
    call_jit(c.fn, c.buffers, c.vars, begin, end);
}

class CpuDevice final : public Device {
public:
    CpuDevice() : pool_(env::threads()) {}
    const std::string& name() const override { return name_; }
    Target target() const override { return {Arch::X86_64, ""}; }
    int n_threads() const override { return pool_.size(); }

    Memory alloc(size_t bytes) override {
        // large buffers (weights packed at load, KV caches) in transparent huge pages, like wrapped weights
        void* p = nullptr;
        if (is_huge(bytes)) {
            p = alloc_huge(bytes);  // zero pages already
        } else if (is_mapped(bytes)) {
            p = mmap(nullptr, mapped_bytes(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) p = nullptr;
        } else {
            const size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
            p = std::aligned_alloc(64, rounded);
            if (p) std::memset(p, 0, rounded);
        }
        if (!p) throw Error("[devices] CPU: out of memory allocating " + std::to_string(bytes) + " bytes");
        return Memory{reinterpret_cast<uint64_t>(p), p, bytes, false};
    }
    void free(Memory& m) override {
        if (!m.external && is_huge(m.size)) free_huge(m.host, m.size);
        else if (!m.external && is_mapped(m.size)) munmap(m.host, mapped_bytes(m.size));
        else if (!m.external) std::free(m.host);
        else release_file_pages(m.host, m.size);  // e.g. a weight replaced by its packed copy
        m = Memory{};
    }
    Memory wrap(const void* host, size_t bytes, Access access) override {
        if (access == Access::STREAMED && is_huge(bytes))
            if (void* p = copy_to_huge_pages(host, bytes)) return Memory{reinterpret_cast<uint64_t>(p), p, bytes, false};
        void* p = const_cast<void*>(host);  // kernels never write external buffers (the engine checks)
        return Memory{reinterpret_cast<uint64_t>(p), p, bytes, true};
    }
    void copy_in(const Memory& dst, size_t offset, const void* src, size_t bytes) override {
        check_range(dst, offset, bytes, "copy_in");
        std::memcpy(static_cast<char*>(dst.host) + offset, src, bytes);
    }
    void copy_out(void* dst, const Memory& src, size_t offset, size_t bytes) override {
        check_range(src, offset, bytes, "copy_out");
        std::memcpy(dst, static_cast<const char*>(src.host) + offset, bytes);
    }

    std::shared_ptr<Program> compile(const KernelSource& src) override {
        auto p = std::make_shared<CpuProgram>();
        p->fn = reinterpret_cast<KernelFn>(jit_.compile(src.llvm_ir, src.name));
        return p;
    }
    void launch(const Program& program, const LaunchArgs& a) override {
        constexpr int MAX_BUFFERS = 64;
        if (a.n_buffers > MAX_BUFFERS) throw Error("[devices] CPU: too many kernel buffers");
        void* ptrs[MAX_BUFFERS];
        for (int i = 0; i < a.n_buffers; i++) ptrs[i] = a.buffers[i]->host;
        KernelCall call{static_cast<const CpuProgram&>(program).fn, ptrs, a.vars};
        if (a.parallel) pool_.run(run_kernel_chunk, &call, a.global_size, 1);
        else if (a.global_size > 0) call_jit(call.fn, call.buffers, call.vars, int64_t(0), a.global_size);
    }
    void run_host(HostFn fn, const void* ctx, int64_t n_work, int64_t grain) override {
        pool_.run(fn, ctx, n_work, grain);
    }
    // The types with a panel format (kernels.h) in panels of 16 rows for the AVX-512 and AVX2 matmuls.
    bool can_pack(gguf::Type type, int64_t rows, int64_t cols) const override {
        return env::cpu_pack() && ::cpu_kernels::active_isa() != ::cpu_kernels::Isa::SCALAR && ::cpu_kernels::can_pack(type, rows, cols);
    }
    // Lookups unpack a row from its panel (cpu_kernels::rows).
    bool rows_read_packed() const override { return true; }
    // Experts: each expert's rows whole panels, so that an expert's tile of rows is one panel.
    bool can_pack_experts(gguf::Type type, int64_t experts, int64_t rows, int64_t cols) const override {
        return rows % ::cpu_kernels::kPanelRows == 0 && can_pack(type, experts * rows, cols);
    }
    // A source in the file mapping is given back as it is packed, a few panels at a time: the whole
    // weight's file pages and its copy are never resident together (the peak of a load was the last
    // weight's size above the model's).
    void pack(gguf::Type type, const void* w, int64_t rows, int64_t cols, void* out) override {
        struct Job {
            gguf::Type type;
            const void* w;
            int64_t rows, cols;
            void* out;
            size_t panel_bytes;
            int64_t n_panels;
            bool release;
        } job{type, w, rows, cols, out, ::cpu_kernels::kPanelRows * *gguf::row_bytes(type, cols),
              rows / ::cpu_kernels::kPanelRows, false};
        job.release = in_read_only_file_mapping(w, job.panel_bytes * size_t(job.n_panels));
        pool_.run([](const void* p, int64_t b, int64_t e) {
            auto j = static_cast<const Job*>(p);
            constexpr int64_t kChunk = 32;  // panels: ~1 MiB of a 2048-column Q8_0 weight
            for (int64_t c = b; c < e; c += kChunk) {
                const int64_t c_end = std::min(e, c + kChunk);
                ::cpu_kernels::pack_rows(j->type, j->w, j->rows, j->cols, j->out, c, c_end);
                // the whole pages read so far in this range; a page shared with the next range goes with it
                // (or with the weight's last range, which rounds up: dropping a clean file page is always safe)
                if (!j->release) continue;
                const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
                const uintptr_t base = uintptr_t(j->w);
                const uintptr_t lo = (base + size_t(c) * j->panel_bytes) / page * page;
                uintptr_t hi = base + size_t(c_end) * j->panel_bytes;
                hi = c_end == j->n_panels ? (hi + page - 1) / page * page : hi / page * page;
                if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
            }
        }, &job, job.n_panels, 1);
    }
    void synchronize() override {}

private:
    static void check_range(const Memory& m, size_t offset, size_t bytes, const char* what) {
        if (offset > m.size || bytes > m.size - offset)
            throw Error(std::string("[devices] CPU: ") + what + " of " + std::to_string(bytes) + " bytes at offset " +
                        std::to_string(offset) + " exceeds a " + std::to_string(m.size) + "-byte buffer");
    }

    std::string name_ = "CPU";
    ThreadPool pool_;
    LlvmJit jit_;
};

}  // namespace

std::unique_ptr<Device> make_device() { return std::make_unique<CpuDevice>(); }

std::vector<std::string> kernel_report() {
    namespace ck = ::cpu_kernels;
    const ck::Isa isa = ck::active_isa();
    std::vector<std::string> out;
    auto features = [](ck::Isa i) {
        return i == ck::Isa::AVX512 ? "AVX-512 F/BW/DQ/VL, VNNI, BF16" : i == ck::Isa::AVX2 ? "AVX2, FMA, F16C" : "no SIMD";
    };
    const ck::Isa best = ck::best_isa();
    out.push_back(std::string("kernels: ") + ck::isa_name(isa) + " (" + features(isa) + ")" +
                  (isa == best ? ", the best this CPU has" : std::string(", set by TINYLLM_CPU_ISA; this CPU has ") + ck::isa_name(best)) +
                  "; AMX " + (ck::amx_active() ? "for prefill (int8 tiles: the 32-element-group types; bf16 tiles: f16, bf16)" : ck::amx_supported() ? "off (TINYLLM_CPU_AMX=0)" : "absent") +
                  "; decode prefetches weights into " + (ck::prefetch_level() == ck::Prefetch::L2 ? "L2" : "L1"));
    // Per weight type: the variant a matmul runs, grouped ("q4_K q6_K: ..."). A type packs when the
    // device takes it at a typical shape (4096 x 4096) and TINYLLM_CPU_PACK is on.
    std::vector<std::pair<std::string, std::string>> groups;  // variant, types
    for (const gguf::TypeTraits& t : gguf::all_types()) {
        if (t.type == gguf::Type::Q8_1 || t.type == gguf::Type::Q8_K) continue;  // activation formats
        std::string how;
        if (env::cpu_pack() && isa != ck::Isa::SCALAR && ck::can_pack(t.type, 4096, 4096))
            how = std::string(ck::isa_name(isa)) + " panels of 16 rows, repacked at load";
        else if (ck::has_hand_kernel(t.type))
            how = std::string(ck::isa_name(isa)) + " rows";
        else if (t.dequantize)
            how = "dequantized to f32 tiles, then the f32 kernel";
        else
            continue;
        auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& p) { return p.first == how; });
        if (g == groups.end()) groups.push_back({how, t.name});
        else g->second += std::string(" ") + t.name;
    }
    for (const auto& [how, types] : groups) out.push_back(types + ": " + how);
    return out;
}

}  // namespace devices::cpu
