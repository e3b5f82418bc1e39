// Bringing up an AMD GPU over USB needs its firmware files: which ones, and the exact file named when one
// is missing (or only compressed). Uses a scratch firmware directory; the probe runs on the fake bridge.
#include "devices/usb/fake/fake_bridge.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// A fresh firmware directory holding `files`.
struct FirmwareDir {
    fs::path path;
    explicit FirmwareDir(const std::vector<std::string>& files) {
        path = fs::temp_directory_path() / ("tinyllm-fw-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
        fs::create_directories(path);
        for (const auto& f : files) std::ofstream(path / f) << "blob";
    }
    ~FirmwareDir() { fs::remove_all(path); }
    static int& counter() {
        static int n = 0;
        return n;
    }
};

}  // namespace

TEST_CASE("usb firmware: GPU ids map to targets and their firmware sets") {
    CHECK(usb::amd_target(0x744c) == "gfx1100");
    CHECK(usb::amd_target(0x7550) == "gfx1201");
    CHECK_FALSE(usb::amd_target(0x1234));
    auto fw = usb::amd_firmware("gfx1100");
    CHECK(std::find(fw.begin(), fw.end(), "psp_13_0_0_sos.bin") != fw.end());
    CHECK(std::find(fw.begin(), fw.end(), "gc_11_0_0_mec.bin") != fw.end());
    CHECK(usb::amd_firmware("gfx1030").empty());
}

TEST_CASE("usb firmware: the missing file is named exactly") {
    auto files = usb::amd_firmware("gfx1100");
    REQUIRE(files.size() > 3);
    std::string missing = files[3];
    files.erase(files.begin() + 3);
    FirmwareDir dir(files);
    CHECK_THROWS_WITH(usb::check_amd_firmware("gfx1100", dir.path.string()),
                      Catch::Contains((dir.path / missing).string() + ", which is missing"));

    FirmwareDir compressed([&] {
        auto all = files;
        all.push_back(missing + ".zst");
        return all;
    }());
    CHECK_THROWS_WITH(usb::check_amd_firmware("gfx1100", compressed.path.string()),
                      Catch::Contains("only " + missing + ".zst is there") && Catch::Contains("zstd -d"));

    FirmwareDir complete(usb::amd_firmware("gfx1100"));
    CHECK_NOTHROW(usb::check_amd_firmware("gfx1100", complete.path.string()));
    CHECK_THROWS_WITH(usb::check_amd_firmware("gfx1030", complete.path.string()), Catch::Contains("not supported"));
}

TEST_CASE("usb firmware: probing the GPU behind the fake bridge stops at the first missing file") {
    usb::FakeAsm24 fake;
    usb::Asm24Bridge br(fake);
    FirmwareDir empty({});
    CHECK_THROWS_WITH(usb::probe_amd_gpu(br, empty.path.string()),
                      Catch::Contains("the gfx1100 GPU needs firmware " + (empty.path / "psp_13_0_0_sos.bin").string()));

    usb::FakeAsm24 fake2;
    usb::Asm24Bridge br2(fake2);
    FirmwareDir complete(usb::amd_firmware("gfx1100"));
    usb::PciFunction gpu = usb::probe_amd_gpu(br2, complete.path.string());
    CHECK(gpu.device == 0x744c);

    usb::FakeGpuModel nvidia;
    nvidia.vendor = 0x10de;
    usb::FakeAsm24 fake3({.switch_ports = 2, .gpu_present = true, .gpu = nvidia});
    usb::Asm24Bridge br3(fake3);
    CHECK_THROWS_WITH(usb::probe_amd_gpu(br3, complete.path.string()), Catch::Contains("is 10de:744c, not an AMD GPU"));
}
