// Pull progress for people: on a terminal one redrawn line per file (bar, bytes, speed, ETA); otherwise
// (logs, pipes) a plain line at the start, every 10% and at the end.
#include "hub/hub_impl.h"

#include <unistd.h>

#include <chrono>
#include <memory>

namespace hub {

namespace {

using Clock = std::chrono::steady_clock;

struct ProgressState {
    std::FILE* out;
    bool tty;
    std::string file;
    Clock::time_point start;
    uint64_t start_bytes = 0;  // resumed from here: speed counts only what this run fetched
    int last_decile = -1;
    bool open_line = false;
};

std::string clock_time(double seconds) {
    if (!(seconds >= 0) || seconds > 360000) return "--:--";
    const long s = long(seconds);
    char buf[32];
    if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
    return buf;
}

void on_progress(ProgressState& st, const Progress& p) {
    if (p.file.empty()) {  // "pulling manifest", "success"
        if (st.open_line) std::fputc('\n', st.out), st.open_line = false;
        if (p.status == "pulling manifest") std::fprintf(st.out, "pulling manifest\n");
        std::fflush(st.out);
        return;
    }
    if (p.file != st.file) {
        if (st.open_line) std::fputc('\n', st.out), st.open_line = false;
        st = ProgressState{st.out, st.tty, p.file, Clock::now(), p.completed, -1, false};
    }
    if (p.status == "verifying sha256 digest") {
        if (st.open_line) std::fputc('\n', st.out), st.open_line = false;
        std::fprintf(st.out, "verifying sha256 digest of %s\n", p.file.c_str());
        std::fflush(st.out);
        return;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - st.start).count();
    const double speed = seconds > 0.2 ? double(p.completed - st.start_bytes) / seconds : 0;
    const double eta = speed > 0 ? double(p.total - p.completed) / speed : -1;
    const int percent = p.total ? int(p.completed * 100 / p.total) : 100;
    if (st.tty) {
        constexpr int WIDTH = 24;
        std::string bar(size_t(percent * WIDTH / 100), '#');
        bar.resize(WIDTH, ' ');
        std::fprintf(st.out, "\r%s [%s] %3d%% %s / %s  %s/s  ETA %s\x1b[K", p.file.c_str(), bar.c_str(), percent,
                     human_bytes(p.completed).c_str(), human_bytes(p.total).c_str(), human_bytes(uint64_t(speed)).c_str(),
                     clock_time(eta).c_str());
        st.open_line = true;
    } else if (percent / 10 != st.last_decile) {
        st.last_decile = percent / 10;
        std::fprintf(st.out, "%s: %d%% %s / %s %s/s\n", p.file.c_str(), percent, human_bytes(p.completed).c_str(),
                     human_bytes(p.total).c_str(), human_bytes(uint64_t(speed)).c_str());
    }
    std::fflush(st.out);
}

}  // namespace

ProgressFn terminal_progress(std::FILE* out) {
    auto st = std::make_shared<ProgressState>(ProgressState{out, bool(isatty(fileno(out))), "", Clock::now()});
    return [st](const Progress& p) { on_progress(*st, p); };
}

}  // namespace hub
