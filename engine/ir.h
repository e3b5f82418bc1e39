// The one IR: immutable, hash-consed Nodes {op, dtype, srcs, arg} from the lazy tensor graph down to
// the kernel IR the renderer reads. Equal graphs are the same pointer; hashes are structural.
#pragma once

#include "engine/tensor.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

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

}  // namespace engine
