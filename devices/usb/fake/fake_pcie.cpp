// The fake PCIe link: switch ports with type 1 headers that forward configuration requests only within
// their programmed bus numbers and memory requests only within their windows, and a GPU endpoint with
// sizable BARs (VRAM, doorbells, registers), a register file, sparse VRAM and a DMA engine that masters
// the bus up to the bridge's SRAM (at 0x200000) when every port has bus mastering enabled.
#include "devices/usb/fake/fake_bridge_impl.h"

#include <cstring>

namespace usb {

namespace {

constexpr uint64_t VRAM_PAGE = 64 << 10;

void put16(std::array<uint8_t, 4096>& c, int at, uint16_t v) { std::memcpy(&c[at], &v, 2); }
void put32(std::array<uint8_t, 4096>& c, int at, uint32_t v) { std::memcpy(&c[at], &v, 4); }
void writable(std::array<uint8_t, 4096>& w, int at, int n, uint8_t mask = 0xff) {
    for (int i = 0; i < n; i++) w[at + i] = mask;
}

}  // namespace

FakeLink::FakeLink(const FakeBridgeOptions& o, std::vector<uint8_t>& sram) : options_(o), sram_(sram) {
    for (int i = 0; i < o.switch_ports; i++) {
        Function f;
        f.bridge = true;
        // ASMedia's own port first, then the GPU board's switch (AMD's upstream/downstream ports).
        uint32_t id = i < 2 ? 0x24631b21u : (i % 2 ? 0x14791002u : 0x14781002u);
        put32(f.cfg, 0x00, id);
        put32(f.cfg, 0x08, 0x06040000);  // class: PCI-to-PCI bridge
        f.cfg[0x0e] = 0x01;              // type 1 header
        f.cfg[0x24] = 0x01;              // 64-bit prefetchable window
        f.cfg[0x26] = 0x01;
        writable(f.writable, 0x04, 2, 0x07);
        writable(f.writable, 0x18, 3);
        writable(f.writable, 0x20, 8, 0xff);
        f.writable[0x20] = f.writable[0x22] = f.writable[0x24] = f.writable[0x26] = 0xf0;
        writable(f.writable, 0x28, 8);
        fns_.push_back(f);
    }
    if (!o.gpu_present) return;
    Function g;
    put16(g.cfg, 0x00, o.gpu.vendor);
    put16(g.cfg, 0x02, o.gpu.device);
    put32(g.cfg, 0x08, o.gpu.class_code << 8 | 0xc8);  // revision 0xc8
    writable(g.writable, 0x04, 2, 0x07);
    put32(g.cfg, 0x10, 0x0c);  // BAR0/1: VRAM, 64-bit prefetchable
    put32(g.cfg, 0x18, 0x0c);  // BAR2/3: doorbells, 64-bit prefetchable
    put32(g.cfg, 0x20, 0x01);  // BAR4: I/O
    put32(g.cfg, 0x24, 0x00);  // BAR5: registers, 32-bit
    g.bar_size = {o.gpu.vram_bar_bytes, 0, o.gpu.doorbell_bar_bytes, 0, 0x100, o.gpu.mmio_bar_bytes};
    writable(g.writable, 0x10, 24);
    fns_.push_back(g);
    mmio_.resize(o.gpu.mmio_bar_bytes);
    doorbells_.resize(o.gpu.doorbell_bar_bytes);
    uint32_t id = uint32_t(o.gpu.device) << 16 | o.gpu.vendor;
    std::memcpy(&mmio_[fake_dma::ID], &id, 4);
}

uint32_t FakeLink::cfg32(const Function& f, uint16_t reg) const {
    uint32_t v;
    std::memcpy(&v, &f.cfg[reg], 4);
    return v;
}

int FakeLink::route_config(bool type1, uint8_t bus, uint8_t dev, uint8_t fn) const {
    if (dev || fn) return -1;  // one function per bus here
    if (bus == 0) return type1 || fns_.empty() ? -1 : 0;
    if (!type1) return -1;
    for (size_t k = 0; k < fns_.size() && fns_[k].bridge; k++) {
        uint8_t secondary = fns_[k].cfg[0x19], subordinate = fns_[k].cfg[0x1a];
        if (bus < secondary || bus > subordinate) return -1;  // this port does not claim it
        if (bus == secondary) return k + 1 < fns_.size() ? int(k + 1) : -1;
    }
    return -1;
}

FakeLink::Completion FakeLink::config(bool write, bool type1, uint32_t address, uint8_t byte_enable, uint32_t data) {
    int target = route_config(type1, uint8_t(address >> 24), (address >> 19) & 31, (address >> 16) & 7);
    if (target < 0) return {1, false, 0};
    Function& f = fns_[target];
    uint16_t reg = address & 0xffc;
    if (!write) return {0, true, cfg32(f, reg)};
    for (int lane = 0; lane < 4; lane++) {
        if (!(byte_enable >> lane & 1)) continue;
        uint8_t mask = f.writable[reg + lane], v = uint8_t(data >> (8 * lane));
        f.cfg[reg + lane] = uint8_t((f.cfg[reg + lane] & ~mask) | (v & mask));
    }
    if (!f.bridge && reg >= 0x10 && reg < 0x28) {  // BARs keep their size alignment and type bits
        for (int bar = 0; bar < 6; bar++) {
            uint64_t size = f.bar_size[bar], mask = ~(size - 1);
            bool is64 = bar == 0 || bar == 2;
            if (!size) continue;
            if (reg == 0x10 + 4 * bar) put32(f.cfg, reg, (cfg32(f, reg) & uint32_t(mask) & ~0xfu) | (bar == 4 ? 0x1 : is64 ? 0xc : 0x0));
            if (is64 && reg == 0x14 + 4 * bar) put32(f.cfg, reg, cfg32(f, reg) & uint32_t(mask >> 32));
        }
    }
    return {0, false, 0};
}

bool FakeLink::forwards(uint64_t a) const {
    for (const auto& f : fns_) {
        if (!f.bridge) continue;
        if (!(f.cfg[0x04] & 2)) return false;  // memory space disabled
        uint16_t mb, ml, pb, pl;
        std::memcpy(&mb, &f.cfg[0x20], 2);
        std::memcpy(&ml, &f.cfg[0x22], 2);
        std::memcpy(&pb, &f.cfg[0x24], 2);
        std::memcpy(&pl, &f.cfg[0x26], 2);
        uint64_t mem_lo = uint64_t(mb & 0xfff0) << 16, mem_hi = uint64_t(ml & 0xfff0) << 16 | 0xfffff;
        uint64_t pref_lo = uint64_t(cfg32(f, 0x28)) << 32 | uint64_t(pb & 0xfff0) << 16;
        uint64_t pref_hi = uint64_t(cfg32(f, 0x2c)) << 32 | uint64_t(pl & 0xfff0) << 16 | 0xfffff;
        if (!((a >= mem_lo && a <= mem_hi) || (a >= pref_lo && a <= pref_hi))) return false;
    }
    return true;
}

bool FakeLink::bus_master() const {
    for (const auto& f : fns_)
        if (!(f.cfg[0x04] & 4)) return false;
    return true;
}

uint64_t FakeLink::bar_base(int bar) const {
    const Function& g = fns_.back();
    uint64_t lo = cfg32(g, uint16_t(0x10 + 4 * bar)) & ~0xfull;
    return bar == 0 || bar == 2 ? lo | uint64_t(cfg32(g, uint16_t(0x14 + 4 * bar))) << 32 : lo;
}

FakeLink::Completion FakeLink::memory(bool write, uint32_t address, uint8_t byte_enable, uint32_t data) {
    address &= ~3u;  // byte enables select within the dword
    if (!options_.gpu_present || !forwards(address) || !(fns_.back().cfg[0x04] & 2)) return {1, false, 0};
    for (int bar : {0, 2, 5}) {
        uint64_t base = bar_base(bar), size = fns_.back().bar_size[bar];
        if (!base || address < base || address - base >= size) continue;
        uint64_t off = address - base;
        if (bar == 5) {
            if (write) mmio_write(uint32_t(off), data, byte_enable);
            return {0, !write, write ? 0 : mmio_read(uint32_t(off))};
        }
        uint32_t v = 0;
        for (int lane = 0; lane < 4; lane++) {
            if (!(byte_enable >> lane & 1)) continue;
            uint8_t* b = bar == 0 ? vram_byte(off + lane) : &doorbells_[off + lane];
            if (write) *b = uint8_t(data >> (8 * lane));
            v |= uint32_t(*b) << (8 * lane);
        }
        return {0, !write, write ? 0 : v};
    }
    return {1, false, 0};
}

uint32_t FakeLink::mmio_read(uint32_t offset) const {
    uint32_t v;
    std::memcpy(&v, &mmio_[offset], 4);
    return v;
}

void FakeLink::mmio_write(uint32_t offset, uint32_t value, uint8_t byte_enable) {
    if (offset == fake_dma::ID) return;  // read-only
    for (int lane = 0; lane < 4; lane++)
        if (byte_enable >> lane & 1) mmio_[offset + lane] = uint8_t(value >> (8 * lane));
    if (offset == fake_dma::CONTROL && (value & fake_dma::GO)) run_dma();
}

uint8_t* FakeLink::vram_byte(uint64_t offset) {
    auto& page = vram_pages_[offset / VRAM_PAGE];
    if (page.empty()) page.resize(VRAM_PAGE);
    return &page[offset % VRAM_PAGE];
}

std::vector<uint8_t> FakeLink::vram(uint64_t offset, size_t n) const {
    std::vector<uint8_t> out(n);
    for (size_t i = 0; i < n; i++) {
        auto p = vram_pages_.find((offset + i) / VRAM_PAGE);
        out[i] = p == vram_pages_.end() ? 0 : p->second[(offset + i) % VRAM_PAGE];
    }
    return out;
}

void FakeLink::run_dma() {
    auto reg64 = [&](uint32_t lo) { return uint64_t(mmio_read(lo)) | uint64_t(mmio_read(lo + 4)) << 32; };
    uint64_t src = reg64(fake_dma::SRC_LO), dst = reg64(fake_dma::DST_LO), n = mmio_read(fake_dma::BYTES);
    bool to_system = mmio_read(fake_dma::CONTROL) & fake_dma::TO_SYSTEM;
    uint64_t sys = to_system ? dst : src, local = to_system ? src : dst;
    // System memory here is the bridge's SRAM; reaching it takes bus mastering on every port.
    bool ok = bus_master() && sys >= Asm24Bridge::SRAM_PCIE_ADDR && n <= Asm24Bridge::SRAM_BYTES &&
              sys - Asm24Bridge::SRAM_PCIE_ADDR <= Asm24Bridge::SRAM_BYTES - n && local + n <= options_.gpu.vram_bar_bytes;
    if (ok) {
        uint8_t* s = sram_.data() + (sys - Asm24Bridge::SRAM_PCIE_ADDR);
        for (uint64_t i = 0; i < n; i++) {
            if (to_system) s[i] = *vram_byte(local + i);
            else *vram_byte(local + i) = s[i];
        }
    }
    uint32_t status = ok ? fake_dma::DONE : fake_dma::FAILED;
    std::memcpy(&mmio_[fake_dma::STATUS], &status, 4);
}

}  // namespace usb
