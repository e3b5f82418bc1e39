// Internals of the CPU device: its factory and the LLVM JIT wrapper (LLVM headers stay in llvm_jit.cpp).
#pragma once

#include "devices/device.h"

#include <memory>
#include <string>
#include <vector>

namespace devices::cpu {

std::unique_ptr<Device> make_device();

// LLVM 19 ORC LLJIT for the host: IR text in, function address out.
class LlvmJit {
public:
    LlvmJit();
    ~LlvmJit();
    // Parses, verifies, optimizes (O3, host CPU features) and links `ir`; returns the address of `entry`.
    // Throws devices::Error carrying LLVM's diagnostic.
    void* compile(const std::string& ir, const std::string& entry);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Compiles IR text to an object file for `target` without loading it (the NULL device).
std::vector<char> compile_to_object(const std::string& ir, const Target& target);

}  // namespace devices::cpu
