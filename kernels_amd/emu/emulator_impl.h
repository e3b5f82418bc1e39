// The emulated twins' tables, one per target (emu/twins_<target>.cpp, built from emu/twins.inc), that
// find_twin() (dispatch.cpp) searches.
#pragma once

#include "kernels_amd/emu/emulator.h"

#include <span>

namespace tinyllm::amd::emu {

// The emulated twins of the kernels for each target (emu/twins_<target>.cpp).
struct TwinEntry {
    const char* name;
    EmuKernelFn fn;
};
std::span<const TwinEntry> twins_gfx1100();
std::span<const TwinEntry> twins_gfx1201();
std::span<const TwinEntry> twins_gfx90a();
std::span<const TwinEntry> twins_gfx942();

}  // namespace tinyllm::amd::emu
