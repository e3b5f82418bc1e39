// Noticing that an HTTP client went away. cpp-httplib hands handlers no socket, so the watch finds the
// connection among the process's descriptors by its ports, then peeks at it: a readable socket with
// nothing to read means the peer closed it.
#include "server/server_impl.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>

namespace server {

namespace {

int port_of(const sockaddr_storage& addr) {
    if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
    if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
    return -1;
}

}  // namespace

ClientWatch::ClientWatch(int remote_port, int local_port) {
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) return;
    while (dirent* entry = readdir(dir)) {
        char* end = nullptr;
        long fd = std::strtol(entry->d_name, &end, 10);
        if (*end || end == entry->d_name) continue;
        sockaddr_storage peer{}, self{};
        socklen_t peer_len = sizeof peer, self_len = sizeof self;
        if (getpeername(int(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
        if (getsockname(int(fd), reinterpret_cast<sockaddr*>(&self), &self_len) != 0) continue;
        if (port_of(peer) == remote_port && port_of(self) == local_port) {
            fd_ = int(fd);
            break;
        }
    }
    closedir(dir);
}

bool ClientWatch::gone() const {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
    char c;
    return recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

}  // namespace server
