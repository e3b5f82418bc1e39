// The device registry: every backend's factory by name, each device created on first use.
#include "devices/device.h"

#include "devices/amd/engine_impl.h"
#include "devices/cpu/cpu_impl.h"
#include "devices/null/null_impl.h"

#include <cctype>
#include <map>
#include <mutex>

namespace devices {

namespace {

std::string upper(std::string s) {
    for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

struct Registry {
    std::mutex mu;
    std::map<std::string, std::function<std::unique_ptr<Device>()>> factories{
        {"AMD", amd::make_engine_device},
        {"CPU", cpu::make_device},
        {"NULL", null::make_device},
    };
    std::map<std::string, std::unique_ptr<Device>> live;
};

// Never destroyed: buffers and kernels held by static objects may still reach their device at exit.
Registry& registry() {
    static Registry* r = new Registry;
    return *r;
}

}  // namespace

Device& get(const std::string& name) {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    std::string key = upper(name);
    if (auto it = r.live.find(key); it != r.live.end()) return *it->second;
    auto f = r.factories.find(key);
    if (f == r.factories.end()) {
        std::string known;
        for (auto& [k, _] : r.factories) known += (known.empty() ? "" : ", ") + k;
        throw Error("[devices] unknown device '" + name + "' (known: " + known + ")");
    }
    return *(r.live[key] = f->second());
}

std::vector<std::string> registered() {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    std::vector<std::string> names;
    for (auto& [k, _] : r.factories) names.push_back(k);
    return names;
}

void register_device(const std::string& name, std::function<std::unique_ptr<Device>()> factory) {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    r.factories[upper(name)] = std::move(factory);
}

}  // namespace devices
