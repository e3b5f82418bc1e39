// Runs a piece of a test in a forked child, so that its peak RSS and CPU time are its own and a crash
// or hang only costs the child: for tests that assert hostile input stays within time and memory.
#pragma once

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

namespace test_child {

struct Result {
    int code = -1;          // the child's exit code, or -signal
    std::string message;    // what the body returned
    double seconds = 0;     // wall time of the body
    double cpu_seconds = 0; // the child's CPU time (user + system): what the work costs, whatever the load
    long peak_rss_kb = 0;   // the child's peak resident set, less what it had at the fork (the test
                            // process's pages, which grow with the tests that ran before in it)
};

// This process's resident set now, in kB (0 when /proc is not readable).
inline long resident_kb() {
    FILE* f = std::fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;
    if (f) {
        if (std::fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
        std::fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// `body` returns the message and sets `code` (the child's exit code); exceptions become code 99.
inline Result run(const std::function<std::string(int& code)>& body, int timeout_seconds = 60) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        const long start_kb = resident_kb();
        auto t0 = std::chrono::steady_clock::now();
        int code = 0;
        std::string message;
        try {
            message = body(code);
        } catch (const std::exception& e) {
            code = 99;
            message = e.what();
        }
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::string report = std::to_string(seconds) + "\n" + std::to_string(start_kb) + "\n" + message;
        ssize_t ignored = write(fds[1], report.data(), report.size());
        (void)ignored;
        _exit(code);
    }
    close(fds[1]);
    // The parent bounds the wait, so a hang fails the test instead of stalling it.
    int status = 0;
    rusage usage{};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
    while (wait4(pid, &status, WNOHANG, &usage) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(pid, SIGKILL);
            wait4(pid, &status, 0, &usage);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string report;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    r.peak_rss_kb = usage.ru_maxrss;
    r.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    size_t nl = report.find('\n'), nl2 = nl == std::string::npos ? nl : report.find('\n', nl + 1);
    if (nl2 != std::string::npos) {
        r.seconds = std::stod(report.substr(0, nl));
        r.peak_rss_kb -= std::stol(report.substr(nl + 1, nl2 - nl - 1));
        r.message = report.substr(nl2 + 1);
    }
    return r;
}

// Sanitizer builds run the same cases several times slower, and keep freed memory in a quarantine
// (ASAN: 256 MB by default) plus shadow memory, so their peak RSS is that much higher
// (TINYLLM_SANITIZED: set by CMake for sanitizer builds).
#ifdef TINYLLM_SANITIZED
constexpr double SLOWDOWN = 5;
constexpr long RSS_SLACK_KB = 384 * 1024;
#else
constexpr double SLOWDOWN = 1;
constexpr long RSS_SLACK_KB = 0;
#endif

}  // namespace test_child
