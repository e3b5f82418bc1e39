// The ASM24xx bridge protocol (facts from tinygrad's support/usb.py and tinygrad/asm2464pd-firmware's
// USBGPU.md): each request is a UAS command IU on endpoint 0x04 carrying a CDB — 0xE4 reads up to 255
// bytes of XDATA, 0xE5 writes one byte, 0x8A (SCSI WRITE(16)) fills SRAM sectors — with data on 0x81/0x02
// and a status IU on 0x83, all on the command's stream. PCIe requests go through the TLP engine registers.
#include "devices/usb/usb.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace usb {

namespace {

constexpr uint8_t EP_DATA_IN = 0x81, EP_STATUS_IN = 0x83, EP_DATA_OUT = 0x02, EP_COMMAND_OUT = 0x04;
constexpr uint32_t STREAMS = 16;          // commands in flight per batch (stream ids 1..16)
constexpr size_t SCSI_WRITE_CHUNK = 0x10000;
constexpr uint8_t IU_COMMAND = 0x01, IU_SENSE = 0x03;

// TLP engine registers in XDATA.
constexpr uint32_t TLP_DATA = 0xB220, TLP_ADDR = 0xB218, TLP_BYTE_ENABLE = 0xB217, TLP_FMT_TYPE = 0xB210;
constexpr uint32_t TLP_TRIGGER = 0xB254, TLP_STATUS = 0xB296, TLP_COMPLETION = 0xB22A, TLP_CPL_HAS_DATA = 0xB284;
constexpr uint8_t STATUS_ERROR = 1, STATUS_COMPLETION = 2, STATUS_SENT = 4;
constexpr int POLLS = 1000;

std::string hex(uint64_t x) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(x));
    return buf;
}

uint32_t xdata_cdb_addr(uint32_t addr) { return (addr & 0x1ffff) | 0x500000; }

}  // namespace

// One controller request: an XDATA read or byte write, or a SCSI write into SRAM.
struct Asm24Bridge::Op {
    enum Kind { READ, WRITE, SCSI_WRITE } kind;
    uint32_t addr = 0;               // XDATA address, or LBA for SCSI_WRITE
    uint8_t value = 0;               // WRITE
    uint32_t length = 0;             // READ: bytes (<= 255)
    std::span<const uint8_t> data;   // SCSI_WRITE: whole sectors

    static Op read(uint32_t addr, uint32_t n) { return {READ, addr, 0, n, {}}; }
    static Op write(uint32_t addr, uint8_t value) { return {WRITE, addr, value, 0, {}}; }
    static Op scsi_write(uint32_t lba, std::span<const uint8_t> sectors) { return {SCSI_WRITE, lba, 0, 0, sectors}; }
};

Asm24Bridge::Asm24Bridge(UsbTransport& usb) : usb_(usb) {
    // Controller set-up writes tinygrad issues before using the PCIe engine.
    const std::pair<uint32_t, std::vector<uint8_t>> init[] = {
        {0x54b, {0x20}}, {0x54e, {0x04}}, {0x5a8, {0x02}}, {0x5f8, {0x04}}, {0x7ec, {0x01, 0, 0, 0}}, {0xc422, {0x02}}, {0x0, {0x33}},
    };
    std::vector<Op> ops;
    for (const auto& [addr, bytes] : init)
        for (size_t i = 0; i < bytes.size(); i++) ops.push_back(Op::write(uint32_t(addr + i), bytes[i]));
    exec(ops);
}

std::vector<std::vector<uint8_t>> Asm24Bridge::exec(const std::vector<Op>& ops) {
    std::vector<std::vector<uint8_t>> results(ops.size());
    for (size_t start = 0; start < ops.size(); start += STREAMS) {
        size_t count = std::min<size_t>(STREAMS, ops.size() - start);
        std::vector<std::array<uint8_t, 32>> commands(count);
        std::vector<std::array<uint8_t, 64>> statuses(count);
        std::vector<BulkTransfer> batch;
        for (size_t i = 0; i < count; i++) {
            const Op& op = ops[start + i];
            uint32_t stream = uint32_t(i + 1);
            auto& iu = commands[i];
            iu.fill(0);
            iu[0] = IU_COMMAND;
            iu[3] = uint8_t(stream);  // the tag is the stream id
            uint8_t* cdb = iu.data() + 16;
            uint8_t cdb_length;
            if (op.kind == Op::SCSI_WRITE) {
                uint32_t sectors = uint32_t(op.data.size() / 512);
                cdb[0] = 0x8A;
                for (int b = 0; b < 8; b++) cdb[2 + b] = uint8_t(uint64_t(op.addr) >> (56 - 8 * b));
                for (int b = 0; b < 4; b++) cdb[10 + b] = uint8_t(sectors >> (24 - 8 * b));
                cdb_length = 16;
            } else {
                uint32_t a = xdata_cdb_addr(op.addr);
                cdb[0] = op.kind == Op::READ ? 0xE4 : 0xE5;
                cdb[1] = op.kind == Op::READ ? uint8_t(op.length) : op.value;
                cdb[2] = uint8_t(a >> 16);
                cdb[3] = uint8_t(a >> 8);
                cdb[4] = uint8_t(a);
                cdb_length = 6;
            }
            iu[5] = cdb_length;
            batch.push_back({EP_STATUS_IN, stream, statuses[i].data(), 64});
            if (op.kind == Op::READ) {
                results[start + i].resize(op.length);
                batch.push_back({EP_DATA_IN, stream, results[start + i].data(), op.length});
            }
            if (op.kind == Op::SCSI_WRITE)
                batch.push_back({EP_DATA_OUT, stream, const_cast<uint8_t*>(op.data.data()), op.data.size()});
            batch.push_back({EP_COMMAND_OUT, 0, iu.data(), iu.size()});
        }
        usb_.submit(batch);
        for (size_t i = 0; i < count; i++) {
            const auto& st = statuses[i];
            const Op& op = ops[start + i];
            std::string what = op.kind == Op::SCSI_WRITE ? "SRAM write at sector " + std::to_string(op.addr)
                               : (op.kind == Op::READ ? "XDATA read at " : "XDATA write at ") + hex(op.addr);
            if (st[0] != IU_SENSE || st[3] != i + 1) throw Error("[usb] " + usb_.describe() + ": " + what + ": malformed status from the bridge");
            if (st[6] != 0)
                throw Error("[usb] " + usb_.describe() + ": the bridge rejected the " + what + " (SCSI status " + hex(st[6]) + ")");
        }
        for (const BulkTransfer& t : batch)
            if (t.endpoint == EP_DATA_IN && t.actual != t.length) throw Error("[usb] " + usb_.describe() + ": short XDATA read");
    }
    return results;
}

std::vector<uint8_t> Asm24Bridge::read_xdata(uint32_t addr, size_t n) {
    if (addr + uint64_t(n) > 0x20000) throw Error("[usb] XDATA read at " + hex(addr) + " runs past the 128 KiB XDATA space");
    std::vector<Op> ops;
    for (size_t off = 0; off < n; off += 255) ops.push_back(Op::read(uint32_t(addr + off), uint32_t(std::min<size_t>(255, n - off))));
    std::vector<uint8_t> out;
    for (auto& part : exec(ops)) out.insert(out.end(), part.begin(), part.end());
    return out;
}

void Asm24Bridge::write_xdata(uint32_t addr, std::span<const uint8_t> bytes) {
    if (addr + uint64_t(bytes.size()) > 0x20000) throw Error("[usb] XDATA write at " + hex(addr) + " runs past the 128 KiB XDATA space");
    std::vector<Op> ops;
    for (size_t i = 0; i < bytes.size(); i++) ops.push_back(Op::write(uint32_t(addr + i), bytes[i]));
    exec(ops);
}

void Asm24Bridge::sram_write(size_t offset, std::span<const uint8_t> bytes) {
    if (offset % 512) throw Error("[usb] SRAM writes start on a 512-byte sector; offset " + hex(offset) + " does not");
    if (offset + bytes.size() > SRAM_BYTES) throw Error("[usb] SRAM write of " + std::to_string(bytes.size()) + " bytes at " + hex(offset) + " exceeds the 512 KiB SRAM");
    for (size_t done = 0; done < bytes.size(); done += SCSI_WRITE_CHUNK) {
        size_t n = std::min(SCSI_WRITE_CHUNK, bytes.size() - done);
        std::vector<uint8_t> sectors((n + 511) / 512 * 512, 0);
        std::memcpy(sectors.data(), bytes.data() + done, n);
        std::vector<Op> ops = {Op::scsi_write(uint32_t((offset + done) / 512), sectors)};
        // Re-arm the controller's DMA state after the SCSI write (tinygrad's scsi_write does the same).
        for (uint32_t a : {0x171u, 0x172u, 0x173u}) ops.push_back(Op::write(a, 0xff));
        for (uint32_t a : {0xce6eu, 0xce6fu}) ops.push_back(Op::write(a, 0x00));
        exec(ops);
    }
}

std::vector<uint8_t> Asm24Bridge::sram_read(size_t offset, size_t n) {
    if (offset + n > SRAM_HOST_READABLE)
        throw Error("[usb] SRAM read of " + std::to_string(n) + " bytes at " + hex(offset) + ": only the first " + hex(SRAM_HOST_READABLE) +
                    " bytes are readable through XDATA");
    return read_xdata(SRAM_XDATA + uint32_t(offset), n);
}

uint32_t Asm24Bridge::pcie_request(uint8_t fmt_type, uint32_t address, std::optional<uint32_t> value, int size, const std::string& what) {
    uint32_t offset = address & 3;
    if (size < 1 || size > 4 || offset + size > 4) throw Error("[usb] " + what + ": " + std::to_string(size) + "-byte access at " + hex(address) + " crosses a dword");
    uint8_t byte_enable = uint8_t(((1u << size) - 1) << offset);
    std::vector<Op> ops;
    auto put32 = [&](uint32_t reg, uint32_t v) {  // registers hold big-endian values
        for (int b = 0; b < 4; b++) ops.push_back(Op::write(reg + b, uint8_t(v >> (24 - 8 * b))));
    };
    if (value) put32(TLP_DATA, *value << (8 * offset));
    put32(TLP_ADDR, address & ~3u);
    ops.push_back(Op::write(TLP_BYTE_ENABLE, byte_enable));
    ops.push_back(Op::write(TLP_FMT_TYPE, fmt_type));
    ops.push_back(Op::write(TLP_STATUS, STATUS_SENT));  // write-one-to-clear
    ops.push_back(Op::write(TLP_TRIGGER, 0x0f));
    exec(ops);

    auto wait_for = [&](uint8_t bit) {
        for (int i = 0; i < POLLS; i++) {
            uint8_t st = read_xdata(TLP_STATUS, 1)[0];
            if (st & bit) return;
            if (st & STATUS_ERROR) {
                write_xdata(TLP_STATUS, std::vector<uint8_t>{STATUS_ERROR});
                throw Error("[usb] " + what + ": the PCIe request timed out (link down?)");
            }
        }
        throw Error("[usb] " + what + ": the bridge never finished the PCIe request");
    };
    wait_for(STATUS_SENT);
    write_xdata(TLP_STATUS, std::vector<uint8_t>{STATUS_SENT});
    bool posted = (fmt_type & 0xdf) == 0x40;  // memory writes get no completion
    if (posted) return 0;

    wait_for(STATUS_COMPLETION);
    write_xdata(TLP_STATUS, std::vector<uint8_t>{STATUS_COMPLETION});
    bool has_data = read_xdata(TLP_CPL_HAS_DATA, 1)[0] & 1;
    auto cpl = read_xdata(TLP_COMPLETION, 2);
    uint16_t header = uint16_t(cpl[0] << 8 | cpl[1]);
    uint32_t status = header >> 13, byte_count = header & 0xfff;
    static const char* const STATUS_NAMES[] = {"Successful Completion", "Unsupported Request", "Configuration Request Retry Status",
                                               "reserved status 3", "Completer Abort"};
    if (status) throw Error("[usb] " + what + ": " + (status < 5 ? STATUS_NAMES[status] : "reserved completion status"));
    bool config = (fmt_type & 0xbe) == 0x04;
    bool write = (fmt_type & 0x40) != 0;
    if (byte_count != (config ? 4u : uint32_t(size)) || (config && has_data == write))
        throw Error("[usb] " + what + ": malformed completion (byte count " + std::to_string(byte_count) + ")");
    if (write) return 0;
    auto d = read_xdata(TLP_DATA, 4);
    uint32_t v = uint32_t(d[0]) << 24 | uint32_t(d[1]) << 16 | uint32_t(d[2]) << 8 | d[3];
    return (v >> (8 * offset)) & (size == 4 ? 0xffffffffu : (1u << (8 * size)) - 1);
}

uint32_t Asm24Bridge::config_read(Bdf b, uint16_t offset, int size) {
    if (offset >= 0x1000 || b.dev >= 32 || b.fn >= 8) throw Error("[usb] config read: invalid address");
    uint32_t address = uint32_t(b.bus) << 24 | uint32_t(b.dev) << 19 | uint32_t(b.fn) << 16 | offset;
    char what[64];
    std::snprintf(what, sizeof what, "config read of %02x:%02x.%x at 0x%03x", b.bus, b.dev, b.fn, offset);
    return pcie_request(0x04 | (b.bus > 0), address, std::nullopt, size, what);  // type 1 beyond the first bus
}

void Asm24Bridge::config_write(Bdf b, uint16_t offset, uint32_t value, int size) {
    if (offset >= 0x1000 || b.dev >= 32 || b.fn >= 8) throw Error("[usb] config write: invalid address");
    uint32_t address = uint32_t(b.bus) << 24 | uint32_t(b.dev) << 19 | uint32_t(b.fn) << 16 | offset;
    char what[64];
    std::snprintf(what, sizeof what, "config write of %02x:%02x.%x at 0x%03x", b.bus, b.dev, b.fn, offset);
    pcie_request(0x44 | (b.bus > 0), address, value, size, what);
}

uint32_t Asm24Bridge::mem_read(uint64_t addr, int size) {
    if (addr > 0xffffffffull) throw Error("[usb] memory read at " + hex(addr) + ": the bridge's TLP engine takes 32-bit addresses");
    return pcie_request(0x00, uint32_t(addr), std::nullopt, size, "memory read at " + hex(addr));
}

void Asm24Bridge::mem_write(uint64_t addr, uint32_t value, int size) {
    if (addr > 0xffffffffull) throw Error("[usb] memory write at " + hex(addr) + ": the bridge's TLP engine takes 32-bit addresses");
    pcie_request(0x40, uint32_t(addr), value, size, "memory write at " + hex(addr));
}

}  // namespace usb
