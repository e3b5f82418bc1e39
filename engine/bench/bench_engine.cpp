// bench_engine: per-kernel dispatch overhead (Jit replay of many tiny kernels, the thread pool's
// round trip) and the decode step of one llama block, as medians of repeated runs.
//   usage: bench_engine [--repeats N]
#include "engine/tensor.h"

#include "devices/device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace engine;

namespace {

double median_us(int repeats, const std::function<void()>& fn) {
    std::vector<double> t;
    for (int r = 0; r < repeats; r++) {
        auto t0 = std::chrono::steady_clock::now();
        fn();
        t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

Tensor random(const Shape& s, uint32_t seed, float scale) {
    std::vector<float> v(size_t(numel(s).value()));
    uint32_t x = seed * 2654435761u + 1;
    for (auto& f : v) {
        x = x * 1664525u + 1013904223u;
        f = scale * (float(x >> 8) / float(1 << 24) * 2.0f - 1.0f);
    }
    return Tensor::from_vector(v, s);
}

struct Config {
    const char* name;
    int64_t d, h, hkv, dh, f, ctx;
    DType wtype;
};

struct Block {
    Config c;
    Tensor attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down, cache_k, cache_v;

    explicit Block(const Config& cfg) : c(cfg) {
        float s = 1.0f / std::sqrt(float(c.d));
        attn_norm = random({c.d}, 1, 1), ffn_norm = random({c.d}, 2, 1);
        attn_q = random({c.h * c.dh, c.d}, 3, s).cast(c.wtype).realize();
        attn_k = random({c.hkv * c.dh, c.d}, 4, s).cast(c.wtype).realize();
        attn_v = random({c.hkv * c.dh, c.d}, 5, s).cast(c.wtype).realize();
        attn_output = random({c.d, c.h * c.dh}, 6, s).cast(c.wtype).realize();
        ffn_gate = random({c.f, c.d}, 7, s).cast(c.wtype).realize();
        ffn_up = random({c.f, c.d}, 8, s).cast(c.wtype).realize();
        ffn_down = random({c.d, c.f}, 9, 1.0f / std::sqrt(float(c.f))).cast(c.wtype).realize();
        cache_k = Tensor::zeros({c.ctx, c.hkv, c.dh}).contiguous().realize();
        cache_v = Tensor::zeros({c.ctx, c.hkv, c.dh}).contiguous().realize();
    }
    Tensor forward(const Tensor& x, const Var& start_pos) {
        Dim T = x.dim(0);
        Tensor h = rms_norm(x, attn_norm, 1e-5);
        Tensor q = rope(linear(h, attn_q).reshape({T, c.h, c.dh}), start_pos, int(c.dh), 10000.0, RopeLayout::NEOX);
        Tensor k = rope(linear(h, attn_k).reshape({T, c.hkv, c.dh}), start_pos, int(c.dh), 10000.0, RopeLayout::NEOX);
        cache_k.slice(0, start_pos, T).assign(k);
        cache_v.slice(0, start_pos, T).assign(linear(h, attn_v).reshape({T, c.hkv, c.dh}));
        Tensor a = attention(q, cache_k, cache_v, start_pos, 1.0 / std::sqrt(double(c.dh)));
        Tensor x1 = x + linear(a.reshape({T, c.h * c.dh}), attn_output);
        Tensor n = rms_norm(x1, ffn_norm, 1e-5);
        return x1 + linear(silu(linear(n, ffn_gate)) * linear(n, ffn_up), ffn_down);
    }
};

}  // namespace

int main(int argc, char** argv) {
    int repeats = 50;
    for (int i = 1; i < argc; i++)
        if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    devices::Device& cpu = devices::get("CPU");
    std::printf("bench_engine: %d threads, median of %d repeats\n", cpu.n_threads(), repeats);

    // 1. Dispatch: a Jit replay of 200 tiny dependent kernels, per kernel.
    const int chain = 200;
    Jit tiny([&](const std::vector<Tensor>& in) {
        Tensor x = in[0];
        for (int i = 0; i < chain; i++) x = (x * 1.0001 + 1.0).contiguous();
        return std::vector<Tensor>{x};
    });
    Tensor x16 = random({16}, 1, 1);
    tiny({x16});
    double us = median_us(repeats, [&] { tiny({x16}); });
    std::printf("dispatch, generated kernel (Jit replay, inline)  %8.3f us/kernel\n", us / chain);

    // 2. The thread pool's round trip: an empty host function split across all threads.
    auto nothing = [](const void*, int64_t, int64_t) {};
    double pool = median_us(repeats, [&] {
        for (int i = 0; i < chain; i++) cpu.run_host(nothing, nullptr, 1024, 1);
    });
    std::printf("dispatch, thread-pool round trip (empty work)    %8.3f us/launch\n", pool / chain);

    // 3. A kernel big enough to use the pool: 64K-element elementwise chain, per kernel.
    Jit wide([&](const std::vector<Tensor>& in) {
        Tensor x = in[0];
        for (int i = 0; i < 50; i++) x = (x * 1.0001 + 1.0).contiguous();
        return std::vector<Tensor>{x};
    });
    Tensor x64k = random({65536}, 2, 1);
    wide({x64k});
    double w = median_us(repeats, [&] { wide({x64k}); });
    std::printf("parallel kernel, 64K f32 elementwise              %8.3f us/kernel\n", w / 50);

    // 4. One llama block's decode step (T = 1 at position 64), Jit replay.
    for (Config cfg : {Config{"tiny (test block shape)", 64, 4, 2, 16, 96, 256, f32},
                       Config{"1B layer shape, f32 weights", 2048, 32, 8, 64, 8192, 256, f32},
                       Config{"1B layer shape, f16 weights", 2048, 32, 8, 64, 8192, 256, f16}}) {
        Block blk(cfg);
        Var start_pos("start_pos", 0, cfg.ctx - 1);
        Jit step([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{blk.forward(in[0], start_pos)}; });
        Tensor x = random({1, cfg.d}, 3, 1);
        start_pos.bind(64);
        step({x});
        Stats s0 = stats();
        double t = median_us(std::max(5, repeats / 5), [&] { step({x}); });
        Stats s1 = stats();
        uint64_t launches = (s1.kernels_run - s0.kernels_run) + (s1.custom_run - s0.custom_run);
        std::printf("block decode step, %-28s %10.1f us  (%llu launches/step)\n", cfg.name, t,
                    (unsigned long long)(launches / uint64_t(std::max(5, repeats / 5))));
        if (cfg.d == 64) {  // the same step built, scheduled and lowered every time: what the Jit saves
            double eager = median_us(std::max(5, repeats / 5), [&] { blk.forward(x, start_pos).realize(); });
            std::printf("block decode step, %-28s %10.1f us  (without the Jit)\n", cfg.name, eager);
        }
    }
    return 0;
}
