// AMD GPUs behind the bridge: which gfx target a PCI device id is, which firmware files bringing it up
// takes (the files amdgpu loads for its IP versions, as tinygrad's am driver does), and the probe that
// stops, with the exact missing file, before any firmware would be needed.
#include "devices/usb/usb.h"

#include <cstdio>
#include <filesystem>

namespace usb {

namespace {

struct Model {
    uint16_t device_id;
    const char* target;
};
// PCI device ids tinygrad's PCIIface accepts.
constexpr Model MODELS[] = {
    {0x744c, "gfx1100"}, {0x7480, "gfx1102"}, {0x7550, "gfx1201"}, {0x7551, "gfx1201"}, {0x7590, "gfx1200"},
    {0x74a1, "gfx942"},  {0x74b5, "gfx942"},
};

}  // namespace

std::optional<std::string> amd_target(uint16_t device_id) {
    for (const auto& m : MODELS)
        if (m.device_id == device_id) return m.target;
    return std::nullopt;
}

std::vector<std::string> amd_firmware(const std::string& target) {
    // PSP (secure OS, trusted apps), SMU, SDMA and the graphics block's microcontrollers.
    if (target == "gfx1100")  // GC 11.0.0, PSP/SMU 13.0.0, SDMA 6.0.0
        return {"psp_13_0_0_sos.bin", "psp_13_0_0_ta.bin", "smu_13_0_0.bin",  "sdma_6_0_0.bin",     "gc_11_0_0_pfp.bin",
                "gc_11_0_0_me.bin",   "gc_11_0_0_mec.bin", "gc_11_0_0_rlc.bin", "gc_11_0_0_imu.bin", "gc_11_0_0_mes_2.bin",
                "gc_11_0_0_mes1.bin"};
    if (target == "gfx1201")  // GC 12.0.1, PSP/SMU 14.0.3, SDMA 7.0.1
        return {"psp_14_0_3_sos.bin", "smu_14_0_3.bin",    "sdma_7_0_1.bin",    "gc_12_0_1_pfp.bin",
                "gc_12_0_1_me.bin",   "gc_12_0_1_mec.bin", "gc_12_0_1_rlc.bin", "gc_12_0_1_imu.bin", "gc_12_0_1_mes.bin"};
    return {};
}

void check_amd_firmware(const std::string& target, const std::string& dir) {
    auto files = amd_firmware(target);
    if (files.empty()) throw Error("[usb] bringing up a " + target + " GPU over USB is not supported (its firmware set is unknown)");
    namespace fs = std::filesystem;
    for (const auto& f : files) {
        fs::path p = fs::path(dir) / f;
        std::error_code ec;
        if (fs::is_regular_file(p, ec)) continue;
        for (const char* ext : {".zst", ".xz"})
            if (fs::is_regular_file(p.string() + ext, ec))
                throw Error("[usb] the " + target + " GPU needs firmware " + p.string() + "; only " + f + ext +
                            " is there: decompress it next to it (" + (ext[1] == 'z' ? "zstd -d" : "xz -dk") + ")");
        throw Error("[usb] the " + target + " GPU needs firmware " + p.string() +
                    ", which is missing (Debian: install firmware-amd-graphics from non-free-firmware)");
    }
}

PciFunction probe_amd_gpu(Asm24Bridge& bridge, const std::string& firmware_dir) {
    PciFunction fn = setup_pcie(bridge);
    char id[16];
    std::snprintf(id, sizeof id, "%04x:%04x", fn.vendor, fn.device);
    if (fn.vendor != 0x1002) throw Error(std::string("[usb] the PCIe device behind the bridge is ") + id + ", not an AMD GPU");
    auto target = amd_target(fn.device);
    if (!target) throw Error(std::string("[usb] unknown AMD GPU ") + id + " behind the bridge");
    check_amd_firmware(*target, firmware_dir);
    return fn;
}

}  // namespace usb
