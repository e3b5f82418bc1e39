// The Device interface every backend implements (CPU, NULL, later AMD): memory as handles, programs
// compiled from LLVM IR text, launches, and a registry by name. DESIGN.md §4.
#pragma once

#include "gguf/types.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace devices {

namespace ops {  // devices/ops.h
enum class Kind : uint8_t;
struct Impl;
}  // namespace ops

// Bad use or a failing backend; the message starts with "[devices] <device>: ".
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Device memory. `handle` is what kernels receive (a device address); `host` is non-null only when
// the CPU can address the memory directly (CPU device, host-visible GPU memory).
struct Memory {
    uint64_t handle = 0;
    void* host = nullptr;
    size_t size = 0;
    bool external = false;  // wraps caller memory (mmap'd weights): free() leaves it alone
};

// What the renderer must produce for a device.
enum class Arch { X86_64, AMDGCN };
struct Target {
    Arch arch = Arch::X86_64;
    std::string cpu;  // "gfx1100" for AMDGCN; empty = the host CPU
};

// A generated kernel: one LLVM IR module whose entry point is `name`.
// X86_64 entry: void name(void** buffers, const int64_t* vars, int64_t begin, int64_t end), running the
// outer loop iterations [begin, end). AMDGCN entry: amdgpu_kernel name(ptr buffers..., i64 vars...,
// i64 global_size) run as ceil(global_size / 256) workgroups of 256 work-items, one outer iteration each.
struct KernelSource {
    std::string name;
    std::string llvm_ir;
};

class Program {
public:
    virtual ~Program() = default;
};

struct LaunchArgs {
    const Memory* const* buffers = nullptr;
    int n_buffers = 0;
    const int64_t* vars = nullptr;
    int n_vars = 0;
    int64_t global_size = 1;   // outer loop iterations (CPU) / work-items (GPU)
    int64_t local_size = 1;    // GPU workgroup size; ignored on CPU
    bool parallel = true;      // CPU: split across the thread pool (false: too little work to share)
};

// A hand-written host function over work items [begin, end); `ctx` is its argument block.
using HostFn = void (*)(const void* ctx, int64_t begin, int64_t end);

// How kernels read a wrapped buffer: STREAMED, all of it on every use (matmul weights); SPARSE, a few
// rows per use (an embedding table's lookups), so a resident copy would only cost memory.
enum class Access { STREAMED, SPARSE };

// How a device's linear() runs for one weight type (Device::linear_plan).
struct LinearPlan {
    gguf::Type act = gguf::Type::F32;  // x's format for the LINEAR op (made by QUANTIZE; F32: x as it is)
    int64_t act_row_bytes = 0;         // one token's activations in `act`; 0: the type table's row size
    bool cast = false;                 // `act` is F16 made by a generated cast (fused into x's producer)
    bool generated = false;            // no hand kernel fits: a generated multiply-and-sum instead of LINEAR
    bool fuse_norm = false;            // QUANTIZE makes x itself from an RMS norm or SwiGLU (ops::Quantize)
};

class Device {
public:
    virtual ~Device() = default;
    virtual const std::string& name() const = 0;
    virtual Target target() const = 0;
    virtual int n_threads() const { return 1; }

    virtual Memory alloc(size_t bytes) = 0;   // zero-filled, 64-byte aligned
    virtual void free(Memory& m) = 0;
    // Makes host memory usable by kernels: wrapped without a copy where the device can read it (CPU),
    // uploaded otherwise. The host memory must outlive the returned Memory. `access` says how kernels
    // will read it: the CPU copies STREAMED weights into huge pages and leaves SPARSE ones in place.
    virtual Memory wrap(const void* host, size_t bytes, Access access);
    virtual void copy_in(const Memory& dst, size_t offset, const void* src, size_t bytes) = 0;
    virtual void copy_out(void* dst, const Memory& src, size_t offset, size_t bytes) = 0;

    virtual std::shared_ptr<Program> compile(const KernelSource& src) = 0;
    virtual void launch(const Program& program, const LaunchArgs& args) = 0;
    // Runs a host function over [0, n_work) in chunks of at least `grain` (CPU: on the thread pool).
    // Devices that cannot run host code throw.
    virtual void run_host(HostFn fn, const void* ctx, int64_t n_work, int64_t grain);
    // A hand-written kernel shipped with the backend (AMD: a kernels_amd code-object kernel, by name), its
    // argument block laid out as the kernel declares it, pointers in it being Memory handles. Queued like
    // launch(). Devices without hand kernels throw.
    virtual void launch_hand_kernel(const std::string& kernel, std::span<const uint8_t> kernarg);
    // This device's implementation of a hot op (devices/ops.h) for weights or caches of `type` (the op's
    // own type when it has none), chosen by the op's constant arguments too (`args`: its struct with the
    // sizes known when the graph was built, pointers null); an empty Impl when it has none. Looked up once
    // per captured launch. Default: the host implementations (devices/cpu/ops.cpp), run through run_host.
    virtual ops::Impl op(ops::Kind kind, gguf::Type type, const void* args) const;
    // How linear() multiplies `weight` weights of `cols` columns here, for up to max_tokens tokens at once.
    // Default: x quantized to activation_type(weight) for the device's LINEAR; on a GPU target, float
    // weights in a generated kernel.
    virtual LinearPlan linear_plan(gguf::Type weight, int64_t cols, int64_t max_tokens) const;
    // The weight layout hook, called once per weight at load (engine::linear_weight): whether linear() here
    // reads `type` weights of (rows, cols) in a layout of its own, its size, and the conversion into it
    // (out: packed_bytes of host memory of this device). Rows stay whole: stacked weights are laid out
    // one after another. ops::Linear::packed then says a weight is in that layout.
    virtual bool can_pack(gguf::Type type, int64_t rows, int64_t cols) const;
    virtual size_t packed_bytes(gguf::Type type, int64_t rows, int64_t cols) const;  // default: the rows' bytes
    virtual void pack(gguf::Type type, const void* w, int64_t rows, int64_t cols, void* out);
    // Whether LinearExperts here also reads (experts, rows, cols) expert weights in that layout, the
    // experts' rows packed as one (experts · rows, cols) weight (ops::LinearExperts::packed).
    virtual bool can_pack_experts(gguf::Type type, int64_t experts, int64_t rows, int64_t cols) const;
    // Whether its ROWS op reads a table in that layout (ops::Rows::packed). Default: no.
    virtual bool rows_read_packed() const;
    // The format the host kernels quantize activations to for weights of `weight` (linear, experts, heads).
    virtual gguf::Type activation_type(gguf::Type weight) const;
    // The KV cache types its attention reads and its KV store writes (llama.cpp's -ctk/-ctv). Default: the
    // host kernels' F32, F16, Q8_0 and Q4_0 (blocks of 32 along the head dimension).
    virtual std::vector<gguf::Type> kv_cache_types() const;
    virtual void synchronize() = 0;
};

// The device registered under `name` ("CPU", "NULL"; case-insensitive), created on first use.
// Throws devices::Error listing the known names for an unknown one.
Device& get(const std::string& name);
std::vector<std::string> registered();
// Backends outside this folder register a factory before first use (e.g. "AMD").
void register_device(const std::string& name, std::function<std::unique_ptr<Device>()> factory);

}  // namespace devices
