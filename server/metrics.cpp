// Prometheus histograms for /metrics (time to first token, inter-token latency).
#include "server/server_impl.h"

#include <algorithm>
#include <cstdio>

namespace server {

void Histogram::add(double value) {
    counts_[size_t(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin())]++;
    sum_ += value;
    count_++;
}

std::string Histogram::text(const char* name, const char* help) const {
    std::string out = std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
    char line[256];
    uint64_t below = 0;
    for (size_t i = 0; i <= bounds_.size(); i++) {
        below += counts_[i];
        if (i < bounds_.size()) std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %llu\n", name, bounds_[i], (unsigned long long)below);
        else std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)below);
        out += line;
    }
    std::snprintf(line, sizeof line, "%s_sum %.6g\n%s_count %llu\n", name, sum_, name, (unsigned long long)count_);
    return out + line;
}

}  // namespace server
