// The engine's memory and handles behind the IR (engine/ir.h): Vars' shared state, realized Buffers and
// the block cache they come from, the counters, and the state behind a Tensor handle.
#pragma once

#include "engine/ir.h"

#include <atomic>
#include <memory>
#include <string>

namespace devices {
class Device;
struct Memory;
}  // namespace devices

namespace engine {

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
