// The pipeline between the lazy graph and the device: scheduling (which nodes become kernels),
// lowering (a kernel's graph -> kernel IR with index math), rendering (kernel IR -> LLVM IR),
// and execution items that realize() runs and Jit records.
#pragma once

#include "engine/ir_impl.h"

#include "devices/device.h"
#include "devices/ops.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace engine {

// --- tensor internals shared by tensor.cpp / ops.cpp / nn.cpp ---------------------------------------
Tensor make_tensor(NodeRef n, const std::string& device);
Tensor make_view(const Tensor& src, NodeRef n);  // keeps the buffer owner for assign()
void note_pending_assign(const std::shared_ptr<detail::TensorImpl>& base);

// --- schedule (schedule.cpp) ------------------------------------------------------------------------
// The nodes that become kernels, in execution order: the roots, CONTIGUOUS, ASSIGN, CUSTOM and their
// inputs, and the fusion boundaries (DESIGN.md §3: a reduce consumed through an expand, shared reduces,
// more than one reduce in a kernel, costly work that an expand would repeat).
std::vector<const Node*> schedule_kernels(const std::vector<const Node*>& roots);
bool is_buffer_like(const Node* n);           // BUFFER or AFTER: already in memory
const Node* storage_node(const Node* n);      // n without RESHAPEs (custom inputs use the memory as is)

// --- lowering (lower.cpp) ---------------------------------------------------------------------------
struct LoweredKernel {
    NodeRef ast;                        // a STORE: the root of the kernel IR
    std::vector<const Node*> params;    // graph node behind each PARAM ([0] = written buffer)
    std::vector<NodeRef> loops;         // RANGE nodes of the output, outermost first
    std::string name;                   // "r_64_256" / "E_3_5"
    std::vector<std::pair<NodeRef, NodeRef>> checks;  // {end, limit}: symbolic windows to verify at launch
};
// `materialized(n)` says which graph nodes are read from memory rather than computed inline.
LoweredKernel lower_kernel(const Node* root, const std::function<bool(const Node*)>& materialized);

// --- rendering (render_llvm.cpp) --------------------------------------------------------------------
struct RenderedKernel {
    std::string name;                   // unique entry symbol
    std::string llvm_ir;
    std::vector<NodeRef> vars;          // VAR nodes, in the order of the kernel's vars array
    NodeRef global_size;                // outer (parallel) iterations, an i64 expression of the vars
    NodeRef work;                       // all loop iterations: decides whether to use the thread pool
};
RenderedKernel render_llvm(const LoweredKernel& k, const devices::Target& target);

// --- execution (realize.cpp) ------------------------------------------------------------------------
struct CompiledKernel {
    RenderedKernel rendered;
    std::shared_ptr<devices::Program> program;
    NodeRef ast;  // keeps the cache key alive
};

struct OpSpec;  // op_call_impl.h

// One launch: a generated kernel or a hot op with its buffers (param order / out then inputs).
struct ExecItem {
    std::string name;
    devices::Device* device = nullptr;
    std::vector<std::shared_ptr<Buffer>> buffers;
    std::shared_ptr<const CompiledKernel> kernel;  // generated
    const OpSpec* op = nullptr;                    // or a hot op (op_call_impl.h)
    devices::ops::Impl impl;                       // hot op: the device's implementation, found at make_items
    std::vector<NodeRef> scalars;                  // hot op: Dims evaluated at launch
    Shape out_shape;                               // for DEBUG lines and KernelInfo
    bool has_reduce = false;
    std::vector<std::pair<NodeRef, NodeRef>> checks;  // launch refuses when an end exceeds its limit
};
void run_item(const ExecItem& item);

// Graph capture: while a recorder is installed, every item realize() runs is also appended to it,
// and intermediate buffers are kept (the capture owns them).
struct Recorder {
    std::vector<ExecItem> items;
    std::vector<std::shared_ptr<Buffer>> created;  // buffers the captured kernels produced
};
void set_recorder(Recorder* r);
Recorder* recorder();

// Debug output of a forward (DEBUG=1/2), shared by realize and Jit replay: kernel count, the time spent
// in kernels and the wall time of the whole call (building, scheduling, compiling included).
void debug_report(const char* what, const std::vector<ExecItem>& items, const std::vector<double>& us, double wall_us);

}  // namespace engine
