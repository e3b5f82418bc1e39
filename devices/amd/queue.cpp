// The AQL compute queue: a ring of 64-byte packets in coherent system memory, an amd_queue_t the CP
// reads its pointers from, a doorbell page mmap'd from /dev/kfd, one completion signal counting the
// dispatches in flight (the CP decrements it), and KFD events for completion interrupts and GPU faults.
// Packet format: HSA Platform System Architecture spec §2.9; queue creation: tinygrad's KFDIface.
#include "devices/amd/kfd_impl.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

namespace amd {

namespace {

constexpr uint32_t RING_BYTES = 1 << 18;  // 4096 packets
constexpr uint32_t EOP_BYTES = 0x1000;

std::chrono::milliseconds timeout_from_env() {
    // TINYLLM_AMD_TIMEOUT_MS: how long synchronize() waits for the GPU before calling it hung.
    const char* s = std::getenv("TINYLLM_AMD_TIMEOUT_MS");
    long ms = s ? std::strtol(s, nullptr, 10) : 0;
    return std::chrono::milliseconds(ms > 0 ? ms : 30000);
}

}  // namespace

AqlQueue::AqlQueue(Kfd& kfd) : kfd_(kfd), timeout_(timeout_from_env()) {
    try {
        ring_ = kfd.alloc(RING_BYTES, MemKind::GTT_UNCACHED, true);
        packets_ = RING_BYTES / sizeof(hsa_kernel_dispatch_packet_t);
        for (uint32_t i = 0; i < packets_; i++) {  // an INVALID header marks a slot the CP must not run
            uint16_t invalid = HSA_PACKET_TYPE_INVALID << HSA_PACKET_HEADER_TYPE;
            std::memcpy(ring_.cpu + i * sizeof(hsa_kernel_dispatch_packet_t), &invalid, 2);
        }

        queue_mem_ = kfd.alloc(sizeof(amd_queue_t), MemKind::GTT_UNCACHED, true);
        queue_ = new (queue_mem_.cpu) amd_queue_t{};
        queue_->hsa_queue.type = HSA_QUEUE_TYPE_SINGLE;
        queue_->hsa_queue.features = HSA_QUEUE_FEATURE_KERNEL_DISPATCH;
        queue_->hsa_queue.base_address = reinterpret_cast<void*>(ring_.va);
        queue_->hsa_queue.size = packets_;
        queue_->queue_properties = AMD_QUEUE_PROPERTIES_IS_PTR64 | AMD_QUEUE_PROPERTIES_ENABLE_PROFILING;
        queue_->read_dispatch_id_field_base_byte_offset = offsetof(amd_queue_t, read_dispatch_id);
        queue_->max_cu_id = kfd.gpu.cu_count() ? kfd.gpu.cu_count() - 1 : 0;
        uint32_t waves_per_cu = kfd.gpu.max_waves_per_simd * kfd.gpu.simd_per_cu;
        queue_->max_wave_id = waves_per_cu ? waves_per_cu - 1 : 0;

        // Events: the process's first signal event hands KFD the page its mailboxes live in.
        bool bind = false;
        const Allocation& event_page = kfd.event_page(bind);
        kfd_ioctl_create_event_args ev{};
        ev.event_page_offset = bind ? event_page.handle : 0;
        ev.event_type = KFD_IOC_EVENT_SIGNAL;
        ev.auto_reset = 1;
        kfd.call(AMDKFD_IOC_CREATE_EVENT, &ev, "CREATE_EVENT (signal)");
        kfd.process->event_page_bound = true;
        signal_event_ = ev.event_id;
        if (ev.event_slot_index >= EVENT_PAGE_BYTES / 8) throw Error("[amd] " + kfd.name + ": KFD gave an event slot outside the event page");
        uint64_t mailbox = event_page.va + uint64_t(ev.event_slot_index) * 8;
        uint32_t trigger = ev.event_trigger_data;
        for (auto [type, id] : {std::pair{KFD_IOC_EVENT_MEMORY, &memory_event_}, std::pair{KFD_IOC_EVENT_HW_EXCEPTION, &hw_event_}}) {
            kfd_ioctl_create_event_args e{};
            e.event_type = type;
            kfd.call(AMDKFD_IOC_CREATE_EVENT, &e, "CREATE_EVENT (exception)");
            *id = e.event_id;
        }

        signal_mem_ = kfd.alloc(sizeof(amd_signal_t), MemKind::GTT_UNCACHED, true);
        signal_ = new (signal_mem_.cpu) amd_signal_t{};
        signal_->kind = AMD_SIGNAL_KIND_USER;
        signal_->event_mailbox_ptr = mailbox;
        signal_->event_id = trigger;

        eop_ = kfd.alloc(EOP_BYTES, MemKind::VRAM, false);
        CwsrSizes cwsr = cwsr_sizes(kfd.gpu);
        cwsr_ = kfd.alloc(cwsr.buffer, MemKind::VRAM, false);

        kfd_ioctl_create_queue_args q{};
        q.ring_base_address = ring_.va;
        q.ring_size = RING_BYTES;
        q.gpu_id = kfd.gpu.gpu_id;
        q.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL;
        q.queue_percentage = KFD_MAX_QUEUE_PERCENTAGE;
        q.queue_priority = 7;
        q.write_pointer_address = queue_mem_.va + offsetof(amd_queue_t, write_dispatch_id);
        q.read_pointer_address = queue_mem_.va + offsetof(amd_queue_t, read_dispatch_id);
        q.eop_buffer_address = eop_.va;
        q.eop_buffer_size = EOP_BYTES;
        q.ctx_save_restore_address = cwsr_.va;
        q.ctx_save_restore_size = cwsr.save_area;
        q.ctl_stack_size = cwsr.ctl_stack;
        kfd.call(AMDKFD_IOC_CREATE_QUEUE, &q, "CREATE_QUEUE");
        queue_id_ = q.queue_id;
        queue_created_ = true;

        // Doorbells come as two pages from /dev/kfd; ours is at the offset KFD returned.
        uint64_t page_offset = q.doorbell_offset & ~uint64_t(0x1fff);
        doorbell_page_ = kfd.io.mmap(nullptr, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED, kfd.kfd_fd, static_cast<off_t>(page_offset));
        if (doorbell_page_ == MAP_FAILED) {
            doorbell_page_ = nullptr;
            throw Error("[amd] " + kfd.name + ": cannot map the queue's doorbell: " + std::strerror(errno));
        }
        doorbell_ = reinterpret_cast<volatile uint64_t*>(static_cast<uint8_t*>(doorbell_page_) + (q.doorbell_offset - page_offset));
    } catch (...) {
        release();
        throw;
    }
}

AqlQueue::~AqlQueue() { release(); }

void AqlQueue::release() {
    if (queue_created_) {
        kfd_ioctl_destroy_queue_args d{};
        d.queue_id = queue_id_;
        kfd_.io.ioctl(kfd_.kfd_fd, AMDKFD_IOC_DESTROY_QUEUE, &d);
        queue_created_ = false;
    }
    if (doorbell_page_) kfd_.io.munmap(doorbell_page_, 0x2000);
    doorbell_page_ = nullptr;
    for (uint32_t* id : {&signal_event_, &memory_event_, &hw_event_}) {
        if (!*id) continue;
        kfd_ioctl_destroy_event_args d{};
        d.event_id = *id;
        kfd_.io.ioctl(kfd_.kfd_fd, AMDKFD_IOC_DESTROY_EVENT, &d);
        *id = 0;
    }
    for (Allocation* a : {&ring_, &queue_mem_, &signal_mem_, &eop_, &cwsr_}) {
        kfd_.free(*a);
        *a = {};
    }
}

void AqlQueue::check_alive() const {
    if (!dead_.empty()) throw Error("[amd] " + kfd_.name + ": the queue is dead after an earlier GPU fault (" + dead_ + "); reopen the device");
}

int64_t AqlQueue::in_flight() const { return __atomic_load_n(&signal_->value, __ATOMIC_ACQUIRE); }

void AqlQueue::dispatch(hsa_kernel_dispatch_packet_t p, uint16_t dims) {
    check_alive();
    uint64_t index = write_index_;
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (index - __atomic_load_n(&queue_->read_dispatch_id, __ATOMIC_ACQUIRE) >= packets_) {  // ring full
        poll_events(1);
        if (std::chrono::steady_clock::now() > deadline) throw Error("[amd] " + kfd_.name + ": the GPU stopped consuming the queue (ring full)");
    }
    p.completion_signal.handle = signal_mem_.va;
    uint16_t header = (HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) | (1 << HSA_PACKET_HEADER_BARRIER) |
                      (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                      (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
    uint16_t setup = static_cast<uint16_t>(dims << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS);

    uint8_t* slot = ring_.cpu + (index % packets_) * sizeof p;
    std::memcpy(slot + 4, reinterpret_cast<const uint8_t*>(&p) + 4, sizeof p - 4);
    __atomic_fetch_add(&signal_->value, 1, __ATOMIC_SEQ_CST);  // the CP decrements it when the kernel ends
    // The header goes last, in one release store: the CP must never see a half-written packet.
    __atomic_store_n(reinterpret_cast<uint32_t*>(slot), uint32_t(header) | uint32_t(setup) << 16, __ATOMIC_RELEASE);
    write_index_ = index + 1;
    __atomic_store_n(&queue_->write_dispatch_id, write_index_, __ATOMIC_RELEASE);
    kfd_.io.write_doorbell(doorbell_, index);
}

void AqlQueue::poll_events(uint32_t timeout_ms) {
    kfd_event_data events[3] = {};
    events[0].event_id = signal_event_;
    events[1].event_id = memory_event_;
    events[2].event_id = hw_event_;
    kfd_ioctl_wait_events_args w{};
    w.events_ptr = reinterpret_cast<uint64_t>(events);
    w.num_events = 3;
    w.wait_for_all = 0;
    w.timeout = timeout_ms;
    kfd_.call(AMDKFD_IOC_WAIT_EVENTS, &w, "WAIT_EVENTS");
    const auto& mem = events[1].memory_exception_data;
    if (mem.gpu_id) {
        char va[32];
        std::snprintf(va, sizeof va, "0x%llx", static_cast<unsigned long long>(mem.va));
        std::string why = mem.failure.NotPresent ? "page not present" : mem.failure.ReadOnly ? "write to read-only page" : "access violation";
        dead_ = std::string("memory fault at ") + va;
        throw GpuFault("[amd] " + kfd_.name + ": GPU memory fault at " + va + " (" + why +
                           "): a kernel touched memory that is not mapped on the GPU",
                       mem.va);
    }
    const auto& hw = events[2].hw_exception_data;
    if (hw.gpu_id) {
        dead_ = "hardware exception";
        throw GpuFault("[amd] " + kfd_.name + ": GPU hardware exception (" + (hw.reset_cause ? "ECC error" : "GPU hang") +
                           (hw.memory_lost ? ", VRAM contents lost" : "") + ")",
                       0);
    }
}

void AqlQueue::wait_idle() {
    check_alive();
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (in_flight() > 0) {
        poll_events(10);
        if (in_flight() > 0 && std::chrono::steady_clock::now() > deadline)
            throw Error("[amd] " + kfd_.name + ": timed out after " + std::to_string(timeout_.count() / 1000) + " s waiting for " +
                        std::to_string(in_flight()) + " dispatch(es) (TINYLLM_AMD_TIMEOUT_MS raises the limit)");
    }
}

}  // namespace amd
