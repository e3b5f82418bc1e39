// The process's KFD context on one GPU: opening /dev/kfd and the render node, acquiring the GPU VM, and
// GPU memory (reserve a CPU address range, allocate at that GPU address, mmap through the render node,
// map to the GPU) — the order tinygrad's KFDIface uses.
#include "devices/amd/kfd_impl.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

namespace amd {

CwsrSizes cwsr_sizes(const GpuInfo& gpu) {
    // Per-CU work-group state the firmware saves on preemption (kfd_queue.c).
    uint32_t major = gpu.gfx_target_version / 10000, minor = gpu.gfx_target_version / 100 % 100;
    uint32_t v = gpu.gfx_target_version;
    uint64_t vgpr = (v == 110000 || v == 110001 || v == 110501 || v == 120000 || v == 120001) ? 0x60000
                    : major == 9                                                              ? 0x80000
                                                                                              : 0x40000;
    uint64_t sgpr = 0x4000, hwreg = 0x1000;
    uint64_t lds = (major == 9 && minor == 5) ? uint64_t(gpu.lds_size_kb) << 10 : 0x10000;
    uint32_t xccs = gpu.num_xcc ? gpu.num_xcc : 1;
    uint64_t cus = gpu.cu_count() / xccs;
    uint64_t waves = cus * gpu.max_waves_per_simd * gpu.simd_per_cu;
    if (major == 9 && gpu.simd_arrays_per_engine) {  // CDNA: bounded by 512 waves per shader engine
        uint64_t engines = gpu.array_count / gpu.simd_arrays_per_engine / xccs;
        waves = std::min<uint64_t>(cus * 40, engines * xccs * 512);
    }
    CwsrSizes s;
    s.ctl_stack = static_cast<uint32_t>(round_up((major == 9 ? 8 : 12) * waves + 8 + 40, PAGE));
    uint64_t wg_data = round_up((vgpr + sgpr + lds + hwreg) * cus, PAGE);
    s.save_area = static_cast<uint32_t>(wg_data + s.ctl_stack);
    uint64_t debug_memory = round_up(waves * 32, 64);
    s.buffer = round_up((s.save_area + debug_memory) * xccs, PAGE);
    return s;
}

std::shared_ptr<KfdProcess> KfdProcess::get(KfdIO& io) {
    static std::mutex mu;
    static std::map<KfdIO*, std::weak_ptr<KfdProcess>> processes;
    std::lock_guard<std::mutex> lock(mu);
    if (auto p = processes[&io].lock()) return p;
    std::shared_ptr<KfdProcess> p(new KfdProcess(io));
    processes[&io] = p;
    return p;
}

KfdProcess::KfdProcess(KfdIO& io_) : io(io_) {
    fd = io.open("/dev/kfd", O_RDWR | O_CLOEXEC);
    if (fd < 0) throw NoDevice(std::string("[amd] cannot open /dev/kfd: ") + std::strerror(errno));
    kfd_ioctl_get_version_args ver{};
    if (io.ioctl(fd, AMDKFD_IOC_GET_VERSION, &ver) < 0 || ver.major_version != 1) {
        io.close(fd);
        throw Error("[amd] /dev/kfd: unsupported KFD interface version " + std::to_string(ver.major_version) + "." +
                    std::to_string(ver.minor_version) + " (expected 1.x)");
    }
    minor_version = ver.minor_version;
    if (minor_version >= 14) {
        kfd_ioctl_runtime_enable_args rt{};
        if (io.ioctl(fd, AMDKFD_IOC_RUNTIME_ENABLE, &rt) < 0 && errno != EBUSY) {  // EBUSY: already enabled
            int e = errno;
            io.close(fd);
            throw Error(std::string("[amd] /dev/kfd: RUNTIME_ENABLE failed: ") + std::strerror(e));
        }
    }
}

KfdProcess::~KfdProcess() {
    if (event_page.va) {
        kfd_ioctl_unmap_memory_from_gpu_args unmap{};
        unmap.handle = event_page.handle;
        unmap.device_ids_array_ptr = reinterpret_cast<uint64_t>(event_page_gpus.data());
        unmap.n_devices = static_cast<uint32_t>(event_page_gpus.size());
        io.ioctl(fd, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &unmap);
        io.munmap(reinterpret_cast<void*>(event_page.va), event_page.size);
        kfd_ioctl_free_memory_of_gpu_args fr{};
        fr.handle = event_page.handle;
        io.ioctl(fd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr);
    }
    io.close(fd);
}

Kfd::Kfd(KfdIO& io_, const GpuInfo& gpu_, const std::string& name_)
    : io(io_), gpu(gpu_), name(name_), process(KfdProcess::get(io_)), kfd_fd(process->fd) {
    std::string render = "/dev/dri/renderD" + std::to_string(gpu.drm_render_minor);
    drm_fd = io.open(render, O_RDWR | O_CLOEXEC);
    if (drm_fd < 0) {
        int e = errno;
        throw NoDevice("[amd] " + name + ": cannot open " + render + ": " + std::strerror(e) +
                       (e == EACCES ? " (add your user to the 'render' group)" : ""));
    }
    try {
        kfd_ioctl_acquire_vm_args vm{};
        vm.drm_fd = static_cast<uint32_t>(drm_fd);
        vm.gpu_id = gpu.gpu_id;
        call(AMDKFD_IOC_ACQUIRE_VM, &vm, "ACQUIRE_VM");
    } catch (...) {
        io.close(drm_fd);
        throw;
    }
}

Kfd::~Kfd() {
    free(mmio_remap_);
    io.close(drm_fd);
}

const Allocation& Kfd::event_page(bool& bind) {
    KfdProcess& p = *process;
    if (!p.event_page.va) {
        p.event_page = alloc(EVENT_PAGE_BYTES, MemKind::GTT_UNCACHED, true);
        p.event_page_gpus = {gpu.gpu_id};
    } else if (std::find(p.event_page_gpus.begin(), p.event_page_gpus.end(), gpu.gpu_id) == p.event_page_gpus.end()) {
        // The CP of this GPU writes mailboxes there too: map the page here as well.
        uint32_t gpu_ids[1] = {gpu.gpu_id};
        kfd_ioctl_map_memory_to_gpu_args map{};
        map.handle = p.event_page.handle;
        map.device_ids_array_ptr = reinterpret_cast<uint64_t>(gpu_ids);
        map.n_devices = 1;
        call(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &map, "MAP_MEMORY_TO_GPU (event page)");
        p.event_page_gpus.push_back(gpu.gpu_id);
    }
    bind = !p.event_page_bound;
    return p.event_page;
}

void Kfd::call(unsigned long request, void* arg, const char* what) {
    int r;
    do r = io.ioctl(kfd_fd, request, arg);
    while (r < 0 && (errno == EINTR || errno == EAGAIN));
    if (r < 0) {
        int e = errno;
        throw KfdCallError("[amd] " + name + ": " + what + " failed: " + std::strerror(e), e);
    }
}

Allocation Kfd::alloc(uint64_t bytes, MemKind kind, bool cpu_access) {
    uint32_t flags = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
    if (kind == MemKind::VRAM) {
        flags |= KFD_IOC_ALLOC_MEM_FLAGS_VRAM | (cpu_access ? KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC : 0);
    } else {
        flags |= KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED |
                 KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
        cpu_access = true;
    }
    Allocation a = allocate(round_up(bytes ? bytes : 1, PAGE), flags, cpu_access ? drm_fd : -1, true,
                            kind == MemKind::VRAM ? "ALLOC_MEMORY_OF_GPU (VRAM)" : "ALLOC_MEMORY_OF_GPU (GTT)");
    a.vram = kind == MemKind::VRAM;
    return a;
}

Allocation Kfd::allocate(uint64_t size, uint32_t flags, int cpu_fd, bool map_gpu, const char* what) {
    Allocation a;
    a.size = size;
    // The GPU address is the CPU address: reserve the range so nothing else in the process takes it.
    void* reserved = io.mmap(nullptr, a.size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserved == MAP_FAILED) throw Error("[amd] " + name + ": cannot reserve " + std::to_string(a.size) + " bytes of address space");
    a.va = reinterpret_cast<uint64_t>(reserved);

    kfd_ioctl_alloc_memory_of_gpu_args args{};
    args.va_addr = a.va;
    args.size = a.size;
    args.gpu_id = gpu.gpu_id;
    args.flags = flags;
    try {
        call(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &args, what);
    } catch (const KfdCallError& e) {
        io.munmap(reserved, a.size);
        if (e.err == ENOMEM) throw KfdCallError("[amd] " + name + ": out of GPU memory allocating " + std::to_string(a.size) + " bytes", e.err);
        throw;
    }
    a.handle = args.handle;
    try {
        if (cpu_fd >= 0) {  // CPU access through the render node (memory) or /dev/kfd (remapped registers)
            void* p = io.mmap(reserved, a.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, cpu_fd, static_cast<off_t>(args.mmap_offset));
            if (p != reserved) throw Error("[amd] " + name + ": cannot map GPU memory for the CPU: " + std::strerror(errno));
            a.cpu = static_cast<uint8_t*>(p);
        }
        if (map_gpu) {
            uint32_t gpu_ids[1] = {gpu.gpu_id};
            kfd_ioctl_map_memory_to_gpu_args map{};
            map.handle = a.handle;
            map.device_ids_array_ptr = reinterpret_cast<uint64_t>(gpu_ids);
            map.n_devices = 1;
            call(AMDKFD_IOC_MAP_MEMORY_TO_GPU, &map, "MAP_MEMORY_TO_GPU");
            a.gpu_mapped = true;
        }
    } catch (...) {
        free(a);
        throw;
    }
    return a;
}

void Kfd::free(const Allocation& a) {
    if (!a.va) return;
    if (a.gpu_mapped) {
        uint32_t gpu_ids[1] = {gpu.gpu_id};
        kfd_ioctl_unmap_memory_from_gpu_args unmap{};
        unmap.handle = a.handle;
        unmap.device_ids_array_ptr = reinterpret_cast<uint64_t>(gpu_ids);
        unmap.n_devices = 1;
        io.ioctl(kfd_fd, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &unmap);
    }
    io.munmap(reinterpret_cast<void*>(a.va), a.size);
    kfd_ioctl_free_memory_of_gpu_args fr{};
    fr.handle = a.handle;
    io.ioctl(kfd_fd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr);
}

void Kfd::hdp_flush() {
    if (!mmio_remap_.va && !mmio_remap_failed_) {
        try {  // mmap'd from /dev/kfd at the offset KFD returns; the GPU never needs to see it
            uint32_t flags = KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
            mmio_remap_ = allocate(PAGE, flags, kfd_fd, false, "ALLOC_MEMORY_OF_GPU (MMIO remap)");
        } catch (const KfdCallError&) {
            mmio_remap_failed_ = true;  // pre-gfx9 GPUs have no remapped page: nothing we can flush
        }
    }
    if (mmio_remap_.cpu)
        io.write_register(reinterpret_cast<volatile uint32_t*>(mmio_remap_.cpu + KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL), 0);
}

}  // namespace amd
