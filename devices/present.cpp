// list_present(): asks each backend what it sees, without opening anything.
#include "devices/present.h"

#include "devices/amd/amd.h"
#include "devices/cpu/cpu_impl.h"
#include "devices/usb/usb.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

namespace devices {

namespace {

std::string cpu_description() {
    std::string model;
    std::ifstream f("/proc/cpuinfo");
    for (std::string line; model.empty() && std::getline(f, line);)
        if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) model = line.substr(line.find(':') + 2);
    unsigned threads = std::thread::hardware_concurrency();
    return (model.empty() ? "host CPU" : model) + " (" + std::to_string(threads) + " threads)";
}

std::string kfd_absence() {
    amd::KfdIO& io = amd::system_kfd_io();
    int fd = io.open("/dev/kfd", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        io.close(fd);
        return "none: KFD lists no GPU";
    }
    if (errno == ENOENT) return "none: /dev/kfd does not exist (no AMD GPU, or the amdgpu kernel driver is not loaded)";
    if (errno == EACCES || errno == EPERM) return "not accessible: permission denied on /dev/kfd (join the 'render' group)";
    return std::string("not accessible: /dev/kfd: ") + std::strerror(errno);
}

}  // namespace

std::vector<PresentDevice> list_present() {
    std::vector<PresentDevice> out = {{"CPU", cpu_description(), true, cpu::kernel_report()}};

    std::vector<amd::GpuInfo> gpus;
    std::string amd_error;
    try {
        gpus = amd::list_gpus();
    } catch (const amd::Error& e) {
        amd_error = e.what();
    }
    for (size_t i = 0; i < gpus.size(); i++) out.push_back({"AMD:" + std::to_string(i), gpus[i].describe(), true, {}});
    if (gpus.empty()) out.push_back({"AMD", amd_error.empty() ? kfd_absence() : "unreadable topology: " + amd_error, false, {}});

    auto bridges = usb::list_bridges();
    for (size_t i = 0; i < bridges.size(); i++)
        out.push_back({"AMD:USB:" + std::to_string(i), bridges[i].describe() + " (GPU bring-up over USB is not implemented)", true, {}});
    if (bridges.empty()) out.push_back({"AMD:USB", "none: no ASM24xx USB-to-PCIe bridge attached", false, {}});
    return out;
}

}  // namespace devices
