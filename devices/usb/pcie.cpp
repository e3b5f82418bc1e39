// PCIe set-up behind the bridge, where no firmware did it: number the bridges down to the first endpoint,
// open their windows, size and place the endpoint's BARs, enable decoding and bus mastering. Register
// offsets: PCI Local Bus / PCIe Base specs (type 0 and type 1 headers); sequence: tinygrad's
// System.pci_setup_usb_bars.
#include "devices/usb/usb.h"

#include <cstdio>

namespace usb {

namespace {

constexpr uint16_t VENDOR_ID = 0x00, COMMAND = 0x04, CLASS_REVISION = 0x08, HEADER_TYPE = 0x0e, BAR0 = 0x10;
constexpr uint16_t BUS_NUMBERS = 0x18, MEMORY_BASE = 0x20, MEMORY_LIMIT = 0x22, PREF_BASE = 0x24, PREF_LIMIT = 0x26;
constexpr uint16_t PREF_BASE_UPPER = 0x28, PREF_LIMIT_UPPER = 0x2c;
constexpr uint32_t COMMAND_IO = 1, COMMAND_MEMORY = 2, COMMAND_MASTER = 4;
constexpr int MAX_BUS = 16;

std::string hex(uint64_t x) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(x));
    return buf;
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

}  // namespace

PciFunction setup_pcie(Asm24Bridge& br, uint64_t mem_base, uint64_t pref_base) {
    std::vector<uint8_t> bridges;
    uint8_t bus = 0;
    for (;;) {
        uint32_t id;
        try {
            id = br.config_read({bus, 0, 0}, VENDOR_ID, 4);
        } catch (const Error& e) {
            throw Error("[usb] no PCIe device answers on bus " + std::to_string(bus) + " behind the bridge (is the GPU powered?): " + e.what());
        }
        if ((id & 0xffff) == 0xffff) throw Error("[usb] no PCIe device on bus " + std::to_string(bus) + " behind the bridge");
        uint32_t header = br.config_read({bus, 0, 0}, HEADER_TYPE, 1) & 0x7f;
        if (header == 0) break;  // the endpoint
        if (header != 1) throw Error("[usb] PCIe function on bus " + std::to_string(bus) + " has unknown header type " + std::to_string(header));
        if (bus + 1 >= MAX_BUS) throw Error("[usb] no PCIe endpoint within " + std::to_string(MAX_BUS) + " buses behind the bridge");
        // Primary, secondary and subordinate bus numbers go in one write; the subordinate is fixed below.
        br.config_write({bus, 0, 0}, BUS_NUMBERS, uint32_t(bus) | uint32_t(bus + 1) << 8 | uint32_t(MAX_BUS - 1) << 16, 4);
        bridges.push_back(bus);
        bus++;
    }
    const uint8_t endpoint_bus = bus;

    for (uint8_t b : bridges) {
        Bdf f{b, 0, 0};
        br.config_write(f, BUS_NUMBERS, uint32_t(b) | uint32_t(b + 1) << 8 | uint32_t(endpoint_bus) << 16, 4);
        br.config_write(f, MEMORY_BASE, uint32_t(mem_base >> 16) & 0xfff0, 2);  // window: mem_base .. 4 GiB
        br.config_write(f, MEMORY_LIMIT, 0xfff0, 2);
        br.config_write(f, PREF_BASE, uint32_t(pref_base >> 16) & 0xfff0, 2);   // window: pref_base .. 2^64
        br.config_write(f, PREF_LIMIT, 0xfff0, 2);
        br.config_write(f, PREF_BASE_UPPER, uint32_t(pref_base >> 32), 4);
        br.config_write(f, PREF_LIMIT_UPPER, 0xffffffff, 4);
        br.config_write(f, COMMAND, COMMAND_IO | COMMAND_MEMORY | COMMAND_MASTER, 2);
    }

    PciFunction fn;
    fn.bdf = {endpoint_bus, 0, 0};
    uint32_t id = br.config_read(fn.bdf, VENDOR_ID, 4);
    fn.vendor = uint16_t(id);
    fn.device = uint16_t(id >> 16);
    fn.class_code = br.config_read(fn.bdf, CLASS_REVISION, 4) >> 8;
    br.config_write(fn.bdf, COMMAND, 0, 2);  // no decoding while BARs are sized

    uint64_t next[2] = {mem_base, pref_base};  // 32-bit memory, 64-bit prefetchable
    for (int i = 0; i < 6;) {
        uint16_t reg = uint16_t(BAR0 + 4 * i);
        uint32_t cfg = br.config_read(fn.bdf, reg, 4);
        PciBar& bar = fn.bars[i];
        if (cfg & 1) {  // I/O space: nothing behind the bridge needs it
            bar.io = true;
            i++;
            continue;
        }
        bar.is64 = ((cfg >> 1) & 3) == 2;
        bar.prefetchable = cfg & 8;
        br.config_write(fn.bdf, reg, 0xffffffff, 4);
        uint64_t mask = br.config_read(fn.bdf, reg, 4) & ~0xfu;
        if (bar.is64) {
            if (i == 5) throw Error("[usb] PCIe BAR5 claims to be 64-bit");
            br.config_write(fn.bdf, reg + 4, 0xffffffff, 4);
            mask |= uint64_t(br.config_read(fn.bdf, reg + 4, 4)) << 32;
        } else {
            mask |= 0xffffffff00000000ull;
        }
        bar.size = mask ? ~mask + 1 : 0;
        if (bar.size) {
            uint64_t& cursor = next[bar.is64 && bar.prefetchable];
            bar.addr = align_up(cursor, bar.size);  // BARs are naturally aligned
            cursor = bar.addr + bar.size;
            if (!bar.is64 && cursor > (1ull << 32))
                throw Error("[usb] PCIe BAR" + std::to_string(i) + " (" + hex(bar.size) + " bytes) does not fit below 4 GiB");
        }
        br.config_write(fn.bdf, reg, uint32_t(bar.addr), 4);
        if (bar.is64) br.config_write(fn.bdf, reg + 4, uint32_t(bar.addr >> 32), 4);
        i += bar.is64 ? 2 : 1;
    }
    br.config_write(fn.bdf, COMMAND, COMMAND_IO | COMMAND_MEMORY | COMMAND_MASTER, 2);
    return fn;
}

}  // namespace usb
