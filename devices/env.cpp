// Environment flags (see env.h), parsed once on first use.
#include "devices/env.h"

#include <cstdlib>
#include <thread>

namespace devices::env {

namespace {
int int_flag(const char* name, int fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    return (end && *end == 0) ? int(x) : fallback;
}
}  // namespace

int debug() {
    static const int v = int_flag("DEBUG", 0);
    return v;
}

int threads() {
    static const int v = [] {
        int hw = int(std::thread::hardware_concurrency());
        int n = int_flag("TINYLLM_THREADS", hw > 0 ? hw : 1);
        return n < 1 ? 1 : n;
    }();
    return v;
}

bool cpu_thp() {
    static const bool v = int_flag("TINYLLM_CPU_THP", 1) != 0;
    return v;
}

bool cpu_pack() {
    static const bool v = int_flag("TINYLLM_CPU_PACK", 1) != 0;
    return v;
}

const std::string& kernel_cache() {
    static const std::string v = [] {
        auto var = [](const char* name) {
            const char* d = std::getenv(name);
            return std::string(d ? d : "");
        };
        if (const std::string dir = var("TINYLLM_KERNEL_CACHE"); !dir.empty()) return dir == "0" ? std::string() : dir;
        if (const std::string xdg = var("XDG_CACHE_HOME"); !xdg.empty()) return xdg + "/tinyllm/kernels";
        if (const std::string home = var("HOME"); !home.empty()) return home + "/.cache/tinyllm/kernels";
        return std::string();
    }();
    return v;
}

const std::string& device() {
    static const std::string v = [] {
        const char* d = std::getenv("TINYLLM_DEVICE");
        return std::string(d && *d ? d : "CPU");
    }();
    return v;
}

const std::string& null_target() {
    static const std::string v = [] {
        const char* d = std::getenv("TINYLLM_NULL_TARGET");
        return std::string(d && *d ? d : "gfx1100");
    }();
    return v;
}

const std::string& fake_kfd() {
    static const std::string v = [] {
        const char* d = std::getenv("TINYLLM_FAKE_KFD");
        return std::string(d ? d : "");
    }();
    return v;
}

}  // namespace devices::env
