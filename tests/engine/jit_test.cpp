// Jit capture/replay: new input buffers are swapped in, each shape class is captured once, Vars are
// read at replay, and intermediates that share memory after planning still give the right results.
#include "engine_test_util.h"

using namespace engine;
using namespace etest;

TEST_CASE("Jit replays with new inputs, Vars and shape classes") {
    Var scale("scale", 0, 100);
    int calls = 0;
    Jit f([&](const std::vector<Tensor>& in) {
        calls++;
        Tensor y = softmax(in[0], -1) * Tensor::from_dim(scale, f32) + in[1].sum(0, true);
        return std::vector<Tensor>{y, y.max(1)};
    });
    auto run = [&](const std::vector<double>& a, const std::vector<double>& b, int64_t rows) {
        return f({tensor(a, {rows, 4}, f32), tensor(b, {3, 4}, f32)});
    };
    auto expect = [&](const std::vector<double>& a, const std::vector<double>& b, int64_t rows, double s) {
        std::vector<double> y;
        for (int64_t r = 0; r < rows; r++) {
            double m = -1e30, z = 0;
            for (int i = 0; i < 4; i++) m = std::max(m, a[r * 4 + i]);
            for (int i = 0; i < 4; i++) z += std::exp(a[r * 4 + i] - m);
            for (int i = 0; i < 4; i++) y.push_back(std::exp(a[r * 4 + i] - m) / z * s + b[i] + b[4 + i] + b[8 + i]);
        }
        return y;
    };
    std::vector<double> a1 = {1, 2, 3, 4, 0, 0, 0, 1}, b1 = {1, 1, 1, 1, 2, 2, 2, 2, 0, 1, 0, 1};
    std::vector<double> a2 = {4, 3, 2, 1, -1, 0, 5, 1}, b2 = {0, 0, 0, 0, 1, 2, 3, 4, 1, 1, 1, 1};
    scale.bind(2);
    require_close(values(run(a1, b1, 2)[0]), expect(a1, b1, 2, 2), 1e-6);
    scale.bind(7);
    auto out = run(a2, b2, 2);  // replay: other buffers, other binding
    require_close(values(out[0]), expect(a2, b2, 2, 7), 1e-6);
    REQUIRE(values(out[1]).size() == 2);
    REQUIRE(calls == 1);
    std::vector<double> a3 = {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3};
    require_close(values(run(a3, b1, 3)[0]), expect(a3, b1, 3, 7), 1e-6);  // a new shape class
    REQUIRE(calls == 2);
    REQUIRE(f.n_captured() == 2);
    REQUIRE_THROWS_WITH(f({Tensor::zeros({2, 4}), Tensor::zeros({3, 4})}), Catch::Contains("[engine] jit: inputs must be realized"));
}

TEST_CASE("captured intermediates share memory and replays stay correct") {
    Jit f([&](const std::vector<Tensor>& in) {
        Tensor x = in[0];
        std::vector<Tensor> keep;
        for (int i = 0; i < 12; i++) {
            x = (x * 0.5 + 1.0).contiguous();   // each step its own kernel and buffer
            if (i % 4 == 0) keep.push_back(x);
        }
        return std::vector<Tensor>{x + keep[0] + keep[1] + keep[2]};
    });
    auto ref = [](double v) {
        double x = v, k = 0;
        for (int i = 0; i < 12; i++) {
            x = x * 0.5 + 1.0;
            if (i % 4 == 0) k += x;
        }
        return x + k;
    };
    for (double v : {3.0, -8.0, 100.0}) {
        std::vector<double> in(1000, v);
        std::vector<double> want(1000, ref(v));
        require_close(values(f({tensor(in, {1000}, f32)})[0]), want, 1e-6);
    }
}

TEST_CASE("a capture's first run holds only its working set of intermediates, not all of them") {
    constexpr int64_t N = 1 << 18;  // 1 MiB of f32 per intermediate
    constexpr int STEPS = 16;
    Jit f([&](const std::vector<Tensor>& in) {
        Tensor x = in[0];
        for (int i = 0; i < STEPS; i++) x = (x * 0.5 + 1.0).contiguous();  // each step its own kernel and buffer
        return std::vector<Tensor>{x};
    });
    Tensor input = tensor(std::vector<double>(N, 2.0), {N}, f32);
    auto peak_of_call = [&] {
        reset_peak_bytes();
        uint64_t before = stats().bytes_in_use;
        Tensor out = f({input})[0];
        std::vector<double> v = values(out);
        double want = 2.0;
        for (int i = 0; i < STEPS; i++) want = want * 0.5 + 1.0;
        CHECK(v.front() == Approx(want));
        CHECK(v.back() == Approx(want));
        return stats().peak_bytes_in_use - before;
    };
    const uint64_t one = N * sizeof(float);
    uint64_t capture_peak = peak_of_call(), replay_peak = peak_of_call();
    INFO("capture peak " << capture_peak << " B, replay peak " << replay_peak << " B, one intermediate " << one << " B");
    // A chain needs two live buffers at a time (its input and output) and the result; holding every
    // intermediate until the capture ends would be STEPS of them.
    CHECK(capture_peak <= 4 * one);
    CHECK(replay_peak <= 4 * one);
}
