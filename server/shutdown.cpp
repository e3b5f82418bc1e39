// Graceful shutdown on SIGTERM/SIGINT for the processes that serve (tinyllm serve, tinyllm_fake): the
// handler only writes the signal to a pipe; a thread reading it shuts the server down within its
// timeout and ends the process. (A handler, not a blocked mask: threads started before this, such as
// the engine's pool, would otherwise take the signal with its default action.)
#include "server/server.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <thread>
#include <unistd.h>

namespace server {

namespace {

int g_signal_pipe[2] = {-1, -1};
std::atomic<bool> g_shutting_down{false};

extern "C" void on_signal(int signal) {
    const int saved = errno;
    const unsigned char c = static_cast<unsigned char>(signal);
    [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &c, 1);
    errno = saved;
}

}  // namespace

void shut_down_on_signal(Server& server) {
    if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) throw std::runtime_error("[server] cannot create the signal pipe");
    struct sigaction action{};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // other threads' system calls carry on
    sigaction(SIGTERM, &action, nullptr);
    sigaction(SIGINT, &action, nullptr);
    std::thread([&server] {
        unsigned char signal = 0;
        while (::read(g_signal_pipe[0], &signal, 1) < 0 && errno == EINTR) {
        }
        g_shutting_down = true;
        std::fprintf(stderr, "[server] %s: shutting down\n", signal == SIGTERM ? "SIGTERM" : "SIGINT");
        const bool clean = server.shutdown();
        if (!clean) std::fprintf(stderr, "[server] requests were still running when the shutdown timeout passed\n");
        std::fflush(nullptr);
        // The main thread may still be loading the model: end here rather than unwinding under it.
        std::_Exit(clean ? 0 : 1);
    }).detach();
}

void await_signal_shutdown() {
    // Returning would destroy the server under the thread that is shutting it down.
    while (g_shutting_down) std::this_thread::sleep_for(std::chrono::seconds(1));
}

}  // namespace server
