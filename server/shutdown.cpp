// Graceful shutdown on SIGTERM/SIGINT for the processes that serve (tinyllm serve, tinyllm_fake): a
// thread waits for the signal, shuts the server down within its timeout and ends the process.
#include "server/server.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>
#include <thread>

namespace server {

void shut_down_on_signal(Server& server) {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    // Blocked here, so in every thread started after this; the waiter takes them with sigwait.
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::thread([&server, signals] {
        int signal = 0;
        sigwait(&signals, &signal);
        std::fprintf(stderr, "[server] %s: shutting down\n", signal == SIGTERM ? "SIGTERM" : "SIGINT");
        const bool clean = server.shutdown();
        if (!clean) std::fprintf(stderr, "[server] requests were still running when the shutdown timeout passed\n");
        std::fflush(nullptr);
        // The main thread may still be loading the model: end here rather than unwinding under it.
        std::_Exit(clean ? 0 : 1);
    }).detach();
}

}  // namespace server
