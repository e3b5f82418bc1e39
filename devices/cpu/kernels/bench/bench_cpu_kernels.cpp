// Benchmark of the hand-written CPU kernels: matrix-vector (decode) GB/s and matrix-matrix (prefill)
// GFLOP/s per weight type on the 1B (or 100M) model shapes, 1 and 2 threads, medians of repeats, and
// the per-token time those shapes add up to for the whole model (kernels only).
//   bench_cpu_kernels [--types q4_0,q8_0,...] [--model 1b|100m] [--shape ROWSxCOLS] [--prefill 128]
//                     [--threads 1,2] [--reps 7] [--isa scalar|avx2|avx512] [--working-set-mb 1024] [--thp]
//                     [--attention] [--packed]
// --packed: weights in pack_rows() panels where the type has a panel format (as models load them).
// --shape measures one matrix instead of the model's; with a small --working-set-mb the weights stay
// in cache, which shows the kernel's compute speed rather than the memory's.
#include "devices/cpu/kernels/kernels.h"

#include <sys/mman.h>

#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ck = cpu_kernels;
using gguf::Type;

namespace {

struct Shape {
    const char* name;
    int64_t rows, cols, per_token;  // per_token: how many times one token of the model uses it
};

// Llama-3.2-1B-like (../shared/tools/make_perf_gguf.py --shape 1b): 16 layers, dim 2048, 32/8 heads, FFN 8192.
const Shape k1b[] = {{"attn_q/o 2048x2048", 2048, 2048, 32},   {"attn_k/v 512x2048", 512, 2048, 32},
                     {"ffn_up/gate 8192x2048", 8192, 2048, 32}, {"ffn_down 2048x8192", 2048, 8192, 16},
                     {"output 32000x2048", 32000, 2048, 1}};
// --shape 100m: 12 layers, dim 768, 12/4 heads, FFN 2048.
const Shape k100m[] = {{"attn_q/o 768x768", 768, 768, 24},   {"attn_k/v 256x768", 256, 768, 24},
                       {"ffn_up/gate 2048x768", 2048, 768, 24}, {"ffn_down 768x2048", 768, 2048, 12},
                       {"output 32000x768", 32000, 768, 1}};

// A fixed set of threads that run one function over a split of rows. Waiting spins briefly, then
// sleeps (futex): on a shared machine a thread that only spins can lose its core for a whole
// scheduler slice and turn a 100 µs product into 8 ms.
class Team {
public:
    explicit Team(int n) : n_(n) {
        for (int i = 1; i < n; i++) workers_.emplace_back([this, i] { loop(i); });
    }
    ~Team() {
        stop_ = true;
        generation_.fetch_add(1);
        generation_.notify_all();
        for (auto& w : workers_) w.join();
    }
    void run(const std::function<void(int, int)>& f) {  // f(thread index, thread count)
        job_ = &f;
        done_.store(0);
        generation_.fetch_add(1, std::memory_order_release);
        generation_.notify_all();
        f(0, n_);
        for (int d; (d = done_.load(std::memory_order_acquire)) != n_ - 1;) wait_change(done_, d);
    }

private:
    template <class T>
    static void wait_change(std::atomic<T>& a, T seen) {
        for (int spin = 0; spin < 20000; spin++)
            if (a.load(std::memory_order_acquire) != seen) return;
        a.wait(seen, std::memory_order_acquire);
    }
    void loop(int i) {
        uint64_t seen = 0;
        while (true) {
            wait_change(generation_, seen);
            seen = generation_.load(std::memory_order_acquire);
            if (stop_) return;
            (*job_)(i, n_);
            done_.fetch_add(1, std::memory_order_release);
            done_.notify_all();
        }
    }
    int n_;
    std::vector<std::thread> workers_;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> done_{0};
    std::atomic<bool> stop_{false};
    const std::function<void(int, int)>* job_ = nullptr;
};

// Memory for weights: 2 MiB aligned; with --thp in transparent huge pages.
uint8_t* alloc_weights(size_t bytes, bool thp) {
    const size_t align = 2 << 20, size = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, size);
    if (!p) {
        std::fprintf(stderr, "out of memory (%zu bytes)\n", size);
        std::exit(1);
    }
    if (thp) madvise(p, size, MADV_HUGEPAGE);
    return static_cast<uint8_t*>(p);
}

// Random valid blocks: random bytes with sane fp16 scales where a block has them (the data does
// not change the speed of any kernel, only NaNs would).
void fill_weights(uint8_t* w, size_t bytes, Type t, std::mt19937_64& rng) {
    for (size_t i = 0; i < bytes; i += 8) {
        const uint64_t v = rng();
        std::memcpy(w + i, &v, std::min<size_t>(8, bytes - i));
    }
    const size_t bpb = gguf::type_traits(t).bytes_per_block;
    auto set_half = [&](size_t off) {
        const uint16_t h = gguf::f32_to_f16(0.01f);
        std::memcpy(w + off, &h, 2);
    };
    for (size_t b = 0; b + bpb <= bytes; b += bpb) switch (t) {
            case Type::F16: case Type::BF16: {
                const uint16_t h = t == Type::F16 ? gguf::f32_to_f16(0.01f) : gguf::f32_to_bf16(0.01f);
                std::memcpy(w + b, &h, 2);
                break;
            }
            case Type::F32: {
                const float f = 0.01f;
                std::memcpy(w + b, &f, 4);
                break;
            }
            case Type::Q2_K: set_half(b + 80), set_half(b + 82); break;
            case Type::Q3_K: set_half(b + 108); break;
            case Type::Q6_K: set_half(b + 208); break;
            case Type::Q4_1: case Type::Q5_1: case Type::Q4_K: case Type::Q5_K: set_half(b), set_half(b + 2); break;
            default: set_half(b); break;
        }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct Options {
    std::vector<Type> types = {Type::F16, Type::Q8_0, Type::Q4_0, Type::Q4_K, Type::Q6_K};
    std::string model = "1b";
    int64_t rows = 0, cols = 0;  // --shape
    int64_t prefill = 128;
    std::vector<int> threads = {1, 2};
    int reps = 7;
    size_t working_set = size_t(1024) << 20;
    bool thp = false;
    bool attention = false;
    bool packed = false;
};

double thread_cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

struct Timing {
    double wall;  // seconds per call, median over reps
    double cpu;   // CPU seconds per call of the busiest thread inside the kernel, median: the time the
                  // threads actually ran, which on a shared machine says more than the wall clock
};

// Seconds per call of y = W·x for n_tokens tokens, rows split over the team.
Timing time_matmul(Team& team, Type type, const Shape& s, int64_t n_tokens, const Options& opt, std::mt19937_64& rng) {
    const size_t w_bytes = *gguf::row_bytes(type, s.cols) * s.rows;
    // decode streams the weights from memory: cycle through enough copies to defeat the caches
    const int copies = n_tokens == 1 ? static_cast<int>(std::max<size_t>(1, opt.working_set / w_bytes)) : 1;
    const size_t stride = (w_bytes + 4095) / 4096 * 4096;
    uint8_t* w = alloc_weights(stride * copies, opt.thp);
    for (int c = 0; c < copies; c++) fill_weights(w + c * stride, w_bytes, type, rng);
    const bool packed = opt.packed && ck::can_pack(type, s.rows, s.cols);
    if (packed) {
        std::vector<uint8_t> rows(w_bytes);
        for (int c = 0; c < copies; c++) {
            std::memcpy(rows.data(), w + c * stride, w_bytes);
            ck::pack_rows(type, rows.data(), s.rows, s.cols, w + c * stride, 0, s.rows / ck::kPanelRows);
        }
    }

    std::vector<float> xf(n_tokens * s.cols);
    std::normal_distribution<float> normal;
    for (float& v : xf) v = normal(rng);
    std::vector<uint8_t> x(n_tokens * ck::activation_row_bytes(type, s.cols));
    ck::quantize_rows(ck::activation_type(type), xf.data(), s.cols, s.cols, x.data(), 0, n_tokens);
    std::vector<float> y(n_tokens * s.rows);

    int copy = 0;
    std::vector<double> busy(64);
    const std::function<void(int, int)> job = [&](int i, int n) {
        const double c0 = thread_cpu_seconds();
        ck::Matmul m;
        m.type = type, m.w = w + copy * stride, m.n_rows = s.rows, m.n_cols = s.cols;
        m.x = x.data(), m.n_tokens = n_tokens, m.y = y.data(), m.y_stride = s.rows, m.packed = packed;
        const int64_t tiles = (s.rows + ck::kMatmulRowAlign - 1) / ck::kMatmulRowAlign;
        const int64_t r0 = std::min(s.rows, tiles * i / n * ck::kMatmulRowAlign);
        const int64_t r1 = std::min(s.rows, tiles * (i + 1) / n * ck::kMatmulRowAlign);
        ck::matmul(m, r0, r1);
        busy[i] += thread_cpu_seconds() - c0;
    };
    auto run_all = [&] {
        for (copy = 0; copy < copies; copy++) team.run(job);
    };
    run_all();  // warm-up: page faults, scratch buffers
    std::vector<double> wall, cpu;
    for (int r = 0; r < opt.reps; r++) {
        const auto t0 = std::chrono::steady_clock::now();
        std::fill(busy.begin(), busy.end(), 0.0);
        run_all();
        cpu.push_back(*std::max_element(busy.begin(), busy.end()) / copies);
        wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / copies);
    }
    std::free(w);
    return {median(wall), median(cpu)};
}

// Attention of the 1B shape (32 query heads, 8 KV heads, head dim 64) or the 100M one (12 / 4) over F16,
// Q8_0 and Q4_0 caches of the same values: decode of one token over n_kv cached positions (GB/s of K and
// V read) and causal prefill of T tokens from position 0.
void bench_attention(Team& team, int n_threads, const Options& opt, std::mt19937_64& rng) {
    const int64_t n_head = opt.model == "100m" ? 12 : 32, n_head_kv = opt.model == "100m" ? 4 : 8, dim = 64;
    const int64_t max_kv = 4096;
    std::normal_distribution<float> normal;
    std::vector<float> kf(max_kv * n_head_kv * dim), vf(kf.size());
    for (float& x : kf) x = normal(rng);
    for (float& x : vf) x = normal(rng);
    std::vector<float> q(512 * n_head * dim), out(q.size());
    for (float& f : q) f = normal(rng);
    for (Type type : {Type::F16, Type::Q8_0, Type::Q4_0}) {
        const int64_t n_values = static_cast<int64_t>(kf.size());
        std::vector<uint8_t> k(*gguf::row_bytes(type, n_values)), v(k.size());
        gguf::type_traits(type).quantize(kf.data(), k.data(), n_values);
        gguf::type_traits(type).quantize(vf.data(), v.data(), n_values);
        auto run = [&](int64_t n_tokens, int64_t start_pos) {
            ck::Attention a;
            a.q = q.data(), a.q_token_stride = n_head * dim, a.q_head_stride = dim;
            a.kv_type = type, a.k = k.data(), a.v = v.data();
            a.k_pos_stride = a.v_pos_stride = n_head_kv * dim, a.k_head_stride = a.v_head_stride = dim;
            a.out = out.data(), a.out_token_stride = n_head * dim, a.out_head_stride = dim;
            a.n_tokens = n_tokens, a.start_pos = start_pos, a.n_head = n_head, a.n_head_kv = n_head_kv;
            a.head_dim_k = a.head_dim_v = dim, a.scale = 0.125f;
            const std::function<void(int, int)> job = [&](int i, int n) {
                const int64_t pairs = n_tokens * n_head;  // split at whole KV-head groups
                const int64_t groups = pairs / (n_head / n_head_kv), g0 = groups * i / n, g1 = groups * (i + 1) / n;
                ck::attention(a, g0 * (n_head / n_head_kv), g1 * (n_head / n_head_kv));
            };
            team.run(job);
            std::vector<double> wall;
            for (int r = 0; r < opt.reps; r++) {
                const auto t0 = std::chrono::steady_clock::now();
                team.run(job);
                wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            }
            return median(wall);
        };
        const char* name = gguf::type_traits(type).name;
        for (int64_t n_kv : {512, 2048, 4096}) {
            const double t = run(1, n_kv - 1), bytes = 2.0 * static_cast<double>(*gguf::row_bytes(type, n_kv * n_head_kv * dim));
            std::printf("attn  %-4s %dT decode at %5lld cached positions %8.1f us %6.1f GB/s of KV\n", name, n_threads,
                        static_cast<long long>(n_kv), t * 1e6, bytes / t / 1e9);
        }
        for (int64_t n_tokens : {128, 512}) {
            const double t = run(n_tokens, 0), flop = 2.0 * n_head * 2 * dim * n_tokens * (n_tokens + 1) / 2;
            std::printf("attn  %-4s %dT prefill of %3lld tokens            %8.2f ms %6.1f GFLOP/s\n", name, n_threads,
                        static_cast<long long>(n_tokens), t * 1e3, flop / t / 1e9);
        }
    }
    std::printf("\n");
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    Options opt;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "%s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--types") {
            opt.types.clear();
            for (const std::string& t : split(value())) {
                auto type = gguf::type_from_name(t);
                if (!type) {
                    std::fprintf(stderr, "unknown type %s\n", t.c_str());
                    return 2;
                }
                opt.types.push_back(*type);
            }
        } else if (a == "--model") {
            opt.model = value();
        } else if (a == "--shape") {
            const std::string v = value();
            opt.rows = std::stoll(v.substr(0, v.find('x'))), opt.cols = std::stoll(v.substr(v.find('x') + 1));
        } else if (a == "--prefill") {
            opt.prefill = std::stoll(value());
        } else if (a == "--threads") {
            opt.threads.clear();
            for (const std::string& t : split(value())) opt.threads.push_back(std::stoi(t));
        } else if (a == "--reps") {
            opt.reps = std::stoi(value());
        } else if (a == "--working-set-mb") {
            opt.working_set = std::stoull(value()) << 20;
        } else if (a == "--thp") {
            opt.thp = true;
        } else if (a == "--packed") {
            opt.packed = true;
        } else if (a == "--attention") {
            opt.attention = true;
        } else if (a == "--isa") {
            const std::string isa = value();
            bool known = false;
            for (ck::Isa v : {ck::Isa::SCALAR, ck::Isa::AVX2, ck::Isa::AVX512})
                if (isa == ck::isa_name(v)) ck::set_active_isa(v), known = true;
            if (!known) {
                std::fprintf(stderr, "unknown isa %s (scalar, avx2, avx512)\n", isa.c_str());
                return 2;
            }
        } else {
            std::fprintf(a == "--help" || a == "-h" ? stdout : stderr, "usage: bench_cpu_kernels [--types q4_0,q8_0,...] [--model 1b|100m] [--shape ROWSxCOLS]\n"
                                 "         [--prefill 128] [--threads 1,2] [--reps 7] [--isa scalar|avx2|avx512]\n"
                                 "         [--working-set-mb 1024] [--thp] [--attention] [--packed]\n");
            return a == "--help" || a == "-h" ? 0 : 2;
        }
    }
    const Shape custom = {"custom", opt.rows, opt.cols, 1};
    const Shape* shapes = opt.rows > 0 ? &custom : opt.model == "100m" ? k100m : k1b;
    const int n_shapes = opt.rows > 0 ? 1 : 5;
    std::printf("isa %s, model %s shapes, prefill %lld tokens, %d reps (medians), %s pages\n", ck::isa_name(ck::active_isa()),
                opt.model.c_str(), static_cast<long long>(opt.prefill), opt.reps, opt.thp ? "huge" : "4 KiB");
    std::mt19937_64 rng(42);
    for (int n_threads : opt.threads) {
        Team team(n_threads);
        if (opt.attention) {
            bench_attention(team, n_threads, opt, rng);
            continue;
        }
        for (Type type : opt.types) {
            double decode_total = 0, prefill_total = 0, decode_cpu = 0, prefill_cpu = 0;
            for (int i = 0; i < n_shapes; i++) {
                const Shape& s = shapes[i];
                const double bytes = static_cast<double>(*gguf::row_bytes(type, s.cols) * s.rows);
                const Timing dec = time_matmul(team, type, s, 1, opt, rng);
                const Timing pre = time_matmul(team, type, s, opt.prefill, opt, rng);
                decode_total += dec.wall * s.per_token;
                prefill_total += pre.wall * s.per_token;
                decode_cpu += dec.cpu * s.per_token;
                prefill_cpu += pre.cpu * s.per_token;
                const double flop = 2.0 * s.rows * s.cols * opt.prefill;
                std::printf("%-5s %dT %-22s decode %8.1f us %5.1f GB/s (cpu %5.1f) | prefill %7.2f ms %6.1f GFLOP/s (cpu %6.1f)\n",
                            gguf::type_name(type).data(), n_threads, s.name, dec.wall * 1e6, bytes / dec.wall / 1e9,
                            bytes / dec.cpu / 1e9, pre.wall * 1e3, flop / pre.wall / 1e9, flop / pre.cpu / 1e9);
            }
            std::printf("%-5s %dT model matmuls: decode %.1f tok/s (cpu %.1f), prefill %.1f tok/s (cpu %.1f)\n\n",
                        gguf::type_name(type).data(), n_threads, 1.0 / decode_total, 1.0 / decode_cpu,
                        opt.prefill / prefill_total, opt.prefill / prefill_cpu);
            std::fflush(stdout);
        }
    }
    return 0;
}
