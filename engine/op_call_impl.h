// Hot-op nodes (devices/ops.h): an op builder fills the op's typed argument struct by field name and
// says which fields are its inputs, its output and its symbolic sizes; realize resolves the device's
// implementation once per launch item and, at each launch, copies the struct and fills in the rest.
#pragma once

#include "engine/ir_impl.h"

#include "devices/ops.h"

#include <cstring>
#include <new>
#include <optional>
#include <type_traits>

namespace engine {

// What a hot-op node runs. Interned, so equal calls are one node (x is quantized once for q, k and v).
struct OpSpec {
    devices::ops::Kind kind{};
    gguf::Type type{};                // picks the implementation ("[linear] AMD has no kernel for q2_K")
    std::vector<uint8_t> fixed;       // the argument struct with its constant fields set
    uint32_t out = 0;                 // byte offset of the output's pointer field
    std::vector<uint32_t> ins;        // byte offsets of the inputs' pointer fields, in node srcs order
    std::vector<uint32_t> dims;       // byte offsets of the int64 fields bound at launch, in node dims order
};

// The node of a hot op (a CUSTOM node): arg.obj = the interned spec, arg.dims = out shape ++ the symbolic
// fields' Dims.
Tensor make_op(const OpSpec& spec, const std::vector<Tensor>& inputs, const Shape& out_shape, DType out_dtype,
               const std::vector<Dim>& dims);

// Shared by the op builders (nn.cpp): x (R, K) f32 -> (R, row bytes) u8 in `act`, the format a device's
// linear multiplies (x itself for F32); row_bytes 0: the type table's row size.
Tensor quantize_activations(const Tensor& x, gguf::Type act, int64_t row_bytes = 0);

template <class A> class OpCall {
    static_assert(std::is_trivially_copyable_v<A> && std::is_trivially_destructible_v<A>);

public:
    // `type`: the weight or cache type the device's implementation is chosen by.
    explicit OpCall(gguf::Type type) : bytes_(sizeof(A), 0) {
        new (bytes_.data()) A;  // padding stays zero: equal calls have equal bytes
        spec_.kind = A::KIND;
        spec_.type = type;
    }
    A& args() { return *std::launder(reinterpret_cast<A*>(bytes_.data())); }  // the constant fields
    template <class P> OpCall& in(P A::*field, const Tensor& t) {
        spec_.ins.push_back(offset(field));
        inputs_.push_back(t);
        return *this;
    }
    // A size: written now when constant, else evaluated at each launch.
    OpCall& dim(int64_t A::*field, const Dim& d) {
        if (d.is_const()) args().*field = d.value();
        else spec_.dims.push_back(offset(field)), dims_.push_back(d);
        return *this;
    }
    template <class P> Tensor out(P A::*field, const Shape& shape, DType dtype) {
        spec_.out = offset(field);
        spec_.fixed = bytes_;
        return make_op(spec_, inputs_, shape, dtype, dims_);
    }

private:
    template <class F> static uint32_t offset(F A::*field) {
        static const A probe{};
        return uint32_t(reinterpret_cast<const char*>(&(probe.*field)) - reinterpret_cast<const char*>(&probe));
    }
    std::vector<uint8_t> bytes_;
    OpSpec spec_;
    std::vector<Tensor> inputs_;
    std::vector<Dim> dims_;
};

}  // namespace engine
