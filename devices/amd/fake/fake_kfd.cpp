// The fake /dev/kfd: topology files, fds, the KFD ioctls the backend uses (with the kernel's argument
// checks that matter: VM acquired, page alignment, no overlap, mapped queue memory), and mmap of GPU
// memory, which is host memory at the GPU address. The "GPU" itself is in fake_gpu.cpp.
#include "devices/amd/fake/fake_kfd_impl.h"

#include <sys/mman.h>

#include <cerrno>
#include <thread>

namespace amd {

namespace {

int fail(int e) {
    errno = e;
    return -1;
}

bool aligned(uint64_t x) { return x % PAGE == 0; }

}  // namespace

const FakeGpuSpec* FakeKfd::State::gpu(uint32_t gpu_id) const {
    for (const auto& g : options.gpus)
        if (g.gpu_id == gpu_id) return &g;
    return nullptr;
}

const FakeKfd::State::Alloc* FakeKfd::State::gpu_visible(uint64_t va, uint64_t bytes, uint32_t gpu_id) const {
    auto it = allocs.upper_bound(va);
    if (it == allocs.begin()) return nullptr;
    const Alloc& a = std::prev(it)->second;
    if (va - a.va >= a.size || bytes > a.size - (va - a.va)) return nullptr;
    return a.mapped_on.count(gpu_id) && a.backed ? &a : nullptr;
}

void FakeKfd::State::setup_topology() {
    if (!options.kfd_present) return;
    std::string base = KFD_TOPOLOGY;
    auto& nodes = dirs[base];
    nodes.push_back("0");  // node 0: the CPU
    files[base + "/0/gpu_id"] = "0\n";
    files[base + "/0/properties"] = "cpu_cores_count 16\nsimd_count 0\nmem_banks_count 1\ngfx_target_version 0\n";
    for (size_t i = 0; i < options.gpus.size(); i++) {
        const FakeGpuSpec& g = options.gpus[i];
        std::string n = std::to_string(i + 1), dir = base + "/" + n;
        nodes.push_back(n);
        files[dir + "/gpu_id"] = std::to_string(g.gpu_id) + "\n";
        files[dir + "/properties"] =
            "cpu_cores_count 0\nsimd_count " + std::to_string(g.simd_count) + "\nmem_banks_count 1\nlds_size_in_kb " +
            std::to_string(g.lds_size_kb) + "\nsimd_per_cu " + std::to_string(g.simd_per_cu) + "\nmax_waves_per_simd " +
            std::to_string(g.max_waves_per_simd) + "\narray_count " + std::to_string(g.array_count) + "\nsimd_arrays_per_engine " +
            std::to_string(g.simd_arrays_per_engine) + "\nvendor_id 4098\ndevice_id " + std::to_string(g.device_id) +
            "\ngfx_target_version " + std::to_string(g.gfx_target_version) + "\ndrm_render_minor " + std::to_string(128 + i) +
            "\nnum_xcc " + std::to_string(g.num_xcc) + "\n";
        dirs[dir + "/mem_banks"] = {"0"};
        files[dir + "/mem_banks/0/properties"] = "heap_type 1\nsize_in_bytes " + std::to_string(g.vram_bytes) + "\nwidth 384\n";
    }
}

FakeKfd::FakeKfd(FakeKfdOptions options) : s_(std::make_unique<State>()) {
    s_->options = std::move(options);
    s_->setup_topology();
}

FakeKfd::~FakeKfd() {
    // Give back the host memory behind whatever the backend leaked (tests check stats() for leaks).
    for (auto& [va, size] : s_->reservations) ::munmap(reinterpret_cast<void*>(va), size + State::GUARD);
    for (auto& [addr, off] : s_->doorbell_pages) ::munmap(reinterpret_cast<void*>(addr), 0x2000);
}

void FakeKfd::add_twin(const std::string& kernel, HostTwin twin) { s_->twins[kernel] = std::move(twin); }

FakeKfd::Stats FakeKfd::stats() const {
    Stats st = s_->stats;
    st.allocations = s_->allocs.size();
    st.queues = s_->queues.size();
    st.events = s_->events.size();
    st.open_fds = s_->fds.size();
    return st;
}

std::optional<std::string> FakeKfd::read_file(const std::string& path) {
    auto it = s_->files.find(path);
    if (it == s_->files.end()) return std::nullopt;
    return it->second;
}

std::vector<std::string> FakeKfd::list_dir(const std::string& path) {
    auto it = s_->dirs.find(path);
    return it == s_->dirs.end() ? std::vector<std::string>{} : it->second;
}

int FakeKfd::open(const std::string& path, int) {
    bool ok = s_->options.kfd_present && path == "/dev/kfd";
    for (size_t i = 0; s_->options.kfd_present && i < s_->options.gpus.size(); i++)
        ok |= path == "/dev/dri/renderD" + std::to_string(128 + i);
    if (!ok) return fail(ENOENT);
    int fd = s_->next_fd++;
    s_->fds[fd] = path;
    return fd;
}

int FakeKfd::close(int fd) { return s_->fds.erase(fd) ? 0 : fail(EBADF); }

void* FakeKfd::mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) {
    State& s = *s_;
    auto bad = [](int e) {
        errno = e;
        return MAP_FAILED;
    };
    if (fd < 0) {  // anonymous: the backend reserving address space
        if (addr || (flags & MAP_FIXED)) return bad(EINVAL);  // the backend never places reservations
        void* p = ::mmap(nullptr, length + State::GUARD, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return p;
        if (prot != PROT_NONE) ::mprotect(p, length, prot);
        s.reservations[reinterpret_cast<uint64_t>(p)] = length;
        return p;
    }
    auto f = s.fds.find(fd);
    if (f == s.fds.end()) return bad(EBADF);
    if (f->second == "/dev/kfd") {  // doorbell pages, and the remapped register page at its allocation
        for (auto& [va, a] : s.allocs) {
            if (!(a.flags & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP) || a.mmap_offset != uint64_t(offset)) continue;
            if (reinterpret_cast<uint64_t>(addr) != va || length != PAGE || !(flags & MAP_FIXED) || a.backed) return bad(EINVAL);
            if (::mmap(addr, PAGE, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED) return bad(ENOMEM);
            a.backed = true;
            return addr;
        }
        bool known = false;
        for (const auto& [id, q] : s.queues) known |= (q.doorbell_offset & ~uint64_t(0x1fff)) == uint64_t(offset);
        if (!known || length != 0x2000) return bad(EINVAL);
        void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) s.doorbell_pages[reinterpret_cast<uint64_t>(p)] = uint64_t(offset);
        return p;
    }
    // The render node: CPU access to an allocation, at its GPU address (the backend asks MAP_FIXED there).
    for (auto& [va, a] : s.allocs) {
        if (a.mmap_offset != uint64_t(offset)) continue;
        if (reinterpret_cast<uint64_t>(addr) != va || length != a.size || !(flags & MAP_FIXED) || !a.backed) return bad(EINVAL);
        return addr;  // already host memory at that address
    }
    return bad(EINVAL);
}

int FakeKfd::munmap(void* addr, size_t length) {
    State& s = *s_;
    uint64_t va = reinterpret_cast<uint64_t>(addr);
    if (auto r = s.reservations.find(va); r != s.reservations.end() && r->second == length) {
        if (auto a = s.allocs.find(va); a != s.allocs.end())
            a->second.backed = false;  // the GPU loses its view too: the fake has no memory behind it now
        s.reservations.erase(r);
        return ::munmap(addr, length + State::GUARD);
    }
    if (auto d = s.doorbell_pages.find(va); d != s.doorbell_pages.end() && length == 0x2000) {
        s.doorbell_pages.erase(d);
        return ::munmap(addr, length);
    }
    return fail(EINVAL);  // not ours: never unmap memory the fake did not hand out
}

void FakeKfd::write_doorbell(volatile uint64_t* doorbell, uint64_t value) {
    State& s = *s_;
    s.stats.doorbells++;
    uint64_t addr = reinterpret_cast<uint64_t>(doorbell);
    *doorbell = value;
    for (const auto& [page, offset] : s.doorbell_pages) {
        if (addr < page || addr >= page + 0x2000) continue;
        uint64_t target = offset + (addr - page);
        for (auto& [id, q] : s.queues)
            if (q.doorbell_offset == target) return s.process(q, value);
    }
    throw Error("[fake-kfd] doorbell write to an address that is no queue's doorbell");
}

void FakeKfd::write_register(volatile uint32_t* reg, uint32_t value) {
    State& s = *s_;
    uint64_t addr = reinterpret_cast<uint64_t>(reg);
    auto a = s.allocs.upper_bound(addr);
    bool remapped = a != s.allocs.begin() && (std::prev(a)->second.flags & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP) &&
                    std::prev(a)->second.backed && addr - std::prev(a)->first < PAGE;
    if (!remapped) throw Error("[fake-kfd] register write outside a remapped MMIO page");
    *reg = value;
    if (addr - std::prev(a)->first == KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL) s.stats.hdp_flushes++;
}

int FakeKfd::ioctl(int fd, unsigned long request, void* arg) {
    State& s = *s_;
    auto f = s.fds.find(fd);
    if (f == s.fds.end()) return fail(EBADF);
    if (f->second != "/dev/kfd") return fail(ENOTTY);
    auto gpu_ready = [&](uint32_t gpu_id) { return s.gpu(gpu_id) && s.vms.count(gpu_id); };

    switch (request) {
    case AMDKFD_IOC_GET_VERSION: {
        auto* a = static_cast<kfd_ioctl_get_version_args*>(arg);
        a->major_version = 1;
        a->minor_version = 14;  // a current kernel's interface
        return 0;
    }
    case AMDKFD_IOC_RUNTIME_ENABLE: {
        auto* a = static_cast<kfd_ioctl_runtime_enable_args*>(arg);
        if (a->mode_mask || s.runtime_enabled) return fail(a->mode_mask ? EINVAL : EBUSY);
        s.runtime_enabled = true;
        return 0;
    }
    case AMDKFD_IOC_ACQUIRE_VM: {
        auto* a = static_cast<kfd_ioctl_acquire_vm_args*>(arg);
        const FakeGpuSpec* g = s.gpu(a->gpu_id);
        auto drm = s.fds.find(int(a->drm_fd));
        if (!g || drm == s.fds.end()) return fail(EINVAL);
        size_t index = size_t(g - s.options.gpus.data());
        if (drm->second != "/dev/dri/renderD" + std::to_string(128 + index)) return fail(EINVAL);  // another GPU's node
        s.vms.insert(a->gpu_id);
        return 0;
    }
    case AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: {
        auto* a = static_cast<kfd_ioctl_alloc_memory_of_gpu_args*>(arg);
        if (!gpu_ready(a->gpu_id) || !a->size || !aligned(a->va_addr) || !aligned(a->size)) return fail(EINVAL);
        uint32_t where = a->flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_USERPTR |
                                     KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP);
        bool mmio = where == KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP;
        if (where != KFD_IOC_ALLOC_MEM_FLAGS_VRAM && where != KFD_IOC_ALLOC_MEM_FLAGS_GTT && !mmio) return fail(EINVAL);  // others not modeled
        if (mmio && a->size != PAGE) return fail(EINVAL);
        const FakeGpuSpec& g = *s.gpu(a->gpu_id);
        bool vram = where == KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
        if (vram && (a->flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC) && !g.large_bar) return fail(EINVAL);
        if (vram && s.vram_used[a->gpu_id] + a->size > g.vram_bytes) return fail(ENOMEM);
        // The range must be one the backend reserved through us, and free of other allocations.
        auto r = s.reservations.upper_bound(a->va_addr);
        if (r == s.reservations.begin() || a->va_addr + a->size > std::prev(r)->first + std::prev(r)->second) return fail(EINVAL);
        auto next = s.allocs.lower_bound(a->va_addr);
        if (next != s.allocs.end() && next->first < a->va_addr + a->size) return fail(EINVAL);
        if (next != s.allocs.begin() && std::prev(next)->first + std::prev(next)->second.size > a->va_addr) return fail(EINVAL);
        // Memory is host memory at its GPU address from the start; the register page appears when mmap'd.
        if (!mmio && ::mmap(reinterpret_cast<void*>(a->va_addr), a->size, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
            return fail(ENOMEM);
        State::Alloc al;
        al.va = a->va_addr;
        al.size = a->size;
        al.handle = (uint64_t(a->gpu_id) << 32) | s.next_handle++;
        al.mmap_offset = mmio ? uint64_t(a->gpu_id) << KFD_MMAP_GPU_ID_SHIFT : (al.handle & 0xffffffff) << 20;
        al.backed = !mmio;
        al.gpu_id = a->gpu_id;
        al.flags = a->flags;
        s.allocs[al.va] = al;
        if (vram) s.vram_used[a->gpu_id] += a->size;
        a->handle = al.handle;
        a->mmap_offset = al.mmap_offset;
        return 0;
    }
    case AMDKFD_IOC_FREE_MEMORY_OF_GPU: {
        auto* a = static_cast<kfd_ioctl_free_memory_of_gpu_args*>(arg);
        for (auto it = s.allocs.begin(); it != s.allocs.end(); ++it) {
            State::Alloc& al = it->second;
            if (al.handle != a->handle) continue;
            if (!al.mapped_on.empty()) return fail(EBUSY);  // as KFD: unmap from the GPUs first
            if (al.backed) {  // the CPU still maps it: keep the range reserved until it is unmapped
                ::mmap(reinterpret_cast<void*>(al.va), al.size, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                s.reservations[al.va] = al.size;
            }
            if (al.flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) s.vram_used[al.gpu_id] -= al.size;
            s.code_objects.erase(al.va);
            s.allocs.erase(it);
            return 0;
        }
        return fail(EINVAL);
    }
    case AMDKFD_IOC_MAP_MEMORY_TO_GPU:
    case AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: {
        // Both argument structs share this layout.
        auto* a = static_cast<kfd_ioctl_map_memory_to_gpu_args*>(arg);
        bool map = request == AMDKFD_IOC_MAP_MEMORY_TO_GPU;
        for (auto& [va, al] : s.allocs) {
            if (al.handle != a->handle) continue;
            if (a->n_devices == 0 || a->n_devices > 8 || !a->device_ids_array_ptr) return fail(EINVAL);
            const auto* ids = reinterpret_cast<const uint32_t*>(a->device_ids_array_ptr);
            bool vram = al.flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
            for (uint32_t i = 0; i < a->n_devices; i++) {
                if (!gpu_ready(ids[i]) || (vram && ids[i] != al.gpu_id)) return fail(EINVAL);  // peer VRAM is not modeled
                if (!map && !al.mapped_on.count(ids[i])) return fail(EINVAL);
            }
            for (uint32_t i = 0; i < a->n_devices; i++) {
                if (map) al.mapped_on.insert(ids[i]);
                else al.mapped_on.erase(ids[i]);
            }
            a->n_success = a->n_devices;
            return 0;
        }
        return fail(EINVAL);
    }
    case AMDKFD_IOC_CREATE_QUEUE: {
        auto* a = static_cast<kfd_ioctl_create_queue_args*>(arg);
        if (!gpu_ready(a->gpu_id) || a->queue_type != KFD_IOC_QUEUE_TYPE_COMPUTE_AQL) return fail(EINVAL);
        if (a->ring_size < KFD_MIN_QUEUE_RING_SIZE || (a->ring_size & (a->ring_size - 1))) return fail(EINVAL);
        if (a->queue_percentage > KFD_MAX_QUEUE_PERCENTAGE || a->queue_priority > KFD_MAX_QUEUE_PRIORITY) return fail(EINVAL);
        // As kfd_queue_acquire_buffers: each address starts (page-wise) a GPU-mapped buffer object of
        // exactly the expected size — the ring, one page for each pointer, the EOP buffer.
        auto whole_bo = [&](uint64_t addr, uint64_t size) {
            const State::Alloc* bo = s.gpu_visible(addr, 1, a->gpu_id);
            return bo && bo->va == (addr & ~(PAGE - 1)) && (!size || bo->size == size);
        };
        if (!whole_bo(a->ring_base_address, a->ring_size) || !whole_bo(a->write_pointer_address, PAGE) ||
            !whole_bo(a->read_pointer_address, PAGE) || !a->eop_buffer_size || !whole_bo(a->eop_buffer_address, a->eop_buffer_size) ||
            !a->ctx_save_restore_size || !s.gpu_visible(a->ctx_save_restore_address, a->ctx_save_restore_size, a->gpu_id) ||
            !a->ctl_stack_size || a->ctl_stack_size >= a->ctx_save_restore_size)
            return fail(EINVAL);
        State::Queue q;
        q.id = s.next_queue++;
        q.gpu_id = a->gpu_id;
        q.ring = a->ring_base_address;
        q.ring_bytes = a->ring_size;
        q.wptr = a->write_pointer_address;
        q.rptr = a->read_pointer_address;
        q.doorbell_offset = fake_doorbell_base(a->gpu_id) + q.id * 8;
        s.queues[q.id] = q;
        a->queue_id = q.id;
        a->doorbell_offset = q.doorbell_offset;
        return 0;
    }
    case AMDKFD_IOC_DESTROY_QUEUE: {
        auto* a = static_cast<kfd_ioctl_destroy_queue_args*>(arg);
        return s.queues.erase(a->queue_id) ? 0 : fail(EINVAL);
    }
    case AMDKFD_IOC_CREATE_EVENT: {
        auto* a = static_cast<kfd_ioctl_create_event_args*>(arg);
        if (a->event_type != KFD_IOC_EVENT_SIGNAL && a->event_type != KFD_IOC_EVENT_MEMORY && a->event_type != KFD_IOC_EVENT_HW_EXCEPTION)
            return fail(EINVAL);
        if (a->event_page_offset) {  // the handle of the page holding the signal events' mailboxes
            if (s.event_page_va) return fail(EINVAL);
            const State::Alloc* page = nullptr;
            for (const auto& [va, al] : s.allocs)
                if (al.handle == a->event_page_offset) page = &al;
            if (!page || page->size < 0x8000) return fail(EINVAL);
            s.event_page_va = page->va;
        }
        State::Event e;
        e.id = s.next_event++;
        e.type = a->event_type;
        e.auto_reset = a->auto_reset;
        if (e.type == KFD_IOC_EVENT_SIGNAL) {
            if (!s.event_page_va || e.id >= 4096) return fail(EINVAL);
            e.slot = e.id;
        }
        s.events[e.id] = e;
        a->event_id = e.id;
        a->event_slot_index = e.slot;
        a->event_trigger_data = e.id;
        return 0;
    }
    case AMDKFD_IOC_DESTROY_EVENT: {
        auto* a = static_cast<kfd_ioctl_destroy_event_args*>(arg);
        return s.events.erase(a->event_id) ? 0 : fail(EINVAL);
    }
    case AMDKFD_IOC_WAIT_EVENTS: {
        auto* a = static_cast<kfd_ioctl_wait_events_args*>(arg);
        if (!a->num_events || a->num_events > 4096 || !a->events_ptr) return fail(EINVAL);
        auto* data = reinterpret_cast<kfd_event_data*>(a->events_ptr);
        size_t signaled = 0;
        for (uint32_t i = 0; i < a->num_events; i++) {
            auto e = s.events.find(data[i].event_id);
            if (e == s.events.end()) return fail(EINVAL);
            if (!e->second.signaled) continue;
            signaled++;
            if (e->second.type == KFD_IOC_EVENT_MEMORY) data[i].memory_exception_data = e->second.memory;
            if (e->second.type == KFD_IOC_EVENT_HW_EXCEPTION) data[i].hw_exception_data = e->second.hw;
            if (e->second.auto_reset) e->second.signaled = false;
        }
        bool done = a->wait_for_all ? signaled == a->num_events : signaled > 0;
        // The fake GPU already ran everything it was given: nothing will arrive while we wait.
        if (!done && a->timeout) std::this_thread::sleep_for(std::chrono::milliseconds(std::min<uint32_t>(a->timeout, 1)));
        a->wait_result = done ? KFD_IOC_WAIT_RESULT_COMPLETE : KFD_IOC_WAIT_RESULT_TIMEOUT;
        return 0;
    }
    default: return fail(EINVAL);
    }
}

}  // namespace amd
