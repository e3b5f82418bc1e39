// The fake GPU's command processor: on a doorbell it consumes AQL packets from the read index up to the
// doorbell value. A kernel dispatch is resolved the way the hardware does it — through GPU memory: the
// kernel object must be a descriptor inside a loaded code object, whose name selects the host twin. Every
// address (packet, kernargs, pointer arguments, what the twin touches) must be GPU-mapped; the first one
// that is not ends the dispatch with a memory fault reported through KFD's memory events.
#include "devices/amd/code_object.h"
#include "devices/amd/fake/fake_kfd_impl.h"

namespace amd {

namespace {

struct Fault {
    uint64_t va;
};

// GPU memory as one GPU sees it: allocations mapped on that GPU.
class CheckedMemory final : public GpuMemory {
public:
    CheckedMemory(const FakeKfd::State& s, uint32_t gpu_id) : s_(s), gpu_id_(gpu_id) {}
    uint8_t* resolve(uint64_t va, size_t bytes) override {
        if (s_.gpu_visible(va, bytes ? bytes : 1, gpu_id_)) return reinterpret_cast<uint8_t*>(va);
        // Report the first byte that is not mapped, as the MMU would.
        auto it = s_.allocs.upper_bound(va);
        if (it != s_.allocs.begin()) {
            const auto& a = std::prev(it)->second;
            if (va - a.va < a.size && s_.gpu_visible(va, 1, gpu_id_)) throw Fault{a.va + a.size};
        }
        throw Fault{va};
    }

private:
    const FakeKfd::State& s_;
    uint32_t gpu_id_;
};

std::string hex(uint64_t x) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(x));
    return buf;
}

}  // namespace

void FakeKfd::State::memory_fault(Queue& q, uint64_t va) {
    stats.faults++;
    q.dead = true;  // KFD evicts a queue whose wave faulted
    for (auto& [id, e] : events) {
        if (e.type != KFD_IOC_EVENT_MEMORY) continue;
        e.signaled = true;
        e.memory = {};
        e.memory.failure.NotPresent = 1;
        e.memory.va = va;
        e.memory.gpu_id = q.gpu_id;
    }
}

namespace {

void hw_exception(FakeKfd::State& s, FakeKfd::State::Queue& q) {
    q.dead = true;
    for (auto& [id, e] : s.events) {
        if (e.type != KFD_IOC_EVENT_HW_EXCEPTION) continue;
        e.signaled = true;
        e.hw = {};
        e.hw.gpu_id = q.gpu_id;
    }
}

// Runs one kernel-dispatch packet; false if it faulted.
bool run_dispatch(FakeKfd::State& s, FakeKfd::State::Queue& q, const hsa_kernel_dispatch_packet_t& p) {
    CheckedMemory mem(s, q.gpu_id);
    try {
        uint32_t dims = (p.setup >> HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS) & 3;
        if (dims < 1 || !p.workgroup_size_x || !p.workgroup_size_y || !p.workgroup_size_z || !p.grid_size_x || !p.grid_size_y ||
            !p.grid_size_z) {
            hw_exception(s, q);  // a malformed packet hangs the CP
            return false;
        }
        mem.resolve(p.kernel_object, sizeof(KernelDescriptor));
        const auto* code = s.gpu_visible(p.kernel_object, sizeof(KernelDescriptor), q.gpu_id);
        auto cached = s.code_objects.find(code->va);
        if (cached == s.code_objects.end()) {
            try {
                auto image = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(code->va), code->size);
                cached = s.code_objects.emplace(code->va, parse_loaded_image(image, "code object at " + hex(code->va))).first;
            } catch (const Error& e) {
                throw Error("[fake-kfd] kernel object " + hex(p.kernel_object) + " is not in a loaded code object: " + e.what());
            }
        }
        const KernelInfo* k = nullptr;
        for (const auto& ki : cached->second.kernels)
            if (ki.descriptor_offset == p.kernel_object - code->va) k = &ki;
        if (!k) throw Error("[fake-kfd] kernel object " + hex(p.kernel_object) + " is not a kernel descriptor of its code object");
        if (p.group_segment_size < k->group_segment_size) {
            hw_exception(s, q);
            return false;
        }

        uint64_t kernarg_va = reinterpret_cast<uint64_t>(p.kernarg_address);
        const uint8_t* kernarg = mem.resolve(kernarg_va, k->kernarg_size);
        for (const auto& a : k->args) {  // every pointer the kernel is given must be GPU memory
            if (!a.pointer() || a.size != 8) continue;
            uint64_t ptr;
            std::memcpy(&ptr, kernarg + a.offset, 8);
            if (ptr) mem.resolve(ptr, 1);
        }
        auto twin = s.twins.find(k->name);
        if (twin == s.twins.end()) throw Error("[fake-kfd] no host twin registered for kernel '" + k->name + "'");

        Dispatch d;
        d.kernel = k->name;
        d.dims = dims;
        d.grid = {p.grid_size_x, p.grid_size_y, p.grid_size_z};
        d.workgroup = {p.workgroup_size_x, p.workgroup_size_y, p.workgroup_size_z};
        d.kernarg = std::span<const uint8_t>(kernarg, k->kernarg_size);
        s.stats.dispatches++;
        twin->second(d, mem);
        return true;
    } catch (const Fault& f) {
        s.memory_fault(q, f.va);
        return false;
    }
}

// The CP's end of a packet: decrement the completion signal and raise its event.
bool complete(FakeKfd::State& s, FakeKfd::State::Queue& q, uint64_t signal_va) {
    if (!signal_va) return true;
    CheckedMemory mem(s, q.gpu_id);
    try {
        auto* sig = reinterpret_cast<amd_signal_t*>(mem.resolve(signal_va, sizeof(amd_signal_t)));
        __atomic_fetch_sub(&sig->value, 1, __ATOMIC_SEQ_CST);
        if (sig->event_mailbox_ptr) {
            uint64_t id = sig->event_id;
            std::memcpy(mem.resolve(sig->event_mailbox_ptr, 8), &id, 8);
            if (auto e = s.events.find(sig->event_id); e != s.events.end() && e->second.type == KFD_IOC_EVENT_SIGNAL)
                e->second.signaled = true;
        }
        return true;
    } catch (const Fault& f) {
        s.memory_fault(q, f.va);
        return false;
    }
}

}  // namespace

void FakeKfd::State::process(Queue& q, uint64_t doorbell_value) {
    if (q.dead) return;
    uint64_t packets = q.ring_bytes / sizeof(hsa_kernel_dispatch_packet_t);
    CheckedMemory mem(*this, q.gpu_id);
    uint64_t* read_index;
    try {
        read_index = reinterpret_cast<uint64_t*>(mem.resolve(q.rptr, 8));
        mem.resolve(q.ring, q.ring_bytes);
    } catch (const Fault& f) {
        return memory_fault(q, f.va);
    }
    for (uint64_t i = __atomic_load_n(read_index, __ATOMIC_ACQUIRE); i <= doorbell_value; i++) {
        const uint8_t* slot = reinterpret_cast<const uint8_t*>(q.ring) + (i % packets) * sizeof(hsa_kernel_dispatch_packet_t);
        uint16_t header = __atomic_load_n(reinterpret_cast<const uint16_t*>(slot), __ATOMIC_ACQUIRE);
        uint32_t type = (header >> HSA_PACKET_HEADER_TYPE) & 0xff;
        if (type == HSA_PACKET_TYPE_INVALID) break;  // not published yet
        if (type != HSA_PACKET_TYPE_KERNEL_DISPATCH) return hw_exception(*this, q);  // barriers etc. are not modeled
        hsa_kernel_dispatch_packet_t p;
        std::memcpy(&p, slot, sizeof p);
        if (!run_dispatch(*this, q, p) || !complete(*this, q, p.completion_signal.handle)) return;
        __atomic_store_n(read_index, i + 1, __ATOMIC_RELEASE);
    }
}

}  // namespace amd
