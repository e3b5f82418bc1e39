// The AMD engine device's hot ops (devices/amd/ops.cpp): kernels_amd's kernels behind the op registry
// (devices/ops.h), and what they need of the device beyond devices::Device. Internal to devices/amd.
#pragma once

#include "devices/device.h"
#include "devices/ops.h"

namespace amd {

// q8 activations as the kernels read them (kernels_amd/kernargs.h: int8 values, a scale per 32 and a sum
// per 16, as three arrays over the launch's tokens) travel as this type, which no host kernel quantizes to.
constexpr gguf::Type Q8_ACTIVATIONS = gguf::Type::I8;

// The engine device ("AMD") as its op implementations see it.
class OpsDevice : public devices::Device {
public:
    devices::ops::Impl op(devices::ops::Kind kind, gguf::Type type, const void* args) const override;
    devices::LinearPlan linear_plan(gguf::Type weight, int64_t cols, int64_t max_tokens) const override;
    // The weight layout: Q6_K blocks padded from 210 to 212 bytes for the kernels' aligned loads.
    bool can_pack(gguf::Type type, int64_t rows, int64_t cols) const override;
    size_t packed_bytes(gguf::Type type, int64_t rows, int64_t cols) const override;
    void pack(gguf::Type type, const void* w, int64_t rows, int64_t cols, void* out) override;
    // F16 (its kernels) and F32 (the host's, as with sinks); block caches would put every attention and
    // store on the host, reading GPU memory through the CPU mapping: not offered.
    std::vector<gguf::Type> kv_cache_types() const override { return {gguf::Type::F16, gguf::Type::F32}; }

    // GPU memory of at least `bytes` the ops keep their partial results in; the same memory on every
    // call (queued kernels run in order, so each launch may reuse it without waiting).
    virtual uint64_t scratch(size_t bytes) = 0;
    // A copy of `bytes` of GPU memory at `va` through `convert` (host code over the CPU mapping), in GPU
    // memory valid until the next call: a weight not laid out at load, made fit for a kernel per launch.
    virtual uint64_t converted(uint64_t va, size_t bytes, size_t out_bytes, void (*convert)(const void* in, size_t bytes, void* out)) = 0;
    // The CPU mapping of GPU address `va` (host code run on this device's memory).
    virtual void* host_address(uint64_t va) = 0;
    // Makes the CPU's writes to GPU memory visible to the GPU.
    virtual void flush_host_writes() = 0;
};

}  // namespace amd
