// The on-disk cache of compiled CPU kernels (cpu_impl.h). File: a magic line, then the key's and the
// object's lengths (8 bytes each, little-endian), the key, the object, and an FNV-1a checksum of both.
#include "devices/cpu/cpu_impl.h"
#include "devices/env.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

namespace devices::cpu {

namespace {

constexpr char kMagic[] = "tinyllm kernel 1\n";

uint64_t fnv1a(const char* p, size_t n, uint64_t h = 1469598103934665603ull) {
    for (size_t i = 0; i < n; i++) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
    return h;
}

void put_u64(std::string& out, uint64_t v) {
    for (int i = 0; i < 8; i++) out.push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t get_u64(const char* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
    return v;
}

}  // namespace

KernelCache::KernelCache() : KernelCache(env::kernel_cache()) {}
KernelCache::KernelCache(std::string dir) : dir_(std::move(dir)) {}

std::string KernelCache::key(const std::string& ir, const std::string& entry) const {
    std::string k = target_;
    k += '\0';
    k += entry;
    k += '\0';
    k += ir;
    return k;
}

std::string KernelCache::path_of(const std::string& key) const {
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.o", static_cast<unsigned long long>(fnv1a(key.data(), key.size())));
    return dir_ + "/" + name;
}

std::vector<char> KernelCache::load(const std::string& key) const {
    if (dir_.empty()) return {};
    std::ifstream in(path_of(key), std::ios::binary);
    if (!in) return {};
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t head = sizeof kMagic - 1 + 16;
    if (file.size() < head + 8 || file.compare(0, sizeof kMagic - 1, kMagic) != 0) return {};
    const uint64_t key_len = get_u64(file.data() + sizeof kMagic - 1), obj_len = get_u64(file.data() + sizeof kMagic - 1 + 8);
    if (key_len != key.size() || obj_len == 0 || obj_len > file.size() || file.size() != head + key_len + obj_len + 8) return {};
    if (file.compare(head, key_len, key) != 0) return {};  // another kernel with the same name hash
    const char* obj = file.data() + head + key_len;
    if (get_u64(obj + obj_len) != fnv1a(obj, obj_len, fnv1a(key.data(), key.size()))) return {};
    return std::vector<char>(obj, obj + obj_len);
}

void KernelCache::store(const std::string& key, const std::vector<char>& object) const {
    if (dir_.empty() || object.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    std::string file(kMagic);
    put_u64(file, key.size());
    put_u64(file, object.size());
    file += key;
    file.append(object.data(), object.size());
    put_u64(file, fnv1a(object.data(), object.size(), fnv1a(key.data(), key.size())));
    const std::string path = path_of(key);
    const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) return;  // a read-only or missing folder: the kernel is compiled each run, as without a cache
        out.write(file.data(), static_cast<std::streamsize>(file.size()));
        if (!out.flush()) {
            out.close();
            std::filesystem::remove(tmp, ec);
            return;
        }
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) std::filesystem::remove(tmp, ec);
}

}  // namespace devices::cpu
