// UsbTransport over libusb-1.0: finds the bridge, takes interface 0 from the kernel's uas driver, selects
// its UAS alternate setting (1) and allocates USB 3 streams on the bulk endpoints; a batch is submitted
// asynchronously and reaped together (as tinygrad's USB3 class does).
#include "devices/usb/usb.h"

#include <libusb-1.0/libusb.h>

#include <cstdio>
#include <vector>

namespace usb {

namespace {

constexpr uint16_t IDS[][2] = {{0xadd1, 0x0001}, {0x174c, 0x2464}, {0x174c, 0x2463}};
constexpr unsigned TIMEOUT_MS = 1000;

bool is_bridge(const libusb_device_descriptor& d) {
    for (const auto& id : IDS)
        if (d.idVendor == id[0] && d.idProduct == id[1]) return true;
    return false;
}

std::string libusb_message(int rc) { return std::string(libusb_error_name(rc)) + " (" + libusb_strerror(rc) + ")"; }

// The bridges on the system, in libusb's order (each with a reference the caller drops).
std::vector<std::pair<libusb_device*, BridgeInfo>> find_bridges(libusb_context* ctx) {
    std::vector<std::pair<libusb_device*, BridgeInfo>> out;
    libusb_device** list = nullptr;
    ssize_t n = libusb_get_device_list(ctx, &list);
    for (ssize_t i = 0; i < n; i++) {
        libusb_device_descriptor d;
        if (libusb_get_device_descriptor(list[i], &d) != 0 || !is_bridge(d)) continue;
        BridgeInfo b{libusb_get_bus_number(list[i]), libusb_get_device_address(list[i]), d.idVendor, d.idProduct};
        out.emplace_back(libusb_ref_device(list[i]), b);
    }
    if (n >= 0) libusb_free_device_list(list, 1);
    return out;
}

class LibusbTransport final : public UsbTransport {
public:
    LibusbTransport(libusb_context* ctx, libusb_device_handle* h, BridgeInfo info) : ctx_(ctx), h_(h), info_(info) {}
    ~LibusbTransport() override {
        libusb_release_interface(h_, 0);
        libusb_close(h_);
        libusb_exit(ctx_);
    }

    std::string describe() const override { return info_.describe(); }

    void submit(std::span<BulkTransfer> batch) override {
        std::vector<libusb_transfer*> transfers(batch.size(), nullptr);
        int pending = 0;
        auto done = [](libusb_transfer* t) { --*static_cast<int*>(t->user_data); };
        int rc = 0;
        for (size_t i = 0; i < batch.size() && rc == 0; i++) {
            BulkTransfer& b = batch[i];
            libusb_transfer* t = transfers[i] = libusb_alloc_transfer(0);
            if (!t) throw Error("[usb] " + describe() + ": out of memory for a transfer");
            if (b.stream)
                libusb_fill_bulk_stream_transfer(t, h_, b.endpoint, b.stream, b.data, int(b.length), done, &pending, TIMEOUT_MS);
            else
                libusb_fill_bulk_transfer(t, h_, b.endpoint, b.data, int(b.length), done, &pending, TIMEOUT_MS);
            if ((rc = libusb_submit_transfer(t)) == 0) pending++;
        }
        while (pending > 0) libusb_handle_events(ctx_);  // every submitted transfer completes (or times out)
        std::string failure = rc ? "submit failed: " + libusb_message(rc) : "";
        for (size_t i = 0; i < batch.size(); i++) {
            if (!transfers[i]) continue;
            batch[i].actual = size_t(transfers[i]->actual_length);
            if (failure.empty() && transfers[i]->status != LIBUSB_TRANSFER_COMPLETED) {
                char ep[8];
                std::snprintf(ep, sizeof ep, "0x%02x", batch[i].endpoint);
                failure = std::string("transfer on endpoint ") + ep + " " +
                          (transfers[i]->status == LIBUSB_TRANSFER_TIMED_OUT ? "timed out" : "failed (status " + std::to_string(transfers[i]->status) + ")");
            }
            libusb_free_transfer(transfers[i]);
        }
        if (!failure.empty()) throw Error("[usb] " + describe() + ": " + failure);
    }

private:
    libusb_context* ctx_;
    libusb_device_handle* h_;
    BridgeInfo info_;
};

}  // namespace

std::string BridgeInfo::describe() const {
    char buf[96];
    std::snprintf(buf, sizeof buf, "ASM24xx %04x:%04x at USB bus %u address %u", vendor, product, bus, address);
    return buf;
}

std::vector<BridgeInfo> list_bridges() {
    libusb_context* ctx = nullptr;
    if (libusb_init(&ctx) != 0) return {};
    std::vector<BridgeInfo> out;
    for (auto& [dev, info] : find_bridges(ctx)) {
        out.push_back(info);
        libusb_unref_device(dev);
    }
    libusb_exit(ctx);
    return out;
}

std::unique_ptr<UsbTransport> open_bridge(int index) {
    libusb_context* ctx = nullptr;
    if (int rc = libusb_init(&ctx); rc != 0) throw NoDevice("[usb] no USB access: libusb_init failed: " + libusb_message(rc));
    auto bridges = find_bridges(ctx);
    auto cleanup = [&] {
        for (auto& [dev, info] : bridges) libusb_unref_device(dev);
    };
    if (index < 0 || index >= int(bridges.size())) {
        cleanup();
        libusb_exit(ctx);
        if (bridges.empty()) throw NoDevice("[usb] no ASM24xx USB-to-PCIe bridge attached (looked for add1:0001, 174c:2464, 174c:2463)");
        throw NoDevice("[usb] AMD:USB:" + std::to_string(index) + " does not exist (" + std::to_string(bridges.size()) + " bridge(s) attached)");
    }
    BridgeInfo info = bridges[index].second;
    libusb_device_handle* h = nullptr;
    int rc = libusb_open(bridges[index].first, &h);
    cleanup();
    auto fail = [&](const std::string& what, int code) {
        if (h) libusb_close(h);
        libusb_exit(ctx);
        std::string hint = code == LIBUSB_ERROR_ACCESS ? " (permission denied: add a udev rule giving your user the device)" : "";
        throw NoDevice("[usb] " + info.describe() + ": " + what + ": " + libusb_message(code) + hint);
    };
    if (rc != 0) fail("cannot open", rc);
    if (libusb_kernel_driver_active(h, 0) == 1 && (rc = libusb_detach_kernel_driver(h, 0)) != 0) fail("cannot detach the uas driver", rc);
    if ((rc = libusb_set_configuration(h, 1)) != 0) fail("cannot set configuration 1", rc);
    if ((rc = libusb_claim_interface(h, 0)) != 0) fail("cannot claim interface 0", rc);
    if ((rc = libusb_set_interface_alt_setting(h, 0, 1)) != 0) fail("cannot select the UAS alternate setting", rc);
    unsigned char endpoints[] = {0x02, 0x81, 0x83};
    for (unsigned char ep : {0x02, 0x81, 0x83, 0x04}) libusb_clear_halt(h, ep);
    if ((rc = libusb_alloc_streams(h, 16, endpoints, 3)) < 0) fail("cannot allocate USB 3 streams (is it on a USB 3 port?)", rc);
    return std::make_unique<LibusbTransport>(ctx, h, info);
}

}  // namespace usb
