// Fusion: how many kernels the scheduler makes for the patterns models use, and that intermediates
// the design says stay in registers are never materialized.
#include "engine_test_util.h"

using namespace engine;
using namespace etest;

namespace {

size_t n_kernels() { return last_schedule().size(); }

std::vector<double> rms_ref(const std::vector<double>& x, const std::vector<double>& w, int rows, int d, double eps) {
    std::vector<double> out;
    for (int r = 0; r < rows; r++) {
        double ss = 0;
        for (int i = 0; i < d; i++) ss += x[r * d + i] * x[r * d + i];
        double s = 1.0 / std::sqrt(ss / d + eps);
        for (int i = 0; i < d; i++) out.push_back(x[r * d + i] * s * w[i]);
    }
    return out;
}

std::vector<double> as_f32(std::vector<double> v) {
    for (auto& x : v) x = to_dtype(x, f32);
    return v;
}

}  // namespace

TEST_CASE("RMSNorm of a matrix is two kernels") {
    auto xv = as_f32(uniform(37 * 96, 1)), wv = as_f32(uniform(96, 2));
    Tensor x = tensor(xv, {37, 96}, f32), w = tensor(wv, {96}, f32);
    Tensor y = rms_norm(x, w, 1e-5);
    y.realize();
    REQUIRE(n_kernels() == 2);
    require_close(values(y), rms_ref(xv, wv, 37, 96, 1e-5), 2e-6);
}

TEST_CASE("a residual add feeding RMSNorm is not materialized") {
    auto xv = as_f32(uniform(16 * 64, 3)), av = as_f32(uniform(16 * 64, 4)), wv = as_f32(uniform(64, 5));
    Tensor x = tensor(xv, {16, 64}, f32), a = tensor(av, {16, 64}, f32), w = tensor(wv, {64}, f32);
    Tensor y = rms_norm(x + a, w, 1e-6);
    y.realize();
    auto ks = last_schedule();
    REQUIRE(ks.size() == 2);
    REQUIRE(ks[0].has_reduce);                                  // sum of squares of (x + a), per row
    REQUIRE(shape_str(ks[0].out_shape) == "(16,1)");
    REQUIRE(shape_str(ks[1].out_shape) == "(16,64)");           // the only full-size buffer is the result
    std::vector<double> h;
    for (size_t i = 0; i < xv.size(); i++) h.push_back(to_dtype(xv[i] + av[i], f32));
    require_close(values(y), rms_ref(h, wv, 16, 64, 1e-6), 2e-6);
}

TEST_CASE("elementwise chains and views fuse into one kernel") {
    Tensor g = tensor(uniform(8 * 30, 6), {8, 30}, f32), u = tensor(uniform(30 * 8, 7), {30, 8}, f32);
    Tensor r = tensor(uniform(8 * 30, 8), {8, 30}, f32);
    Tensor y = silu(g) * u.transpose() + r.reshape({8, 3, 10}).permute({0, 2, 1}).reshape({8, 30}) * 0.5;
    y.realize();
    REQUIRE(n_kernels() == 1);
    REQUIRE_FALSE(last_schedule()[0].has_reduce);
}

TEST_CASE("softmax is three kernels and a shared reduce is computed once") {
    Tensor x = tensor(uniform(12 * 50, 9, -5, 5), {12, 50}, f32);
    Tensor p = softmax(x, -1);
    p.realize();
    REQUIRE(n_kernels() == 3);
    std::vector<double> xs = values(x), ps = values(p);
    for (int r = 0; r < 12; r++) {
        double m = -1e30, s = 0;
        for (int i = 0; i < 50; i++) m = std::max(m, xs[r * 50 + i]);
        for (int i = 0; i < 50; i++) s += std::exp(xs[r * 50 + i] - m);
        for (int i = 0; i < 50; i++) REQUIRE(ps[r * 50 + i] == Approx(std::exp(xs[r * 50 + i] - m) / s).epsilon(2e-6));
    }
    Tensor s = x.sum(1, true);
    Tensor a = x * s, b = x + s;
    realize({a, b});
    REQUIRE(n_kernels() == 3);  // the sum, then each output reads it
}

TEST_CASE("a generated matmul is one reduce kernel") {
    auto av = as_f32(uniform(2 * 5 * 7, 10)), bv = as_f32(uniform(2 * 7 * 3, 11));
    Tensor a = tensor(av, {2, 5, 7}, f32), b = tensor(bv, {2, 7, 3}, f32);
    Tensor c = matmul(a, b);
    c.realize();
    REQUIRE(n_kernels() == 1);
    REQUIRE(last_schedule()[0].has_reduce);
    std::vector<double> want;
    for (int z = 0; z < 2; z++)
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 3; j++) {
                double s = 0;
                for (int k = 0; k < 7; k++) s += av[(z * 5 + i) * 7 + k] * bv[(z * 7 + k) * 3 + j];
                want.push_back(s);
            }
    require_close(values(c), want, 1e-6, 1e-6);
}

TEST_CASE("RoPE tables are computed once and shared by q and k") {
    Tensor q = tensor(uniform(3 * 4 * 8, 12), {3, 4, 8}, f32), k = tensor(uniform(3 * 2 * 8, 13), {3, 2, 8}, f32);
    Tensor rq = rope(q, 5, 8, 10000.0, RopeLayout::NEOX), rk = rope(k, 5, 8, 10000.0, RopeLayout::NEOX);
    realize({rq, rk});
    size_t tables = 0;
    for (auto& ks : last_schedule()) tables += shape_str(ks.out_shape) == "(3,4)";
    REQUIRE(tables == 2);  // cos and sin of (T, rope_dim / 2)
    REQUIRE(n_kernels() == 4);
}

TEST_CASE("the NULL device compiles amdgcn kernels without running them") {
    std::vector<float> v(12, 1.0f);
    Tensor x = Tensor::from_data(v.data(), v.size() * 4, {3, 4}, f32, "NULL");
    uint64_t compiles = stats().compiles, runs = stats().kernels_run;
    Tensor y = softmax(x * 3.0 + 1.0, -1).sum(0);
    std::vector<double> out = values(y);
    REQUIRE(out == std::vector<double>(4, 0.0));  // never computed
    REQUIRE(last_schedule().size() == 3);
    REQUIRE(stats().compiles > compiles);          // LLVM compiled each new kernel for the NULL target
    REQUIRE(stats().kernels_run == runs + 3);      // launched (as no-ops)
    // every kind of generated code: half types, transcendentals, integer math, gathers, reductions
    std::vector<uint16_t> h(2 * 3 * 8, 0x3c00);
    Tensor q = Tensor::from_data(h.data(), h.size() * 2, {2, 3, 8}, f16, "NULL");
    Tensor r = rope(q, 3, 8, 10000.0, RopeLayout::NORM);
    Tensor y2 = silu(rms_norm(r.reshape({2, 24}), 1e-5)).cast(bf16) + exp(q.reshape({2, 24})).cast(bf16);
    Tensor idx = (Tensor::arange(24).cast(i32) * 7 % 24).reshape({1, 24}).expand({2, 24});
    Tensor z = gather(y2.cast(f32), 1, idx).max(1) + log(q.cast(f32).sum({1, 2}));
    z.realize();
    REQUIRE(last_schedule().size() >= 4);
}
