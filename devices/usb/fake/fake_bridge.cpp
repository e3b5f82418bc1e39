// The fake controller: takes a batch of bulk transfers as the bridge's USB side would, runs each UAS
// command IU (0xE4 XDATA read, 0xE5 XDATA write, 0x8A SCSI WRITE(16) into SRAM) with the data and status
// transfers of its stream, and models the TLP engine registers (trigger at 0xB254, write-one-to-clear
// status at 0xB296, big-endian address and data registers).
#include "devices/usb/fake/fake_bridge_impl.h"

#include <algorithm>
#include <cstring>

namespace usb {

namespace {

constexpr uint32_t TLP_DATA = 0xB220, TLP_ADDR = 0xB218, TLP_BYTE_ENABLE = 0xB217, TLP_FMT_TYPE = 0xB210;
constexpr uint32_t TLP_TRIGGER = 0xB254, TLP_STATUS = 0xB296, TLP_COMPLETION = 0xB22A, TLP_CPL_HAS_DATA = 0xB284;
constexpr uint8_t SENSE_GOOD = 0x00, SENSE_CHECK_CONDITION = 0x02;

uint32_t be32(const std::vector<uint8_t>& x, uint32_t at) {
    return uint32_t(x[at]) << 24 | uint32_t(x[at + 1]) << 16 | uint32_t(x[at + 2]) << 8 | x[at + 3];
}
void put_be32(std::vector<uint8_t>& x, uint32_t at, uint32_t v) {
    for (int i = 0; i < 4; i++) x[at + i] = uint8_t(v >> (24 - 8 * i));
}

}  // namespace

FakeAsm24::FakeAsm24(FakeBridgeOptions options) : s_(std::make_unique<State>(options)) {}
FakeAsm24::~FakeAsm24() = default;

size_t FakeAsm24::commands() const { return s_->commands; }

std::vector<uint8_t> FakeAsm24::sram(size_t offset, size_t n) const {
    return std::vector<uint8_t>(s_->sram.begin() + offset, s_->sram.begin() + offset + n);
}

std::vector<uint8_t> FakeAsm24::vram(uint64_t offset, size_t n) const { return s_->link.vram(offset, n); }

// XDATA from 0xF000 up is the window onto the start of the SRAM.
uint8_t FakeAsm24::State::read_xdata(uint32_t addr) const {
    return addr >= Asm24Bridge::SRAM_XDATA ? sram[addr - Asm24Bridge::SRAM_XDATA] : xdata[addr];
}

void FakeAsm24::State::write_xdata(uint32_t addr, uint8_t value) {
    if (addr >= Asm24Bridge::SRAM_XDATA) {
        sram[addr - Asm24Bridge::SRAM_XDATA] = value;
    } else if (addr == TLP_STATUS) {
        xdata[addr] &= uint8_t(~value);  // write one to clear
    } else {
        xdata[addr] = value;
        if (addr == TLP_TRIGGER && value == 0x0f) run_tlp();
    }
}

void FakeAsm24::State::run_tlp() {
    uint8_t fmt = xdata[TLP_FMT_TYPE], byte_enable = xdata[TLP_BYTE_ENABLE];
    uint32_t address = be32(xdata, TLP_ADDR), data = be32(xdata, TLP_DATA);
    bool config = (fmt & 0xbe) == 0x04, write = fmt & 0x40;
    if (!config && (fmt & 0xbf) != 0x00) {  // only 3-DW memory and config requests exist here
        xdata[TLP_STATUS] |= 1;
        return;
    }
    FakeLink::Completion c = config ? link.config(write, fmt & 1, address, byte_enable, data) : link.memory(write, address, byte_enable, data);
    xdata[TLP_STATUS] |= 4;  // sent
    if (!config && write) return;  // posted: no completion
    uint16_t byte_count = config ? 4 : uint16_t(__builtin_popcount(byte_enable));
    uint16_t header = uint16_t(c.status << 13 | byte_count);
    xdata[TLP_COMPLETION] = uint8_t(header >> 8);
    xdata[TLP_COMPLETION + 1] = uint8_t(header);
    xdata[TLP_CPL_HAS_DATA] = c.has_data;
    if (c.has_data) put_be32(xdata, TLP_DATA, c.data);
    xdata[TLP_STATUS] |= 2;  // completion arrived
}

void FakeAsm24::submit(std::span<BulkTransfer> batch) {
    State& s = *s_;
    auto find = [&](uint8_t endpoint, uint32_t stream) -> BulkTransfer* {
        for (auto& t : batch)
            if (t.endpoint == endpoint && t.stream == stream) return &t;
        return nullptr;
    };
    for (auto& t : batch) t.actual = 0;
    for (auto& cmd : batch) {
        if (cmd.endpoint != 0x04) continue;
        if (cmd.length < 32 || cmd.data[0] != 0x01) throw Error("[fake-usb] malformed command IU");
        uint32_t stream = uint32_t(cmd.data[2]) << 8 | cmd.data[3];
        BulkTransfer* status = find(0x83, stream);
        if (!status || status->length < 16) throw Error("[fake-usb] command on stream " + std::to_string(stream) + " without a status transfer");
        cmd.actual = cmd.length;
        s.commands++;

        const uint8_t* cdb = cmd.data + 16;
        bool ok = true;
        if (cdb[0] == 0xE4 || cdb[0] == 0xE5) {
            uint32_t tagged = uint32_t(cdb[2]) << 16 | uint32_t(cdb[3]) << 8 | cdb[4];
            uint32_t addr = tagged & 0x1ffff;
            ok = (tagged & ~0x1ffffu) == 0x500000;
            if (ok && cdb[0] == 0xE5) {
                s.write_xdata(addr, cdb[1]);
            } else if (ok) {
                BulkTransfer* in = find(0x81, stream);
                uint32_t n = cdb[1];
                ok = in && in->length >= n && addr + n <= 0x20000;
                for (uint32_t i = 0; ok && i < n; i++) in->data[i] = s.read_xdata(addr + i);
                if (ok) in->actual = n;
            }
        } else if (cdb[0] == 0x8A) {  // SCSI WRITE(16): LBA is the 512-byte sector of the SRAM
            uint64_t lba = 0;
            for (int i = 0; i < 8; i++) lba = lba << 8 | cdb[2 + i];
            uint32_t sectors = uint32_t(cdb[10]) << 24 | uint32_t(cdb[11]) << 16 | uint32_t(cdb[12]) << 8 | cdb[13];
            BulkTransfer* out = find(0x02, stream);
            uint64_t bytes = uint64_t(sectors) * 512;
            ok = out && out->length == bytes && lba * 512 + bytes <= s.sram.size();
            if (ok) {
                std::memcpy(s.sram.data() + lba * 512, out->data, bytes);
                out->actual = bytes;
            }
        } else {
            ok = false;  // not a command this bridge knows
        }
        std::memset(status->data, 0, status->length);
        status->data[0] = 0x03;  // sense IU
        status->data[2] = uint8_t(stream >> 8);
        status->data[3] = uint8_t(stream);
        status->data[6] = ok ? SENSE_GOOD : SENSE_CHECK_CONDITION;
        status->actual = 16;
    }
}

}  // namespace usb
