// Graph capture/replay (tinygrad's TinyJit): the first call of a shape class records every launch
// realize() makes; later calls swap in the new input buffers and replay the launches. Vars are read
// at launch, so the same recording serves every start_pos.
#include "engine/realize_impl.h"

#include "devices/env.h"

#include <chrono>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace engine {

namespace {

struct Capture {
    std::vector<ExecItem> items;
    std::vector<std::shared_ptr<Buffer>> inputs;  // the buffers the recording read its inputs from
    struct Slot {
        size_t item, buffer, input;
    };
    std::vector<Slot> input_slots;                // where each input buffer appears in the items
    std::vector<NodeRef> outputs;
    std::vector<std::string> output_devices;
};

std::string shape_key(const std::vector<Tensor>& inputs) {
    std::string k;
    for (auto& t : inputs) k += t.dtype().name() + shape_str(t.shape()) + "|";
    return k;
}

// The buffers a capture created (minus its outputs) are intermediates: those whose lifetimes over the
// recorded items do not overlap share memory, so a long prefill capture holds only its peak working set.
void plan_memory(Capture& cap, const std::vector<std::shared_ptr<Buffer>>& created) {
    std::unordered_set<const Buffer*> outputs;
    for (auto& o : cap.outputs)
        if (o->op == Op::BUFFER) outputs.insert(&buffer_of(o.get()));
    std::unordered_map<const Buffer*, std::pair<size_t, size_t>> life;  // first, last item
    std::unordered_map<const Buffer*, long> uses;
    for (size_t i = 0; i < cap.items.size(); i++)
        for (auto& b : cap.items[i].buffers) {
            auto [it, fresh] = life.try_emplace(b.get(), i, i);
            if (!fresh) it->second.second = i;
            uses[b.get()]++;
        }
    std::vector<std::vector<Buffer*>> born(cap.items.size()), dead(cap.items.size());
    for (auto& b : created) {
        auto it = life.find(b.get());
        // Kept: outputs, and anything a tensor still holds (state realized inside the captured function).
        if (outputs.count(b.get()) || it == life.end() || b.use_count() > uses[b.get()] + 1) continue;
        born[it->second.first].push_back(b.get());
        dead[it->second.second].push_back(b.get());
    }
    std::multimap<size_t, std::shared_ptr<devices::Memory>> free;  // by capacity
    std::unordered_map<const Buffer*, size_t> capacity;
    for (size_t i = 0; i < cap.items.size(); i++) {
        for (Buffer* b : born[i]) {
            size_t bytes = b->dtype.nbytes(b->numel);
            auto fit = free.lower_bound(bytes);
            if (fit != free.end() && fit->first <= 2 * bytes + 4096) {  // best fit, not wildly larger
                b->mem = fit->second;
                capacity[b] = fit->first;
                free.erase(fit);
            } else {
                b->mem = alloc_memory(b->device, bytes, false);
                capacity[b] = bytes;
            }
        }
        for (Buffer* b : dead[i]) free.insert({capacity.at(b), b->mem});
    }
}

struct RecorderGuard {
    explicit RecorderGuard(Recorder* r) { set_recorder(r); }
    ~RecorderGuard() { set_recorder(nullptr); }
};

}  // namespace

struct Jit::Impl {
    Fn fn;
    std::map<std::string, Capture> captures;
};

Jit::Jit(Fn fn) : impl_(std::make_unique<Impl>()) { impl_->fn = std::move(fn); }
Jit::~Jit() = default;
size_t Jit::n_captured() const { return impl_->captures.size(); }
void Jit::reset() { impl_->captures.clear(); }

std::vector<Tensor> Jit::operator()(const std::vector<Tensor>& inputs_in) {
    std::vector<Tensor> inputs = inputs_in;
    for (auto& t : inputs)
        if (!t.is_realized()) throw Error("[engine] jit: inputs must be realized buffers (realize them before the call)");
    std::string key = shape_key(inputs);
    auto it = impl_->captures.find(key);
    if (it == impl_->captures.end()) {
        if (recorder()) throw Error("[engine] jit: nested captures are not supported");
        Recorder rec;
        std::vector<Tensor> outs;
        {
            RecorderGuard guard(&rec);
            outs = impl_->fn(inputs);
            realize(outs);
        }
        Capture cap;
        cap.items = std::move(rec.items);
        for (auto& t : inputs) cap.inputs.push_back(std::const_pointer_cast<Buffer>(std::static_pointer_cast<const Buffer>(t.node()->arg.obj)));
        for (size_t i = 0; i < cap.items.size(); i++)
            for (size_t b = 0; b < cap.items[i].buffers.size(); b++)
                for (size_t j = 0; j < cap.inputs.size(); j++)
                    if (cap.items[i].buffers[b] == cap.inputs[j]) cap.input_slots.push_back({i, b, j});
        for (auto& o : outs) {
            cap.outputs.push_back(o.node());
            cap.output_devices.push_back(o.device());
        }
        plan_memory(cap, rec.created);
        // The recording run's memory is in the block cache now, in sizes the replays never ask for (they
        // run on the plan's): kept, it stayed resident for the process's life (66 MiB for a 1B prefill).
        release_cached_memory();
        impl_->captures.emplace(key, std::move(cap));
        return outs;
    }

    auto started = std::chrono::steady_clock::now();
    Capture& cap = it->second;
    for (auto& s : cap.input_slots)
        cap.items[s.item].buffers[s.buffer] = std::const_pointer_cast<Buffer>(std::static_pointer_cast<const Buffer>(inputs[s.input].node()->arg.obj));
    std::vector<double> us(cap.items.size(), 0.0);
    bool timed = devices::env::debug() >= 1;
    for (size_t i = 0; i < cap.items.size(); i++) {
        auto t0 = std::chrono::steady_clock::now();
        run_item(cap.items[i]);
        if (timed) us[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    }
    if (timed) debug_report("replay", cap.items, us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count());
    mutable_stats().replays++;
    std::vector<Tensor> outs;
    for (size_t i = 0; i < cap.outputs.size(); i++) outs.push_back(make_tensor(cap.outputs[i], cap.output_devices[i]));
    return outs;
}

}  // namespace engine
