// Internals of the CPU device: its factory and the LLVM JIT wrapper (LLVM headers stay in llvm_jit.cpp).
#pragma once

#include "devices/device.h"
#include "devices/ops.h"

#include <memory>
#include <string>
#include <vector>

namespace devices::cpu {

std::unique_ptr<Device> make_device();
// What the CPU's matmuls will run, for `tinyllm info --devices`: the instruction-set variant (by
// measured CPU features) and AMX, then per weight type its kernel ("q4_K q6_K: avx512 panels ...").
std::vector<std::string> kernel_report();

// The host implementations of the hot ops (cpu/ops.cpp): the CPU's, and every device's that runs host
// code over its CPU-visible memory where it has no kernel of its own.
ops::Impl host_op(ops::Kind kind, gguf::Type type);
gguf::Type host_activation_type(gguf::Type weight);

// Compiled kernels kept on disk between runs (TINYLLM_KERNEL_CACHE, env.h): one file per kernel that
// holds its whole key (target, entry, IR text) and the object code, so a hit is exact, never a hash
// match; a file that is short, damaged or of another key is a miss and gets rewritten. Files are
// written whole under a temporary name and renamed, so processes sharing the folder never read a
// partial one. Nothing here is required: a folder that cannot be read or written compiles as before.
class KernelCache {
public:
    KernelCache();  // the folder of env::kernel_cache(); off when that is ""
    explicit KernelCache(std::string dir);
    void set_target(std::string target) { target_ = std::move(target); }
    std::string key(const std::string& ir, const std::string& entry) const;
    std::vector<char> load(const std::string& key) const;  // empty on a miss
    void store(const std::string& key, const std::vector<char>& object) const;

private:
    std::string path_of(const std::string& key) const;
    std::string dir_, target_;
};

// LLVM 19 ORC LLJIT for the host: IR text in, function address out.
class LlvmJit {
public:
    LlvmJit();
    ~LlvmJit();
    // Parses, verifies, optimizes (O3, host CPU features) and links `ir`; returns the address of `entry`.
    // The object code comes from the kernel cache when it holds this IR for this CPU.
    // Throws devices::Error carrying LLVM's diagnostic.
    void* compile(const std::string& ir, const std::string& entry);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Calls a function compiled by LlvmJit. JIT code has no UBSan function-type prologue: clang's
// -fsanitize=function (part of -fsanitize=undefined) would read the 8 bytes before the entry to check one,
// and fault when the code starts a page. Every call into JIT code goes through here.
template <class Fn, class... Args>
#if defined(__clang__)
__attribute__((no_sanitize("function")))
#endif
inline void call_jit(Fn fn, Args... args) {
    fn(args...);
}

// Compiles IR text to an object file for `target` without loading it (the NULL device).
std::vector<char> compile_to_object(const std::string& ir, const Target& target);

}  // namespace devices::cpu
