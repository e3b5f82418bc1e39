// Every environment flag of the engine and the devices, read once, in one place.
//   DEBUG=1 kernel counts and times per forward, 2 one line per kernel, 4 the generated LLVM IR
//   TINYLLM_THREADS=N  CPU thread pool size (default: all hardware threads)
//   TINYLLM_CPU_THP=0  keep weights in place instead of copying them into transparent huge pages
//   TINYLLM_CPU_PACK=0 keep matmul weights in GGUF rows instead of repacking them into panels at load
//   TINYLLM_KERNEL_CACHE=DIR|0  where compiled CPU kernels are kept between runs (default
//                      $XDG_CACHE_HOME/tinyllm/kernels, else ~/.cache/tinyllm/kernels); 0 keeps none
//   TINYLLM_DEVICE=NAME  default device for new tensors (default CPU)
//   TINYLLM_NULL_TARGET=gfxN  the AMD target the NULL device compiles for (default gfx1100)
//   TINYLLM_FAKE_KFD=1|gfxN  tests only: "AMD" is a fake /dev/kfd whose GPU (gfx1100, or the target named)
//                            runs host twins of the kernels (emulated hand kernels, host-compiled IR), in
//                            binaries linked with the fakes (amd::install_fake_kfd); `tinyllm` refuses it
#pragma once

#include <string>

namespace devices::env {

int debug();                 // DEBUG
int threads();               // TINYLLM_THREADS, or the hardware concurrency
bool cpu_thp();              // TINYLLM_CPU_THP, default on
bool cpu_pack();             // TINYLLM_CPU_PACK, default on
const std::string& kernel_cache();  // TINYLLM_KERNEL_CACHE or the default folder; "" when off
const std::string& device(); // TINYLLM_DEVICE, or "CPU"
const std::string& null_target();  // TINYLLM_NULL_TARGET, or "gfx1100"
const std::string& fake_kfd();     // TINYLLM_FAKE_KFD, or "" (the real /dev/kfd)

}  // namespace devices::env
