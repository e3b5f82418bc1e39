// Internals of the fake bridge: the controller (fake_bridge.cpp) and the PCIe link behind it (fake_pcie.cpp).
#pragma once

#include "devices/usb/fake/fake_bridge.h"

#include <array>
#include <map>
#include <vector>

namespace usb {

// The PCIe link behind the controller: switch ports (type 1 headers) in a chain, then the GPU.
class FakeLink {
public:
    FakeLink(const FakeBridgeOptions& options, std::vector<uint8_t>& sram);

    struct Completion {
        uint8_t status = 0;  // 0 successful, 1 unsupported request
        bool has_data = false;
        uint32_t data = 0;   // byte lane i is bits 8i..8i+7
    };
    Completion config(bool write, bool type1, uint32_t address, uint8_t byte_enable, uint32_t data);
    Completion memory(bool write, uint32_t address, uint8_t byte_enable, uint32_t data);

    std::vector<uint8_t> vram(uint64_t offset, size_t n) const;

private:
    struct Function {
        std::array<uint8_t, 4096> cfg{};
        std::array<uint8_t, 4096> writable{};  // per-byte write masks
        std::array<uint64_t, 6> bar_size{};    // endpoint BARs (by first dword index)
        bool bridge = false;
    };
    uint32_t cfg32(const Function& f, uint16_t reg) const;
    int route_config(bool type1, uint8_t bus, uint8_t dev, uint8_t fn) const;  // function index, or -1
    bool forwards(uint64_t address) const;  // every switch port's window claims the address
    bool bus_master() const;                // upstream DMA allowed all the way up
    uint64_t bar_base(int bar) const;
    uint32_t mmio_read(uint32_t offset) const;
    void mmio_write(uint32_t offset, uint32_t value, uint8_t byte_enable);
    void run_dma();
    uint8_t* vram_byte(uint64_t offset);

    FakeBridgeOptions options_;
    std::vector<uint8_t>& sram_;
    std::vector<Function> fns_;  // switch ports, then the GPU (if present)
    std::vector<uint8_t> mmio_;
    std::vector<uint8_t> doorbells_;
    std::map<uint64_t, std::vector<uint8_t>> vram_pages_;  // sparse 64 KiB pages
};

struct FakeAsm24::State {
    explicit State(const FakeBridgeOptions& o) : link(o, sram) {}
    std::vector<uint8_t> xdata = std::vector<uint8_t>(0x20000);
    std::vector<uint8_t> sram = std::vector<uint8_t>(Asm24Bridge::SRAM_BYTES);
    FakeLink link;
    size_t commands = 0;

    uint8_t read_xdata(uint32_t addr) const;
    void write_xdata(uint32_t addr, uint8_t value);
    void run_tlp();
};

}  // namespace usb
