// The one IR: immutable, hash-consed Nodes {op, dtype, srcs, arg} from the lazy tensor graph down to
// the kernel IR the renderer reads. Equal graphs are the same pointer; hashes are structural.
#pragma once

#include "engine/tensor.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace devices {
class Device;
struct Memory;
}  // namespace devices

namespace engine {

enum class Op : uint8_t {
    // leaves
    BUFFER,    // realized memory; arg.obj = Buffer, arg.dims = shape
    CONST,     // scalar; arg.f (floats) or arg.i (ints, bool)
    VAR,       // scalar i64 bound at launch; arg.obj = VarState
    IOTA,      // 1-d 0..n-1; arg.dims = {n}
    // unary
    NEG, EXP2, LOG2, SIN, SQRT, RECIP, NOT,
    // binary
    ADD, SUB, MUL, DIV, MOD, MAX, CMPLT, CMPEQ, CMPNE, AND, OR, XOR, SHL, SHR,
    // ternary
    WHERE,
    // conversions
    CAST, BITCAST,
    // tensor graph
    REDUCE_AXIS,  // arg.i = ReduceOp, arg.ints = axes (kept as size 1)
    RESHAPE, PERMUTE, EXPAND, SHRINK, PAD,  // movement; arg.dims / arg.ints / arg.f (pad value)
    CONTIGUOUS,   // materialize
    GATHER,       // srcs {x, index}; arg.i = axis
    ASSIGN,       // srcs {target view of a buffer, value}: writes value through the view
    AFTER,        // srcs {buffer, ASSIGN}: the buffer's contents once the write is done
    CUSTOM,       // a hot op: srcs = inputs; arg.obj = OpSpec, arg.dims = out shape ++ sizes (op_call_impl.h)
    // kernel IR
    RANGE,    // loop index; srcs {end}; arg.i = loop id
    PARAM,    // buffer parameter; arg.i = index; dtype = element type
    LOAD,     // srcs {PARAM, index}
    STORE,    // srcs {PARAM, index, value}: the kernel's root
    REDUCE,   // srcs {value, RANGE...}; arg.i = ReduceOp: a loop over the ranges
    N_OPS
};
enum class ReduceOp : int64_t { SUM, MAX };

const char* op_name(Op op);
bool is_unary(Op op);
bool is_binary(Op op);
bool is_alu(Op op);       // unary, binary, WHERE
bool is_movement(Op op);
bool is_commutative(Op op);
bool is_comparison(Op op);

struct Arg {
    int64_t i = 0;
    double f = 0.0;
    std::vector<int64_t> ints;
    std::vector<Dim> dims;
    std::vector<double> floats;
    std::shared_ptr<const void> obj;  // identity by pointer
    bool operator==(const Arg& o) const;
};

struct Node {
    Op op;
    DType dtype;
    std::vector<NodeRef> srcs;
    Arg arg;
    Shape shape;          // derived: the tensor shape (empty for scalars and kernel IR)
    size_t hash = 0;      // structural: equal graphs hash equal across runs
    int64_t vmin = 0, vmax = 0;  // value bounds of integer and bool nodes (index math)
    mutable std::atomic<int> refs{0};
    mutable const Node* next_dying = nullptr;  // node_release's list of nodes being deleted

    const Node* src(size_t i) const { return srcs[i].get(); }
    bool is_const() const { return op == Op::CONST; }
    double const_value() const { return dtype.is_float() ? arg.f : double(arg.i); }
};

// Interns a node: returns the existing equal node or a new one with derived shape and bounds.
// Throws engine::Error for shape mismatches the frontend did not catch.
NodeRef make(Op op, DType dtype, std::vector<NodeRef> srcs, Arg arg = {});

// Small constructors used everywhere.
NodeRef make_const(double value, DType dtype);
NodeRef make_iconst(int64_t value, DType dtype);  // integers and bool, exact beyond 2^53
NodeRef cidx(int64_t v);  // an i64 index constant
NodeRef alu(Op op, const NodeRef& a);
NodeRef alu(Op op, const NodeRef& a, const NodeRef& b);  // dtype: a's, bool for comparisons
NodeRef where(const NodeRef& c, const NodeRef& a, const NodeRef& b);
NodeRef cast(const NodeRef& x, DType dtype);
// Index arithmetic with immediate constant folding (the symbolic rules do the rest).
NodeRef iadd(const NodeRef& a, const NodeRef& b);
NodeRef imul(const NodeRef& a, const NodeRef& b);
NodeRef idiv(const NodeRef& a, const NodeRef& b);
NodeRef imod(const NodeRef& a, const NodeRef& b);
NodeRef imin(const NodeRef& a, const NodeRef& b);
NodeRef imax(const NodeRef& a, const NodeRef& b);

// Shape helpers.
std::vector<Dim> strides_of(const Shape& shape);  // row-major
bool shapes_equal(const Shape& a, const Shape& b);

// Evaluates an integer expression under the Vars' current bindings.
int64_t eval_int(const Node* n);
std::string expr_str(const Node* n);

// Graph walk: every node reachable from `roots`, sources before users.
std::vector<const Node*> toposort(const std::vector<const Node*>& roots, bool (*stop)(const Node*) = nullptr);

// A bound variable's shared state.
struct VarState {
    std::string name;
    int64_t min, max;
    std::atomic<int64_t> value;
    VarState(std::string n, int64_t lo, int64_t hi) : name(std::move(n)), min(lo), max(hi), value(lo) {}
};
const VarState& var_state(const Node* var_node);

// Realized memory on a device. Freed when the last node or kernel using it lets go.
struct Buffer {
    devices::Device* device = nullptr;
    std::shared_ptr<devices::Memory> mem;
    DType dtype;
    int64_t numel = 0;                   // capacity in elements (the maximum over the Vars)
    std::shared_ptr<const void> owner;   // keeps external memory alive
    bool external = false;               // read-only wrapped memory
    bool sparse = false;                 // external, wrapped for sparse reads (left in its file mapping)
    const void* host_data = nullptr;     // external: the host memory it wraps or was uploaded from
    bool packed = false;                 // a weight in its device's layout for linear (Device::pack)
    ~Buffer();
};
std::shared_ptr<Buffer> make_buffer(const std::string& device, DType dtype, int64_t numel);  // zero-filled
NodeRef buffer_node(std::shared_ptr<Buffer> buf, const Shape& shape);
Buffer& buffer_of(const Node* buffer_node);  // BUFFER or AFTER
// Device memory from the block cache (fresh = straight from the device, zero-filled).
std::shared_ptr<devices::Memory> alloc_memory(devices::Device* dev, size_t bytes, bool fresh);
// Hands every block the cache holds back to its device (after a capture has planned its own memory).
void release_cached_memory();

// Counters (engine::stats); incremented by the parts that do the work.
Stats& mutable_stats();

namespace detail {
struct TensorImpl {
    NodeRef node;
    std::string device;
    // For views of realized buffers: the tensor owning the buffer, updated by assign().
    std::shared_ptr<TensorImpl> base;
};
}  // namespace detail

}  // namespace engine
