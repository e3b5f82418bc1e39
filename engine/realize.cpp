// realize(): schedule the graph, lower and compile each kernel (cached by its kernel-IR node), run the
// items in order, then point the realized tensors at their buffers. Also the DEBUG reports.
#include "engine/op_call_impl.h"
#include "engine/realize_impl.h"
#include "engine/rewrite.h"

#include "devices/env.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace engine {

using detail::TensorImpl;

namespace {

std::vector<std::weak_ptr<TensorImpl>>& pending_assigns() {
    static std::vector<std::weak_ptr<TensorImpl>> p;
    return p;
}
Recorder* g_recorder = nullptr;
std::vector<KernelInfo> g_last_schedule;

// Kernels compile once per (kernel IR, device); the IR node is hash-consed, so equal kernels share it.
std::shared_ptr<const CompiledKernel> compile(const LoweredKernel& lk, devices::Device& dev) {
    static std::mutex mu;
    static std::unordered_map<const Node*, std::unordered_map<devices::Device*, std::shared_ptr<const CompiledKernel>>> cache;
    std::lock_guard lock(mu);
    auto& slot = cache[lk.ast.get()][&dev];
    if (slot) return slot;
    auto ck = std::make_shared<CompiledKernel>();
    ck->rendered = render_llvm(lk, dev.target());
    ck->ast = lk.ast;
    if (devices::env::debug() >= 4) std::fprintf(stderr, "[engine] %s:\n%s\n", ck->rendered.name.c_str(), ck->rendered.llvm_ir.c_str());
    ck->program = dev.compile({ck->rendered.name, ck->rendered.llvm_ir});
    mutable_stats().compiles++;
    slot = ck;
    return ck;
}

std::shared_ptr<Buffer> shared_buffer(const Node* n) {
    if (n->op == Op::AFTER) n = n->src(0);
    return std::const_pointer_cast<Buffer>(std::static_pointer_cast<const Buffer>(n->arg.obj));
}

// Below this many loop iterations a kernel runs on the calling thread: waking the pool costs more.
constexpr int64_t PARALLEL_MIN_WORK = 16384;

// A hot op's launch: its argument struct with the buffers' addresses and the symbolic sizes filled in.
void run_op(const ExecItem& it) {
    const OpSpec& op = *it.op;
    alignas(64) uint8_t args[256];
    if (op.fixed.size() > sizeof args) throw Error(std::string("[engine] ") + devices::ops::name(op.kind) + ": argument struct too large");
    std::memcpy(args, op.fixed.data(), op.fixed.size());
    // Host code reads a GPU's external inputs from the host memory they were uploaded from; the CPU reads
    // its own memory (for large weights a copy in huge pages, whose source pages were released).
    const bool gpu = it.device->target().arch != devices::Arch::X86_64;
    auto address = [&](const Buffer& b) -> const void* {
        if (!it.impl.host) return reinterpret_cast<const void*>(b.mem->handle);
        return gpu && b.host_data ? b.host_data : b.mem->host;
    };
    auto put = [&](uint32_t offset, const void* p) { std::memcpy(args + offset, &p, sizeof p); };
    put(op.out, address(*it.buffers[0]));
    for (size_t i = 0; i < op.ins.size(); i++) put(op.ins[i], address(*it.buffers[i + 1]));
    for (size_t i = 0; i < op.dims.size(); i++) {
        int64_t v = eval_int(it.scalars[i].get());
        std::memcpy(args + op.dims[i], &v, sizeof v);
    }
    it.impl.run(*it.device, args);
    mutable_stats().custom_run++;
}

}  // namespace

void note_pending_assign(const std::shared_ptr<TensorImpl>& base) { pending_assigns().push_back(base); }
void set_recorder(Recorder* r) { g_recorder = r; }
Recorder* recorder() { return g_recorder; }
std::vector<KernelInfo> last_schedule() { return g_last_schedule; }

void run_item(const ExecItem& it) {
    for (auto& [end, limit] : it.checks) {
        int64_t e = eval_int(end.get()), l = eval_int(limit.get());
        if (e > l)
            throw Error("[engine] " + it.name + ": window end " + expr_str(end.get()) + " = " + std::to_string(e) +
                        " exceeds the dimension " + std::to_string(l) + " it views (check the Vars' bindings)");
    }
    for (auto& b : it.buffers)
        if (!b->mem) b->mem = alloc_memory(b->device, b->dtype.nbytes(b->numel), false);
    if (it.kernel) {
        const RenderedKernel& rk = it.kernel->rendered;
        int64_t vars[64];
        const devices::Memory* bufs[64];
        if (rk.vars.size() > 64 || it.buffers.size() > 64) throw Error("[engine] run: kernel " + it.name + " has too many arguments");
        for (size_t i = 0; i < rk.vars.size(); i++) vars[i] = var_state(rk.vars[i].get()).value.load(std::memory_order_relaxed);
        for (size_t i = 0; i < it.buffers.size(); i++) bufs[i] = it.buffers[i]->mem.get();
        int64_t global = eval_int(rk.global_size.get());
        bool parallel = global > 1 && eval_int(rk.work.get()) >= PARALLEL_MIN_WORK;
        it.device->launch(*it.kernel->program, {bufs, int(it.buffers.size()), vars, int(rk.vars.size()), global, 1, parallel});
        mutable_stats().kernels_run++;
        return;
    }
    run_op(it);
}

void debug_report(const char* what, const std::vector<ExecItem>& items, const std::vector<double>& us, double wall_us) {
    int level = devices::env::debug();
    if (level < 1) return;
    double total = 0;
    int n_custom = 0;
    for (size_t i = 0; i < items.size(); i++) {
        total += us[i];
        n_custom += items[i].op != nullptr;
        if (level >= 2)
            std::fprintf(stderr, "[engine]   %-28s %-22s %9.1f us\n", items[i].name.c_str(), shape_str(items[i].out_shape).c_str(), us[i]);
    }
    std::fprintf(stderr, "[engine] %s: %zu kernels (%d custom), %.3f ms in kernels, %.3f ms in all\n", what, items.size(), n_custom,
                 total / 1000.0, wall_us / 1000.0);
}

namespace {

// Lowers and compiles each kernel node and resolves its buffers: one ExecItem per kernel, in order.
std::vector<ExecItem> make_items(const std::vector<const Node*>& kernels, devices::Device& dev,
                                 std::unordered_map<const Node*, std::shared_ptr<Buffer>>& out_buffers) {
    std::unordered_set<const Node*> materialized(kernels.begin(), kernels.end());
    auto buffer_for = [&](const Node* n) { return is_buffer_like(n) ? shared_buffer(n) : out_buffers.at(n); };
    std::vector<ExecItem> items;
    for (const Node* k : kernels) {
        ExecItem it;
        it.device = &dev;
        it.out_shape = k->shape;
        if (k->op != Op::ASSIGN) {  // outputs get memory when their kernel runs (run_item)
            auto b = std::make_shared<Buffer>();
            b->device = &dev;
            b->dtype = k->dtype;
            b->numel = numel(k->shape).max();
            out_buffers[k] = b;
            if (g_recorder) g_recorder->created.push_back(b);
        }
        if (k->op == Op::CUSTOM) {
            it.op = static_cast<const OpSpec*>(k->arg.obj.get());
            const char* name = devices::ops::name(it.op->kind);
            it.impl = dev.op(it.op->kind, it.op->type, it.op->fixed.data());
            if (!it.impl)
                throw Error(std::string("[") + name + "] " + dev.name() + " has no kernel for " + std::string(gguf::type_name(it.op->type)));
            it.name = std::string("C_") + (it.impl.name ? it.impl.name : name);
            it.buffers.push_back(out_buffers.at(k));
            for (auto& s : k->srcs) it.buffers.push_back(buffer_for(storage_node(s.get())));
            size_t rank = size_t(k->arg.ints[0]);
            for (size_t i = rank; i < k->arg.dims.size(); i++) it.scalars.push_back(k->arg.dims[i].node());
        } else {
            LoweredKernel lk = lower_kernel(k, [&](const Node* n) { return materialized.count(n) > 0; });
            it.kernel = compile(lk, dev);
            it.name = lk.name;
            it.checks = lk.checks;
            for (const Node* p : lk.params) it.buffers.push_back(buffer_for(p));
            for (const Node* n : toposort({lk.ast.get()})) it.has_reduce |= n->op == Op::REDUCE;
            if (k->op == Op::ASSIGN && it.buffers[0]->external) throw Error("[engine] assign: cannot write an external buffer");
        }
        items.push_back(std::move(it));
    }
    return items;
}

// Launches the items in order. Outside a capture, each item lets go of its buffers once it ran, so
// intermediates return to the block cache after their last reader. A capture keeps the items (and so
// their buffers) for replay, but still hands an intermediate's memory back after its last reader: the
// capture's plan_memory gives it memory again, and the recording run peaks at its working set instead
// of the sum of every intermediate of the forward (1.4 GB for a 512-token prefill of a 1B model).
void run_items(std::vector<ExecItem>& items, const std::unordered_set<const Buffer*>& intermediates,
               std::chrono::steady_clock::time_point started) {
    std::unordered_map<const Buffer*, size_t> last_use;
    if (g_recorder)
        for (size_t i = 0; i < items.size(); i++)
            for (auto& b : items[i].buffers) last_use[b.get()] = i;
    std::vector<double> us(items.size(), 0.0);
    bool timed = devices::env::debug() >= 1;
    for (size_t i = 0; i < items.size(); i++) {
        auto t0 = std::chrono::steady_clock::now();
        run_item(items[i]);
        if (timed) us[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
        if (g_recorder) {
            g_recorder->items.push_back(items[i]);
            for (auto& b : items[i].buffers)
                if (last_use[b.get()] == i && intermediates.count(b.get())) b->mem.reset();
        } else {
            items[i].buffers.clear();
        }
    }
    if (timed) debug_report("realize", items, us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - started).count());
}

}  // namespace

void realize(const std::vector<Tensor>& tensors) {
    auto started = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<TensorImpl>> impls;
    for (auto& t : tensors) {
        if (!t.defined()) throw Error("[engine] realize: undefined tensor");
        impls.push_back(t.impl());
    }
    for (auto& w : pending_assigns())  // assigns take effect at the next realize, whatever it realizes
        if (auto p = w.lock()) impls.push_back(p);
    pending_assigns().clear();

    std::vector<NodeRef> roots;
    std::vector<size_t> root_of(impls.size(), SIZE_MAX);
    for (size_t i = 0; i < impls.size(); i++)
        if (impls[i]->node->op != Op::BUFFER) root_of[i] = roots.size(), roots.push_back(impls[i]->node);
    if (roots.empty()) return;
    mutable_stats().schedules++;
    devices::Device& dev = devices::get(impls.front()->device);

    // The pipeline, one pass a line:
    std::vector<NodeRef> graph = rewrite(roots, view_rules());                 // chains of views -> one view each
    std::vector<const Node*> graph_roots;
    for (auto& r : graph) graph_roots.push_back(r.get());
    std::vector<const Node*> kernels = schedule_kernels(graph_roots);        // fusion: which nodes become kernels
    std::unordered_map<const Node*, std::shared_ptr<Buffer>> out_buffers;
    std::vector<ExecItem> items = make_items(kernels, dev, out_buffers);     // lower, simplify, render, compile (cached)
    std::unordered_set<const Node*> root_set(graph_roots.begin(), graph_roots.end());
    std::unordered_set<const Buffer*> intermediates;
    for (auto& [node, b] : out_buffers)
        if (!root_set.count(node)) intermediates.insert(b.get());
    std::erase_if(out_buffers, [&](auto& kv) { return !root_set.count(kv.first); });  // intermediates die with their items
    g_last_schedule.clear();
    for (auto& it : items) g_last_schedule.push_back({it.name, it.op != nullptr, it.has_reduce, it.out_shape});
    run_items(items, intermediates, started);                                // launch in order

    for (size_t i = 0; i < impls.size(); i++) {                              // the tensors now name their buffers
        if (root_of[i] == SIZE_MAX) continue;
        const Node* n = graph[root_of[i]].get();
        auto& impl = impls[i];
        if (n->op == Op::AFTER) impl->node = NodeRef(n->src(0));
        else if (n->op == Op::BUFFER) impl->node = NodeRef(n);
        else impl->node = buffer_node(out_buffers.at(n), n->shape);
        impl->base.reset();
    }
}

}  // namespace engine
