// AmdDevice: opening a GPU, its buffers, loading code objects into GPU memory, building kernargs (explicit
// arguments checked against the metadata, hidden ones filled in) and queueing AQL dispatches.
#include "devices/amd/code_object.h"
#include "devices/amd/kfd_impl.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <map>

namespace amd {

namespace {

constexpr uint64_t KERNARG_ARENA_BYTES = 1 << 20;

std::string hex(uint64_t x) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(x));
    return buf;
}

// Probes /dev/kfd so a machine without an AMD GPU gets the reason, not an ioctl error.
void require_kfd(KfdIO& io) {
    int fd = io.open("/dev/kfd", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        io.close(fd);
        return;
    }
    int e = errno;
    if (e == ENOENT)
        throw NoDevice("[amd] no AMD GPU: /dev/kfd does not exist (no AMD GPU, or the amdgpu kernel driver is not loaded)");
    if (e == EACCES || e == EPERM)
        throw NoDevice("[amd] cannot open /dev/kfd: permission denied (add your user to the 'render' and 'video' groups)");
    throw NoDevice(std::string("[amd] cannot open /dev/kfd: ") + std::strerror(e));
}

}  // namespace

const Kernel& Program::kernel(const std::string& kernel_name) const {
    for (const auto& k : kernels_)
        if (k.info.name == kernel_name) return k;
    std::string have;
    for (const auto& k : kernels_) have += (have.empty() ? "" : ", ") + k.info.name;
    throw Error("[amd] program '" + name_ + "' has no kernel '" + kernel_name + "' (it has: " + have + ")");
}

struct AmdDevice::Impl {
    GpuInfo gpu;
    std::string name;
    std::unique_ptr<Kfd> kfd;
    std::unique_ptr<AqlQueue> queue;
    std::map<uint64_t, Allocation> buffers;  // by GPU address
    std::vector<std::pair<std::unique_ptr<Program>, Allocation>> programs;
    Allocation kernargs;
    uint64_t kernarg_used = 0;
    bool vram_visible = true;  // false once the BAR proved too small: then memory comes from GTT

    // CPU-visible memory: VRAM through a large BAR, else GTT.
    Allocation alloc_visible(uint64_t bytes) {
        if (vram_visible) {
            try {
                return kfd->alloc(bytes, MemKind::VRAM, true);
            } catch (const KfdCallError& e) {
                if (e.err != EINVAL) throw;
                vram_visible = false;  // KFD refuses CPU-visible VRAM without resizable BAR
            }
        }
        return kfd->alloc(bytes, MemKind::GTT_UNCACHED, true);
    }

    const Allocation& buffer(const Buffer& b, size_t offset, size_t bytes, const char* op) {
        auto it = buffers.find(b.va);
        if (it == buffers.end()) throw Error("[amd] " + name + ": " + op + ": " + hex(b.va) + " is not a buffer of this device");
        if (offset > b.size || bytes > b.size - offset || b.size > it->second.size)
            throw Error("[amd] " + name + ": " + op + ": " + std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                        " exceed the " + std::to_string(b.size) + "-byte buffer");
        return it->second;
    }

    ~Impl() {
        if (!kfd) return;
        queue.reset();
        for (auto& [va, a] : buffers) kfd->free(a);
        for (auto& [p, a] : programs) kfd->free(a);
        kfd->free(kernargs);
    }
};

AmdDevice::AmdDevice(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AmdDevice::~AmdDevice() = default;

std::unique_ptr<AmdDevice> AmdDevice::open(int index, KfdIO& io) {
    require_kfd(io);
    auto gpus = list_gpus(io);
    if (gpus.empty()) throw NoDevice("[amd] /dev/kfd is present but KFD lists no GPU");
    if (index < 0 || index >= int(gpus.size())) {
        std::string have;
        for (size_t i = 0; i < gpus.size(); i++) have += (i ? ", " : "") + ("AMD:" + std::to_string(i) + " " + gpus[i].target);
        throw NoDevice("[amd] AMD:" + std::to_string(index) + " does not exist (" + std::to_string(gpus.size()) + " GPU(s): " + have + ")");
    }
    auto impl = std::make_unique<Impl>();
    impl->gpu = gpus[index];
    impl->name = "AMD:" + std::to_string(index) + " (" + impl->gpu.target + ")";
    impl->kfd = std::make_unique<Kfd>(io, impl->gpu, impl->name);
    try {
        impl->kernargs = impl->kfd->alloc(KERNARG_ARENA_BYTES, MemKind::GTT_UNCACHED, true);
        impl->queue = std::make_unique<AqlQueue>(*impl->kfd);
    } catch (...) {
        impl->kfd->free(impl->kernargs);
        impl->kernargs = {};
        impl->queue.reset();
        impl->kfd.reset();
        throw;
    }
    return std::unique_ptr<AmdDevice>(new AmdDevice(std::move(impl)));
}

const GpuInfo& AmdDevice::info() const { return impl_->gpu; }
std::string AmdDevice::name() const { return impl_->name; }

Buffer AmdDevice::alloc(size_t bytes) {
    Allocation a = impl_->alloc_visible(bytes);
    impl_->buffers[a.va] = a;
    return Buffer{a.va, bytes, a.cpu};
}

void AmdDevice::free(Buffer b) {
    auto it = impl_->buffers.find(b.va);
    if (it == impl_->buffers.end()) throw Error("[amd] " + impl_->name + ": free: " + hex(b.va) + " is not a buffer of this device");
    impl_->queue->wait_idle();  // a queued kernel may still use it
    impl_->kfd->free(it->second);
    impl_->buffers.erase(it);
}

void AmdDevice::copy_in(const Buffer& dst, const void* src, size_t bytes, size_t dst_offset) {
    const Allocation& a = impl_->buffer(dst, dst_offset, bytes, "copy_in");
    impl_->queue->wait_idle();
    std::memcpy(a.cpu + dst_offset, src, bytes);
    if (a.vram) impl_->kfd->hdp_flush();
}

void AmdDevice::copy_out(void* dst, const Buffer& src, size_t bytes, size_t src_offset) {
    const Allocation& a = impl_->buffer(src, src_offset, bytes, "copy_out");
    impl_->queue->wait_idle();
    std::memcpy(dst, a.cpu + src_offset, bytes);
}

void AmdDevice::flush_host_writes() {
    if (impl_->vram_visible) impl_->kfd->hdp_flush();
}

const Program& AmdDevice::load_program(std::span<const uint8_t> code_object, const std::string& name) {
    CodeObject co = parse_code_object(code_object, name);
    if (co.target != impl_->gpu.target)
        throw Error("[amd] " + name + ": code object is for " + co.target + ", but " + impl_->name + " needs " + impl_->gpu.target);
    Allocation a = impl_->alloc_visible(co.image_size);
    try {
        std::vector<uint8_t> image = build_image(code_object, a.va, name);
        std::memcpy(a.cpu, image.data(), image.size());
        if (a.vram) impl_->kfd->hdp_flush();
    } catch (...) {
        impl_->kfd->free(a);
        throw;
    }
    auto p = std::make_unique<Program>();
    p->name_ = name;
    p->image_ = Buffer{a.va, co.image_size, a.cpu};
    for (auto& k : co.kernels) {
        uint64_t kernel_object = a.va + k.descriptor_offset;
        p->kernels_.push_back(Kernel{std::move(k), kernel_object});
    }
    impl_->programs.emplace_back(std::move(p), a);
    return *impl_->programs.back().first;
}

void AmdDevice::launch(const Kernel& k, Dim3 grid, Dim3 block, std::span<const KernelArg> args) {
    const KernelInfo& ki = k.info;
    std::vector<const KernelArgInfo*> explicit_args;
    uint32_t explicit_end = 0;
    for (const auto& a : ki.args)
        if (!a.hidden()) explicit_args.push_back(&a);
    if (ki.args.empty() && ki.kernarg_size > 0)
        throw Error("[amd] kernel '" + ki.name + "' has no argument metadata: pass its kernarg bytes to launch_packed");
    if (explicit_args.size() != args.size())
        throw Error("[amd] kernel '" + ki.name + "' takes " + std::to_string(explicit_args.size()) + " arguments, got " +
                    std::to_string(args.size()));
    for (const auto* a : explicit_args) explicit_end = std::max(explicit_end, a->offset + a->size);
    std::vector<uint8_t> packed(explicit_end);
    for (size_t i = 0; i < args.size(); i++) {
        const KernelArgInfo& m = *explicit_args[i];
        if (args[i].size != m.size || args[i].is_pointer != m.pointer())
            throw Error("[amd] kernel '" + ki.name + "' argument " + std::to_string(i) + " is a " + std::to_string(m.size) + "-byte " +
                        m.value_kind + ", got a " + std::to_string(args[i].size) + "-byte " + (args[i].is_pointer ? "pointer" : "value"));
        std::memcpy(packed.data() + m.offset, args[i].bytes, m.size);
    }
    launch_packed(k, grid, block, packed);
}

void AmdDevice::launch_packed(const Kernel& k, Dim3 grid, Dim3 block, std::span<const uint8_t> explicit_args) {
    const KernelInfo& ki = k.info;
    auto fail = [&](const std::string& why) { throw Error("[amd] " + impl_->name + ": kernel '" + ki.name + "': " + why); };
    if (!grid.x || !grid.y || !grid.z || !block.x || !block.y || !block.z) fail("empty grid or workgroup");
    uint64_t wg = uint64_t(block.x) * block.y * block.z;
    if (wg > ki.max_workgroup_size) fail("workgroup of " + std::to_string(wg) + " exceeds its limit of " + std::to_string(ki.max_workgroup_size));
    if (block.x > 0xffff || block.y > 0xffff || block.z > 0xffff) fail("workgroup dimension above 65535");
    for (auto [g, b] : {std::pair{grid.x, block.x}, std::pair{grid.y, block.y}, std::pair{grid.z, block.z}})
        if (uint64_t(g) * b > UINT32_MAX) fail("grid of more than 2^32 work-items in one dimension");
    if (ki.group_segment_size > impl_->gpu.lds_size_kb * 1024u && impl_->gpu.lds_size_kb)
        fail("needs " + std::to_string(ki.group_segment_size) + " bytes of LDS; the GPU has " + std::to_string(impl_->gpu.lds_size_kb) + " KiB");
    if (ki.private_segment_size || ki.dynamic_stack) fail("needs scratch memory, which this backend does not set up (no spills allowed)");
    if (explicit_args.size() > ki.kernarg_size) fail("more argument bytes than its kernarg segment holds");

    // Kernargs live in an arena the CP reads at dispatch; when it is full, wait until all are consumed.
    uint64_t align = std::max<uint64_t>(ki.kernarg_align, 64);
    uint64_t offset = round_up(impl_->kernarg_used, align);
    if (offset + ki.kernarg_size > KERNARG_ARENA_BYTES) {
        synchronize();
        offset = 0;
    }
    impl_->kernarg_used = offset + ki.kernarg_size;
    uint8_t* kernarg = impl_->kernargs.cpu + offset;
    std::memset(kernarg, 0, ki.kernarg_size);
    std::memcpy(kernarg, explicit_args.data(), explicit_args.size());
    uint16_t dims = grid.z > 1 || block.z > 1 ? 3 : grid.y > 1 || block.y > 1 ? 2 : 1;
    // Hidden arguments (code object v5): what the HIP runtime would fill; the rest stay zero.
    for (const auto& a : ki.args) {
        uint64_t v;
        const std::string& kind = a.value_kind;
        if (kind == "hidden_block_count_x") v = grid.x;
        else if (kind == "hidden_block_count_y") v = grid.y;
        else if (kind == "hidden_block_count_z") v = grid.z;
        else if (kind == "hidden_group_size_x") v = block.x;
        else if (kind == "hidden_group_size_y") v = block.y;
        else if (kind == "hidden_group_size_z") v = block.z;
        else if (kind == "hidden_grid_dims") v = dims;
        else continue;  // remainders and global offsets are 0: grids are whole workgroups from the origin
        std::memcpy(kernarg + a.offset, &v, std::min<uint32_t>(a.size, 8));
    }

    hsa_kernel_dispatch_packet_t p{};
    p.workgroup_size_x = static_cast<uint16_t>(block.x);
    p.workgroup_size_y = static_cast<uint16_t>(block.y);
    p.workgroup_size_z = static_cast<uint16_t>(block.z);
    p.grid_size_x = grid.x * block.x;
    p.grid_size_y = grid.y * block.y;
    p.grid_size_z = grid.z * block.z;
    p.private_segment_size = ki.private_segment_size;
    p.group_segment_size = ki.group_segment_size;
    p.kernel_object = k.kernel_object;
    p.kernarg_address = reinterpret_cast<void*>(impl_->kernargs.va + offset);
    impl_->queue->dispatch(p, dims);
}

void AmdDevice::synchronize() {
    impl_->queue->wait_idle();
    impl_->kernarg_used = 0;
}

}  // namespace amd
