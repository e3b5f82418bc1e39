// GPUs from the KFD topology in sysfs: one directory per node with `gpu_id` (0 for CPU nodes) and
// `properties` ("name value" lines); memory banks under mem_banks/*/properties.
#include "devices/amd/kfd_impl.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <map>

namespace amd {

namespace {

std::optional<uint64_t> parse_uint(std::string_view s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
    return v;
}

std::map<std::string, uint64_t> parse_properties(const std::string& text, const std::string& path) {
    std::map<std::string, uint64_t> props;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string_view line(text.data() + start, end - start);
        start = end + 1;
        if (line.empty()) continue;
        size_t sp = line.find(' ');
        auto value = sp == std::string_view::npos ? std::nullopt : parse_uint(line.substr(sp + 1));
        if (!value) throw Error("[amd] " + path + ": malformed line '" + std::string(line) + "'");
        props[std::string(line.substr(0, sp))] = *value;
    }
    return props;
}

uint32_t u32(const std::map<std::string, uint64_t>& p, const char* key) {
    auto it = p.find(key);
    return it == p.end() ? 0 : static_cast<uint32_t>(it->second);
}

}  // namespace

std::string GpuInfo::describe() const {
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s, %u CUs, %.1f GiB VRAM", target.c_str(), cu_count(), double(vram_bytes) / (1ull << 30));
    return buf;
}

std::vector<GpuInfo> list_gpus(KfdIO& io) {
    std::vector<uint32_t> nodes;
    for (const auto& name : io.list_dir(KFD_TOPOLOGY))
        if (auto n = parse_uint(name)) nodes.push_back(static_cast<uint32_t>(*n));
    std::sort(nodes.begin(), nodes.end());

    std::vector<GpuInfo> gpus;
    for (uint32_t node : nodes) {
        std::string dir = std::string(KFD_TOPOLOGY) + "/" + std::to_string(node);
        auto gpu_id_text = io.read_file(dir + "/gpu_id");
        auto gpu_id = gpu_id_text ? parse_uint(*gpu_id_text) : std::nullopt;
        if (!gpu_id || *gpu_id == 0) continue;  // a CPU node, or one we may not read
        auto text = io.read_file(dir + "/properties");
        if (!text) throw Error("[amd] " + dir + "/properties: unreadable");
        auto p = parse_properties(*text, dir + "/properties");

        GpuInfo g;
        g.node = node;
        g.gpu_id = static_cast<uint32_t>(*gpu_id);
        g.gfx_target_version = u32(p, "gfx_target_version");
        if (g.gfx_target_version == 0) continue;  // not a compute-capable GPU
        char target[16];
        std::snprintf(target, sizeof target, "gfx%u%x%x", g.gfx_target_version / 10000, g.gfx_target_version / 100 % 100,
                      g.gfx_target_version % 100);
        g.target = target;
        g.vendor_id = u32(p, "vendor_id");
        g.device_id = u32(p, "device_id");
        g.drm_render_minor = u32(p, "drm_render_minor");
        g.simd_count = u32(p, "simd_count");
        g.simd_per_cu = u32(p, "simd_per_cu");
        g.max_waves_per_simd = u32(p, "max_waves_per_simd");
        g.array_count = u32(p, "array_count");
        g.simd_arrays_per_engine = u32(p, "simd_arrays_per_engine");
        g.lds_size_kb = u32(p, "lds_size_in_kb");
        g.num_xcc = std::max(1u, u32(p, "num_xcc"));
        // VRAM: the frame-buffer heaps (HSA heap types 1 public, 2 private) of the node's memory banks.
        for (const auto& bank : io.list_dir(dir + "/mem_banks")) {
            auto bt = io.read_file(dir + "/mem_banks/" + bank + "/properties");
            if (!bt) continue;
            auto bp = parse_properties(*bt, dir + "/mem_banks/" + bank + "/properties");
            uint32_t heap = u32(bp, "heap_type");
            if (heap == 1 || heap == 2) g.vram_bytes += bp["size_in_bytes"];
        }
        gpus.push_back(g);
    }
    return gpus;
}

}  // namespace amd
