// A fake ASM24xx bridge behind UsbTransport, for CI: it answers the UAS commands (XDATA reads and writes,
// SCSI writes into its SRAM), runs its TLP engine against a fake PCIe link — a chain of switch ports that
// forward only what their bus numbers and windows claim, ending in a GPU model with config space, BARs,
// MMIO registers, VRAM and a bus-mastering DMA engine that reaches the bridge's SRAM at 0x200000.
#pragma once

#include "devices/usb/usb.h"

#include <memory>

namespace usb {

struct FakeGpuModel {
    uint16_t vendor = 0x1002, device = 0x744c;  // an RX 7900 XTX (gfx1100)
    uint32_t class_code = 0x030000;             // display controller, VGA
    uint64_t vram_bar_bytes = 256ull << 20;     // BAR0: 64-bit prefetchable (a small BAR)
    uint64_t doorbell_bar_bytes = 2ull << 20;   // BAR2: 64-bit prefetchable
    uint32_t mmio_bar_bytes = 1u << 20;         // BAR5: 32-bit registers
};

// The fake GPU's DMA engine registers in BAR5. A test model, not AMD's register map: it stands in for
// the SDMA engine a real bring-up would program, to move bytes between VRAM and the bridge's SRAM.
namespace fake_dma {
constexpr uint32_t SRC_LO = 0x1000, SRC_HI = 0x1004, DST_LO = 0x1008, DST_HI = 0x100c, BYTES = 0x1010;
constexpr uint32_t CONTROL = 0x1014, STATUS = 0x1018;
constexpr uint32_t GO = 1, TO_SYSTEM = 2;    // CONTROL: start; direction VRAM -> system (else system -> VRAM)
constexpr uint32_t DONE = 1, FAILED = 2;     // STATUS
constexpr uint32_t ID = 0x0;                 // read-only: device << 16 | vendor
}  // namespace fake_dma

struct FakeBridgeOptions {
    int switch_ports = 4;  // bridges from the controller's root down to the GPU (tinygrad finds it on bus 4)
    bool gpu_present = true;
    FakeGpuModel gpu;
};

class FakeAsm24 final : public UsbTransport {
public:
    explicit FakeAsm24(FakeBridgeOptions options = {});
    ~FakeAsm24() override;

    void submit(std::span<BulkTransfer> batch) override;
    std::string describe() const override { return "fake ASM24xx"; }

    // What the hardware holds, for tests.
    std::vector<uint8_t> sram(size_t offset, size_t n) const;
    std::vector<uint8_t> vram(uint64_t offset, size_t n) const;
    size_t commands() const;  // UAS commands processed

    struct State;

private:
    std::unique_ptr<State> s_;
};

}  // namespace usb
