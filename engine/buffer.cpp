// Buffers: realized memory on a device. Kernel outputs come from a per-device cache of freed blocks,
// so a forward that runs again (prefill chunks, eager decode) does not go back to the allocator.
#include "engine/ir_impl.h"

#include "devices/device.h"

#include <algorithm>
#include <map>
#include <mutex>

namespace engine {

namespace {

// Freed blocks by size; capped so a burst of large intermediates does not pin memory forever.
struct BlockCache {
    std::mutex mu;
    std::multimap<std::pair<devices::Device*, size_t>, devices::Memory> free;
    size_t cached_bytes = 0;
    static constexpr size_t MAX_CACHED = size_t(4) << 30;
};
BlockCache& cache() {
    static BlockCache* c = new BlockCache;  // outlives static buffers torn down at exit
    return *c;
}

size_t size_class(size_t bytes) { return bytes <= 4096 ? (bytes + 63) / 64 * 64 : (bytes + 4095) / 4096 * 4096; }

}  // namespace

std::shared_ptr<devices::Memory> alloc_memory(devices::Device* dev, size_t bytes, bool fresh) {
    size_t sz = size_class(bytes ? bytes : 1);
    devices::Memory m;
    bool found = false;
    if (!fresh) {
        std::lock_guard lock(cache().mu);
        auto it = cache().free.find({dev, sz});
        if (it != cache().free.end()) {
            m = it->second;
            cache().free.erase(it);
            cache().cached_bytes -= sz;
            found = true;
        }
    }
    if (!found) m = dev->alloc(sz);
    m.size = bytes;
    {
        std::lock_guard lock(cache().mu);
        Stats& st = mutable_stats();
        st.bytes_in_use += sz;
        st.peak_bytes_in_use = std::max(st.peak_bytes_in_use, st.bytes_in_use);
    }
    return std::shared_ptr<devices::Memory>(new devices::Memory(m), [dev, sz](devices::Memory* p) {
        {
            std::lock_guard lock(cache().mu);
            mutable_stats().bytes_in_use -= sz;
            if (cache().cached_bytes + sz <= BlockCache::MAX_CACHED) {
                p->size = sz;
                cache().free.insert({{dev, sz}, *p});
                cache().cached_bytes += sz;
                delete p;
                return;
            }
        }
        dev->free(*p);
        delete p;
    });
}

void release_cached_memory() {
    std::multimap<std::pair<devices::Device*, size_t>, devices::Memory> blocks;
    {
        std::lock_guard lock(cache().mu);
        blocks.swap(cache().free);
        cache().cached_bytes = 0;
    }
    for (auto& [key, m] : blocks) key.first->free(m);
}

void reset_peak_bytes() {
    std::lock_guard lock(cache().mu);
    mutable_stats().peak_bytes_in_use = mutable_stats().bytes_in_use;
}

Buffer::~Buffer() = default;

std::shared_ptr<Buffer> make_buffer(const std::string& device, DType dtype, int64_t numel) {
    auto b = std::make_shared<Buffer>();
    b->device = &devices::get(device);
    b->dtype = dtype;
    b->numel = numel;
    b->mem = alloc_memory(b->device, dtype.nbytes(numel), /*fresh=*/true);  // user-visible: zero-filled
    return b;
}

NodeRef buffer_node(std::shared_ptr<Buffer> buf, const Shape& shape) {
    DType dt = buf->dtype;
    Arg a;
    a.obj = std::move(buf);
    a.dims = shape;
    return make(Op::BUFFER, dt, {}, std::move(a));
}

Buffer& buffer_of(const Node* n) {
    if (n->op == Op::AFTER) n = n->src(0);
    if (n->op != Op::BUFFER) throw Error(std::string("[engine] buffer: ") + op_name(n->op) + " is not a buffer");
    return *const_cast<Buffer*>(static_cast<const Buffer*>(n->arg.obj.get()));
}

}  // namespace engine
