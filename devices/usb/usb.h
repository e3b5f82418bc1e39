// GPUs behind an ASMedia ASM24xx USB-to-PCIe bridge (DESIGN.md §4, as tinygrad's runtime/support/usb.py):
// SCSI-style commands over USB Attached SCSI (bulk transfers on four endpoints, USB 3 streams) reach the
// controller's XDATA memory, its PCIe requester (config reads/writes, memory reads/writes) and its SRAM,
// which PCIe devices see at 0x200000 and DMA to and from. All USB traffic goes through UsbTransport:
// libusb-1.0 in production, FakeAsm24 (fake/fake_bridge.h) in tests.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace usb {

// Every message starts with "[usb]".
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct NoDevice : Error {  // no bridge attached (or not accessible)
    using Error::Error;
};

// One bulk transfer. A batch is submitted at once and completes as a whole: UAS needs the status and
// data transfers of a command posted before (or with) the command itself.
struct BulkTransfer {
    uint8_t endpoint = 0;  // bit 7 set: IN (device to host)
    uint32_t stream = 0;   // USB 3 bulk stream (0: none)
    uint8_t* data = nullptr;
    size_t length = 0;
    size_t actual = 0;  // bytes transferred, set on completion
};

class UsbTransport {
public:
    virtual ~UsbTransport() = default;
    virtual void submit(std::span<BulkTransfer> batch) = 0;  // throws Error on failure or timeout
    virtual std::string describe() const = 0;
};

// The bridges libusb sees (tinygrad's patched firmware add1:0001, ASMedia's 174c:2464 / 174c:2463).
struct BridgeInfo {
    uint8_t bus = 0, address = 0;
    uint16_t vendor = 0, product = 0;
    std::string describe() const;  // "ASM24xx 174c:2464 at USB bus 2 address 5"
};
std::vector<BridgeInfo> list_bridges();             // empty without any (or without USB access)
std::unique_ptr<UsbTransport> open_bridge(int index = 0);  // NoDevice with the reason when absent

struct Bdf {
    uint8_t bus = 0, dev = 0, fn = 0;
};

// The ASM24xx controller as a PCIe root: XDATA access, PCIe requests through its TLP engine
// (0xB210.. registers), and its SRAM DMA window.
class Asm24Bridge {
public:
    static constexpr uint64_t SRAM_PCIE_ADDR = 0x200000;  // the SRAM as PCIe devices address it
    static constexpr size_t SRAM_BYTES = 0x80000;
    static constexpr uint32_t SRAM_XDATA = 0xF000;       // the SRAM's window in XDATA (host reads)
    static constexpr size_t SRAM_HOST_READABLE = 0x20000 - SRAM_XDATA;

    explicit Asm24Bridge(UsbTransport& usb);  // initializes the controller

    std::vector<uint8_t> read_xdata(uint32_t addr, size_t n);
    void write_xdata(uint32_t addr, std::span<const uint8_t> bytes);

    uint32_t config_read(Bdf bdf, uint16_t offset, int size);
    void config_write(Bdf bdf, uint16_t offset, uint32_t value, int size);
    uint32_t mem_read(uint64_t addr, int size);  // 32-bit PCIe addresses only (the engine's address register)
    void mem_write(uint64_t addr, uint32_t value, int size);

    // Host to SRAM with SCSI WRITE(16): whole 512-byte sectors from `offset` (a multiple of 512); the
    // rest of the last sector is zero-filled.
    void sram_write(size_t offset, std::span<const uint8_t> bytes);
    // SRAM to host through the XDATA window (the first SRAM_HOST_READABLE bytes).
    std::vector<uint8_t> sram_read(size_t offset, size_t n);

private:
    struct Op;
    std::vector<std::vector<uint8_t>> exec(const std::vector<Op>& ops);
    uint32_t pcie_request(uint8_t fmt_type, uint32_t address, std::optional<uint32_t> value, int size, const std::string& what);

    UsbTransport& usb_;
};

// A PCIe function behind the bridge, after bus numbering and BAR assignment.
struct PciBar {
    uint64_t addr = 0, size = 0;
    bool is64 = false, prefetchable = false, io = false;
};
struct PciFunction {
    Bdf bdf;
    uint16_t vendor = 0, device = 0;
    uint32_t class_code = 0;  // base class, subclass, prog-if
    std::array<PciBar, 6> bars{};
};
// Plays PCIe firmware for the link behind the bridge: numbers the chain of bridges down to the first
// endpoint, opens their memory windows, sizes and places the endpoint's BARs (32-bit at mem_base,
// prefetchable 64-bit at pref_base) and enables memory decoding and bus mastering.
PciFunction setup_pcie(Asm24Bridge& bridge, uint64_t mem_base = 0x10000000, uint64_t pref_base = 32ull << 30);

// AMD GPUs: the gfx target of a PCI device id, and the firmware files bringing it up needs.
std::optional<std::string> amd_target(uint16_t device_id);
std::vector<std::string> amd_firmware(const std::string& target);
// Throws Error naming the first missing file (and a compressed copy if one is there instead).
void check_amd_firmware(const std::string& target, const std::string& dir = "/lib/firmware/amdgpu");

// Takes an AMD GPU behind the bridge up to the point where its firmware is needed: sets up the link,
// identifies the GPU and checks that its firmware files are there (Error naming the first missing one).
// The bring-up itself (PSP, SMU and GFX firmware loading, as tinygrad's am driver) is not implemented.
PciFunction probe_amd_gpu(Asm24Bridge& bridge, const std::string& firmware_dir = "/lib/firmware/amdgpu");

}  // namespace usb
