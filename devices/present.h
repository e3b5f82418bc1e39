// What compute devices this machine has, for `tinyllm info --devices`: the CPU always, AMD GPUs from the
// KFD topology, GPUs behind ASM24xx USB bridges — and for an absent backend, why it is absent.
#pragma once

#include <string>
#include <vector>

namespace devices {

struct PresentDevice {
    std::string name;         // what --device takes: "CPU", "AMD:0", "AMD:USB:0"; the backend when absent
    std::string description;  // "gfx1100, 96 CUs, 24.0 GiB VRAM", or the reason it is absent
    bool present = true;
    std::vector<std::string> details;  // further lines (the CPU: which kernels each weight type runs)
};

std::vector<PresentDevice> list_present();

}  // namespace devices
