// The SIMT emulator's scheduler: one fiber per work-item; every lane runs until it reaches a cross-lane op,
// a barrier or its end; a wave whose live lanes all wait at the same cross-lane op executes it with the
// exact lane semantics of lane_ops.cpp; when every live wave waits at a barrier, the work-group passes it.
// Lanes that disagree (divergent cross-lane use) are an error, as is a matrix op with lanes missing.
#include "kernels_amd/emu/emulator.h"
#include "kernels_amd/emu/fiber_impl.h"

#include <cstring>
#include <memory>
#include <vector>

namespace tinyllm::amd::emu {
namespace {

constexpr size_t LDS_BYTES = 64 * 1024;  // per work-group on every supported target
constexpr uint32_t MAX_BLOCK = 1024;

enum class LaneState : uint8_t { RUNNABLE, AT_WAVE_OP, AT_BARRIER, DONE, FAILED };
enum class OpKind : uint8_t { SWIZZLE, BPERMUTE, MATRIX };

const char* op_name(OpKind k, MatrixOp m) {
    if (k == OpKind::SWIZZLE) return "ds_swizzle";
    if (k == OpKind::BPERMUTE) return "ds_bpermute";
    return m == MatrixOp::MFMA_F16 ? "v_mfma_f32_16x16x16f16" : "v_wmma_f32_16x16x16_f16";
}

struct Lane {
    Fiber fiber;
    LaneState state = LaneState::RUNNABLE;
    uint32_t local[3] = {0, 0, 0};
    uint32_t ops = 0, lds_calls = 0;  // cross-lane ops and LDS declarations reached so far
    // the pending cross-lane op; inputs and output live on the lane's stack while it waits
    OpKind op = OpKind::SWIZZLE;
    MatrixOp matrix = MatrixOp::WMMA_GFX11;
    uint32_t imm = 0, site = 0;
    const void* in[3] = {nullptr, nullptr, nullptr};
    void* out = nullptr;
};

struct Dispatch {
    std::string what;
    EmuKernelFn fn = nullptr;
    const void* kernarg = nullptr;
    Dim3 grid, block;
    uint32_t wave = 32;
    uint32_t group[3] = {0, 0, 0};
    std::vector<Lane> lanes;
    Fiber scheduler;
    alignas(64) uint8_t lds[LDS_BYTES];
    std::vector<std::pair<uint32_t, uint32_t>> lds_allocs;  // (offset, bytes) in declaration order
    uint32_t lds_used = 0;
    std::string lane_error;
};

thread_local Dispatch* t_dispatch = nullptr;
thread_local Lane* t_lane = nullptr;
thread_local FiberStacks t_stacks;

void yield_to_scheduler() { fiber_switch(t_lane->fiber, t_dispatch->scheduler); }

// Call after setting t_dispatch->lane_error: nothing on the lane's stack needs destroying any more.
[[noreturn]] void lane_fail() {
    t_lane->state = LaneState::FAILED;
    yield_to_scheduler();
    __builtin_trap();  // a failed lane is never resumed
}

void wait_at_op(OpKind op, uint32_t imm, uint32_t site, const void* in0, const void* in1, const void* in2, void* out) {
    Lane& lane = *t_lane;
    lane.op = op;
    lane.imm = imm;
    lane.site = site;
    lane.in[0] = in0;
    lane.in[1] = in1;
    lane.in[2] = in2;
    lane.out = out;
    lane.state = LaneState::AT_WAVE_OP;
    yield_to_scheduler();
}

void lane_entry(void* arg) {
    fiber_started(t_dispatch->scheduler);
    auto* lane = static_cast<Lane*>(arg);
    t_dispatch->fn(t_dispatch->kernarg);
    lane->state = LaneState::DONE;
    fiber_switch(lane->fiber, t_dispatch->scheduler, /*from_finished=*/true);
    __builtin_trap();
}

std::string lane_where(const Dispatch& d, size_t index) {
    return "lane " + std::to_string(index % d.wave) + " of wave " + std::to_string(index / d.wave) + " in work-group (" +
           std::to_string(d.group[0]) + "," + std::to_string(d.group[1]) + "," + std::to_string(d.group[2]) + ")";
}

std::string describe(const Lane& l) {
    switch (l.state) {
    case LaneState::AT_WAVE_OP:
        return std::string(op_name(l.op, l.matrix)) + " #" + std::to_string(l.ops) + " (line " + std::to_string(l.site) +
               ", pattern " + std::to_string(l.imm) + ")";
    case LaneState::AT_BARRIER: return "a barrier";
    default: return "its end";
    }
}

// Executes the cross-lane op that the live lanes [first, first + count) of a wave wait at.
void execute_wave_op(Dispatch& d, size_t first, size_t count) {
    const Lane* lead = nullptr;
    bool active[64] = {};
    for (size_t i = 0; i < count; i++) {
        const Lane& l = d.lanes[first + i];
        if (l.state != LaneState::AT_WAVE_OP) continue;
        active[i] = true;
        if (!lead) { lead = &l; continue; }
        if (l.op != lead->op || l.imm != lead->imm || l.site != lead->site || l.ops != lead->ops || l.matrix != lead->matrix)
            throw KernelError(d.what + ": divergent cross-lane op: " + lane_where(d, lead - d.lanes.data()) + " is at " +
                              describe(*lead) + ", " + lane_where(d, first + i) + " at " + describe(l));
    }
    if (lead->op == OpKind::MATRIX) {
        MatrixOp op = lead->matrix;
        if (matrix_wave_size(op) != d.wave)
            throw KernelError(d.what + ": " + op_name(lead->op, op) + " needs wave" + std::to_string(matrix_wave_size(op)));
        for (size_t i = 0; i < d.wave; i++)
            if (i >= count || !active[i])
                throw KernelError(d.what + ": " + op_name(lead->op, op) + " with partial EXEC: " + lane_where(d, first + i) +
                                  " is inactive");
        int kp = matrix_k_per_lane(op), ap = matrix_acc_per_lane(op);
        _Float16 a[64 * 16], b[64 * 16];
        float c[64 * 8], out[64 * 8];
        for (size_t i = 0; i < count; i++) {
            const Lane& l = d.lanes[first + i];
            std::memcpy(a + i * kp, l.in[0], kp * sizeof(_Float16));
            std::memcpy(b + i * kp, l.in[1], kp * sizeof(_Float16));
            std::memcpy(c + i * ap, l.in[2], ap * sizeof(float));
        }
        try {
            wave_matrix_op(op, a, b, c, out);
        } catch (const KernelError& e) {
            throw KernelError(d.what + ": " + e.what() + " in wave " + std::to_string(first / d.wave));
        }
        for (size_t i = 0; i < count; i++) std::memcpy(d.lanes[first + i].out, out + i * ap, ap * sizeof(float));
    } else {
        int32_t in[64] = {}, in2[64] = {}, out[64] = {};
        for (size_t i = 0; i < count; i++) {
            if (!active[i]) continue;
            std::memcpy(&in[i], d.lanes[first + i].in[0], 4);
            if (lead->op == OpKind::BPERMUTE) std::memcpy(&in2[i], d.lanes[first + i].in[1], 4);
        }
        if (lead->op == OpKind::SWIZZLE) {
            try {
                wave_swizzle(lead->imm, in, active, out, d.wave);
            } catch (const KernelError& e) {
                throw KernelError(d.what + ": " + e.what());
            }
        } else {
            wave_bpermute(in, in2, active, out, d.wave);  // in: byte addresses, in2: data
        }
        for (size_t i = 0; i < count; i++)
            if (active[i]) std::memcpy(d.lanes[first + i].out, &out[i], 4);
    }
    for (size_t i = 0; i < count; i++)
        if (active[i]) d.lanes[first + i].state = LaneState::RUNNABLE;
}

void run_workgroup(Dispatch& d) {
    size_t n = d.lanes.size();
    for (size_t i = 0; i < n; i++) {
        Lane& l = d.lanes[i];
        l = Lane{};
        l.local[0] = static_cast<uint32_t>(i % d.block.x);
        l.local[1] = static_cast<uint32_t>(i / d.block.x % d.block.y);
        l.local[2] = static_cast<uint32_t>(i / (d.block.x * d.block.y));
        fiber_init(l.fiber, t_stacks.stack(i), FiberStacks::STACK_BYTES, lane_entry, &l);
    }
    d.lds_allocs.clear();
    d.lds_used = 0;
    for (;;) {
        for (auto& l : d.lanes) {
            if (l.state != LaneState::RUNNABLE) continue;
            t_lane = &l;
            fiber_switch(d.scheduler, l.fiber);
            if (l.state == LaneState::FAILED) throw KernelError(d.what + ": " + d.lane_error);
        }
        bool any_live = false, progress = false;
        for (size_t first = 0; first < n; first += d.wave) {
            size_t count = std::min<size_t>(d.wave, n - first);
            size_t live = 0, at_op = 0, at_barrier = 0;
            for (size_t i = first; i < first + count; i++) {
                LaneState s = d.lanes[i].state;
                live += s != LaneState::DONE;
                at_op += s == LaneState::AT_WAVE_OP;
                at_barrier += s == LaneState::AT_BARRIER;
            }
            if (live == 0) continue;
            any_live = true;
            if (at_op == live) {
                execute_wave_op(d, first, count);
                progress = true;
            } else if (at_barrier != live) {
                size_t a = first, b = first;
                while (d.lanes[a].state != LaneState::AT_BARRIER) a++;
                while (d.lanes[b].state != LaneState::AT_WAVE_OP) b++;
                throw KernelError(d.what + ": divergent barrier: " + lane_where(d, a) + " is at a barrier, " + lane_where(d, b) +
                                  " at " + describe(d.lanes[b]));
            }
        }
        if (!any_live) return;
        if (!progress)  // every live wave waits at the barrier
            for (auto& l : d.lanes)
                if (l.state == LaneState::AT_BARRIER) l.state = LaneState::RUNNABLE;
    }
}

}  // namespace

// ---- lane-side entry points (called from kernel code on a fiber) ----

uint32_t workitem_id(int dim) { return t_lane->local[dim]; }
uint32_t workgroup_id(int dim) { return t_dispatch->group[dim]; }
uint32_t workgroup_size(int dim) { return dim == 0 ? t_dispatch->block.x : dim == 1 ? t_dispatch->block.y : t_dispatch->block.z; }

void barrier(uint32_t) {
    t_lane->state = LaneState::AT_BARRIER;
    yield_to_scheduler();
}

int32_t ds_swizzle(int32_t value, uint32_t pattern, uint32_t site) {
    int32_t out = 0;
    t_lane->ops++;
    wait_at_op(OpKind::SWIZZLE, pattern, site, &value, nullptr, nullptr, &out);
    return out;
}

int32_t ds_bpermute(int32_t byte_address, int32_t value, uint32_t site) {
    int32_t out = 0;
    t_lane->ops++;
    wait_at_op(OpKind::BPERMUTE, 0, site, &byte_address, &value, nullptr, &out);
    return out;
}

void matrix_op(MatrixOp op, const _Float16* a, const _Float16* b, const float* c, float* d, uint32_t site) {
    t_lane->ops++;
    t_lane->matrix = op;
    wait_at_op(OpKind::MATRIX, 0, site, a, b, c, d);
}

// Every work-item declares the kernel's LDS arrays in the same order: the first to reach the k-th
// declaration places it, the others get the same address.
void* lds_alloc(size_t bytes, size_t align) {
    Dispatch& d = *t_dispatch;
    uint32_t k = t_lane->lds_calls++;
    if (k < d.lds_allocs.size()) {
        if (d.lds_allocs[k].second != bytes) {
            d.lane_error = "LDS declaration #" + std::to_string(k) + " differs between work-items";
            lane_fail();
        }
        return d.lds + d.lds_allocs[k].first;
    }
    size_t offset = (d.lds_used + align - 1) / align * align;
    if (offset + bytes > LDS_BYTES) {
        d.lane_error = "LDS use of " + std::to_string(offset + bytes) + " bytes exceeds the " + std::to_string(LDS_BYTES) +
                       " bytes of a work-group";
        lane_fail();
    }
    d.lds_allocs.emplace_back(static_cast<uint32_t>(offset), static_cast<uint32_t>(bytes));
    d.lds_used = static_cast<uint32_t>(offset + bytes);
    std::memset(d.lds + offset, 0xff, bytes);  // LDS starts undefined: stale data reads as NaN, not as zeros
    return d.lds + offset;
}

void run_grid(const std::string& what, EmuKernelFn fn, const void* kernarg, Target target, Dim3 grid, Dim3 block) {
    uint64_t threads = uint64_t{block.x} * block.y * block.z;
    if (threads == 0 || threads > MAX_BLOCK) throw KernelError(what + ": work-group size " + std::to_string(threads) + " is not in 1..1024");
    if (grid.x % block.x || grid.y % block.y || grid.z % block.z || grid.x == 0 || grid.y == 0 || grid.z == 0)
        throw KernelError(what + ": grid is not a whole number of work-groups");
    if (t_dispatch) throw KernelError(what + ": emulator re-entered from a kernel");
    auto d = std::make_unique<Dispatch>();
    d->what = what;
    d->fn = fn;
    d->kernarg = kernarg;
    d->grid = grid;
    d->block = block;
    d->wave = wave_size(target);
    d->lanes.resize(threads);
    t_stacks.reserve(threads);
    t_dispatch = d.get();
    try {
        for (uint32_t z = 0; z < grid.z / block.z; z++)
            for (uint32_t y = 0; y < grid.y / block.y; y++)
                for (uint32_t x = 0; x < grid.x / block.x; x++) {
                    d->group[0] = x;
                    d->group[1] = y;
                    d->group[2] = z;
                    run_workgroup(*d);
                }
    } catch (...) {
        t_dispatch = nullptr;
        t_lane = nullptr;
        throw;
    }
    t_dispatch = nullptr;
    t_lane = nullptr;
}

}  // namespace tinyllm::amd::emu
