// The real KfdIO: plain syscalls and file reads.
#include "devices/amd/amd.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace amd {

namespace {

class SystemKfdIO final : public KfdIO {
public:
    int open(const std::string& path, int flags) override { return ::open(path.c_str(), flags); }
    int close(int fd) override { return ::close(fd); }
    int ioctl(int fd, unsigned long request, void* arg) override { return ::ioctl(fd, request, arg); }
    void* mmap(void* addr, size_t length, int prot, int flags, int fd, off_t offset) override {
        return ::mmap(addr, length, prot, flags, fd, offset);
    }
    int munmap(void* addr, size_t length) override { return ::munmap(addr, length); }
    std::optional<std::string> read_file(const std::string& path) override {
        std::ifstream f(path);
        if (!f) return std::nullopt;
        std::stringstream ss;
        ss << f.rdbuf();
        if (f.bad()) return std::nullopt;
        return ss.str();
    }
    std::vector<std::string> list_dir(const std::string& path) override {
        std::vector<std::string> names;
        DIR* d = ::opendir(path.c_str());
        if (!d) return names;
        while (dirent* e = ::readdir(d))
            if (e->d_name[0] != '.') names.emplace_back(e->d_name);
        ::closedir(d);
        return names;
    }
    void write_doorbell(volatile uint64_t* doorbell, uint64_t value) override {
        store_fence();  // the packet, its kernargs and buffer writes are visible before the CP wakes
        *doorbell = value;
    }
    void write_register(volatile uint32_t* reg, uint32_t value) override {
        store_fence();
        *reg = value;
        (void)*reg;  // reading it back makes sure the posted write has landed
    }

private:
    static void store_fence() {
#if defined(__x86_64__)
        __builtin_ia32_sfence();  // BAR mappings are write-combining: plain ordering is not enough
#else
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
    }
};

}  // namespace

KfdIO& system_kfd_io() {
    static SystemKfdIO io;
    return io;
}

}  // namespace amd
