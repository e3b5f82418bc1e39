// The ASM24xx bridge driver against the fake bridge: PCIe enumeration and the GPU's ids, BAR register
// writes and reads, SRAM DMA in both directions byte for byte, and the failures a user could meet.
#include "devices/usb/fake/fake_bridge.h"

#include <catch2/catch.hpp>

#include <random>

namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = uint8_t(rng());
    return v;
}

// Runs the fake GPU's DMA engine through its BAR5 registers and returns its status register.
uint32_t dma(usb::Asm24Bridge& br, const usb::PciFunction& gpu, uint64_t src, uint64_t dst, uint32_t n, bool to_system) {
    uint64_t regs = gpu.bars[5].addr;
    br.mem_write(regs + usb::fake_dma::SRC_LO, uint32_t(src), 4);
    br.mem_write(regs + usb::fake_dma::SRC_HI, uint32_t(src >> 32), 4);
    br.mem_write(regs + usb::fake_dma::DST_LO, uint32_t(dst), 4);
    br.mem_write(regs + usb::fake_dma::DST_HI, uint32_t(dst >> 32), 4);
    br.mem_write(regs + usb::fake_dma::BYTES, n, 4);
    br.mem_write(regs + usb::fake_dma::CONTROL, usb::fake_dma::GO | (to_system ? usb::fake_dma::TO_SYSTEM : 0), 4);
    return br.mem_read(regs + usb::fake_dma::STATUS, 4);
}

}  // namespace

TEST_CASE("usb bridge: enumerates the link and reads the GPU's PCI vendor and device id") {
    usb::FakeAsm24 fake;
    usb::Asm24Bridge br(fake);
    usb::PciFunction gpu = usb::setup_pcie(br);
    CHECK(gpu.vendor == 0x1002);
    CHECK(gpu.device == 0x744c);
    CHECK(gpu.class_code == 0x030000);
    CHECK(gpu.bdf.bus == 4);  // behind four switch ports, where tinygrad expects it
    CHECK(br.config_read(gpu.bdf, 0x00, 4) == 0x744c1002);
    CHECK(br.config_read(gpu.bdf, 0x02, 2) == 0x744c);  // a sub-dword read picks its byte lanes

    // BARs: VRAM and doorbells 64-bit prefetchable from 32 GiB, registers 32-bit at 256 MiB, I/O skipped.
    CHECK(gpu.bars[0].is64);
    CHECK(gpu.bars[0].prefetchable);
    CHECK(gpu.bars[0].size == 256ull << 20);
    CHECK(gpu.bars[0].addr == 32ull << 30);
    CHECK(gpu.bars[2].addr == gpu.bars[0].addr + gpu.bars[0].size);
    CHECK(gpu.bars[4].io);
    CHECK(gpu.bars[5].addr == 0x10000000);
    CHECK(gpu.bars[5].size == 1u << 20);
    CHECK(br.config_read(gpu.bdf, 0x24, 4) == 0x10000000);  // the GPU decodes where we placed it
}

TEST_CASE("usb bridge: writes and reads a BAR register") {
    usb::FakeAsm24 fake;
    usb::Asm24Bridge br(fake);
    usb::PciFunction gpu = usb::setup_pcie(br);
    uint64_t scratch = gpu.bars[5].addr + 0x8;
    br.mem_write(scratch, 0xdeadbeef, 4);
    CHECK(br.mem_read(scratch, 4) == 0xdeadbeef);
    br.mem_write(scratch + 1, 0x55, 1);  // one byte lane
    CHECK(br.mem_read(scratch, 4) == 0xdead55ef);
    CHECK(br.mem_read(scratch + 2, 2) == 0xdead);
    // The identity register is read-only.
    br.mem_write(gpu.bars[5].addr + usb::fake_dma::ID, 0, 4);
    CHECK(br.mem_read(gpu.bars[5].addr + usb::fake_dma::ID, 4) == 0x744c1002);
}

TEST_CASE("usb bridge: DMAs a buffer through the SRAM window byte-exactly") {
    usb::FakeAsm24 fake;
    usb::Asm24Bridge br(fake);
    usb::PciFunction gpu = usb::setup_pcie(br);
    const size_t n = 5000;  // not a whole number of sectors
    auto data = random_bytes(n, 7);

    br.sram_write(0, data);  // host -> SRAM (SCSI write)
    CHECK(fake.sram(0, n) == data);
    CHECK(fake.sram(n, 512 * 10 - n) == std::vector<uint8_t>(512 * 10 - n, 0));  // the last sector's tail is zeroed

    // SRAM -> VRAM and back to another SRAM offset, mastered by the GPU, then SRAM -> host.
    CHECK(dma(br, gpu, usb::Asm24Bridge::SRAM_PCIE_ADDR, 0x1000, n, false) == usb::fake_dma::DONE);
    CHECK(fake.vram(0x1000, n) == data);
    CHECK(dma(br, gpu, 0x1000, usb::Asm24Bridge::SRAM_PCIE_ADDR + 0x8000, n, true) == usb::fake_dma::DONE);
    CHECK(br.sram_read(0x8000, n) == data);
}

TEST_CASE("usb bridge: large SRAM writes span several SCSI commands") {
    usb::FakeAsm24 fake;
    usb::Asm24Bridge br(fake);
    auto data = random_bytes(200000, 3);  // more than three 64 KiB chunks
    br.sram_write(0x10000, data);
    CHECK(fake.sram(0x10000, data.size()) == data);
    CHECK(br.sram_read(0x100, 16) == fake.sram(0x100, 16));
}

TEST_CASE("usb bridge: the GPU cannot DMA without bus mastering") {
    usb::FakeAsm24 fake;
    usb::Asm24Bridge br(fake);
    usb::PciFunction gpu = usb::setup_pcie(br);
    br.config_write(gpu.bdf, 0x04, 0x2, 2);  // memory decoding only
    CHECK(dma(br, gpu, usb::Asm24Bridge::SRAM_PCIE_ADDR, 0, 64, false) == usb::fake_dma::FAILED);
}

TEST_CASE("usb bridge: requests nothing claims are Unsupported Requests") {
    usb::FakeAsm24 fake;
    usb::Asm24Bridge br(fake);
    // Before enumeration no switch port forwards to bus 4.
    CHECK_THROWS_WITH(br.config_read({4, 0, 0}, 0, 4), Catch::Contains("config read of 04:00.0") && Catch::Contains("Unsupported Request"));
    usb::PciFunction gpu = usb::setup_pcie(br);
    CHECK_THROWS_WITH(br.mem_read(0x20000000, 4), Catch::Contains("memory read at 0x20000000: Unsupported Request"));
    CHECK_THROWS_WITH(br.mem_read(gpu.bars[0].addr, 4), Catch::Contains("32-bit addresses"));
    CHECK_THROWS_WITH(br.mem_read(gpu.bars[5].addr + 3, 2), Catch::Contains("crosses a dword"));
}

TEST_CASE("usb bridge: SRAM access limits are clear errors") {
    usb::FakeAsm24 fake;
    usb::Asm24Bridge br(fake);
    std::vector<uint8_t> buf(16);
    CHECK_THROWS_WITH(br.sram_write(100, buf), Catch::Contains("512-byte sector"));
    CHECK_THROWS_WITH(br.sram_write(usb::Asm24Bridge::SRAM_BYTES - 512, std::vector<uint8_t>(1024)), Catch::Contains("exceeds the 512 KiB SRAM"));
    CHECK_THROWS_WITH(br.sram_read(0x10ff0, 32), Catch::Contains("readable through XDATA"));
}

TEST_CASE("usb bridge: no GPU behind the bridge") {
    usb::FakeAsm24 fake({.switch_ports = 4, .gpu_present = false, .gpu = {}});
    usb::Asm24Bridge br(fake);
    CHECK_THROWS_WITH(usb::setup_pcie(br), Catch::Contains("no PCIe device answers on bus 4") && Catch::Contains("powered"));
}

TEST_CASE("usb bridge: a rejected command is reported with what it was") {
    // A transport whose bridge answers every command with CHECK CONDITION.
    struct Rejecting : usb::UsbTransport {
        usb::FakeAsm24 inner;
        void submit(std::span<usb::BulkTransfer> batch) override {
            inner.submit(batch);
            for (auto& t : batch)
                if (t.endpoint == 0x83) t.data[6] = 0x02;
        }
        std::string describe() const override { return "rejecting bridge"; }
    } rejecting;
    CHECK_THROWS_WITH(usb::Asm24Bridge(rejecting), Catch::Contains("[usb] rejecting bridge: the bridge rejected the XDATA write at 0x54b"));
}

TEST_CASE("usb bridge: this machine's USB (libusb)") {
    if (!usb::list_bridges().empty()) {
        WARN("SKIPPED: an ASM24xx bridge is attached; the no-bridge message is tested on machines without one");
        return;
    }
    try {
        usb::open_bridge();
        FAIL("opened a bridge that list_bridges() does not see");
    } catch (const usb::NoDevice& e) {
        std::string m = e.what();
        CHECK((m.find("no ASM24xx USB-to-PCIe bridge attached") != std::string::npos || m.find("no USB access") != std::string::npos));
    }
}
