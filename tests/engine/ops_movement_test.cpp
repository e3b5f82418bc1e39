// Reductions and movement ops against a host reference: chains of views (reshape, permute, expand,
// shrink, pad) over odd sizes, reductions over any axes of non-contiguous views, concat, gather.
#include "engine_test_util.h"

using namespace engine;
using namespace etest;

namespace {

// A host tensor and the reference versions of the ops.
struct Host {
    std::vector<double> v;
    std::vector<int64_t> s;

    double at(const std::vector<int64_t>& c) const {
        int64_t i = 0;
        for (size_t k = 0; k < s.size(); k++) i = i * s[k] + c[k];
        return v[i];
    }
    template <class F> static Host make(std::vector<int64_t> shape, F f) {
        Host h{{}, shape};
        for (int64_t i = 0; i < count(shape); i++) h.v.push_back(f(unravel(i, shape)));
        return h;
    }
    Host reshape(std::vector<int64_t> ns) const { return {v, ns}; }
    Host permute(std::vector<int> o) const {
        std::vector<int64_t> ns;
        for (int a : o) ns.push_back(s[a]);
        return make(ns, [&](const std::vector<int64_t>& c) {
            std::vector<int64_t> sc(s.size());
            for (size_t k = 0; k < o.size(); k++) sc[o[k]] = c[k];
            return at(sc);
        });
    }
    Host expand(std::vector<int64_t> ns) const {
        return make(ns, [&](const std::vector<int64_t>& c) {
            std::vector<int64_t> sc(c);
            for (size_t k = 0; k < c.size(); k++) if (s[k] == 1) sc[k] = 0;
            return at(sc);
        });
    }
    Host shrink(std::vector<std::pair<int64_t, int64_t>> r) const {
        std::vector<int64_t> ns;
        for (auto& [b, e] : r) ns.push_back(e - b);
        return make(ns, [&](const std::vector<int64_t>& c) {
            std::vector<int64_t> sc(c);
            for (size_t k = 0; k < c.size(); k++) sc[k] += r[k].first;
            return at(sc);
        });
    }
    Host pad(std::vector<std::pair<int64_t, int64_t>> w, double fill) const {
        std::vector<int64_t> ns;
        for (size_t k = 0; k < s.size(); k++) ns.push_back(s[k] + w[k].first + w[k].second);
        return make(ns, [&](const std::vector<int64_t>& c) {
            std::vector<int64_t> sc(c);
            for (size_t k = 0; k < c.size(); k++) {
                sc[k] -= w[k].first;
                if (sc[k] < 0 || sc[k] >= s[k]) return fill;
            }
            return at(sc);
        });
    }
    Host reduce(std::vector<int> axes, bool is_max) const {
        std::vector<int64_t> ns = s;
        for (int a : axes) ns[a] = 1;
        Host out = make(ns, [&](const std::vector<int64_t>&) { return is_max ? -INFINITY : 0.0; });
        for (int64_t i = 0; i < count(s); i++) {
            auto c = unravel(i, s);
            for (int a : axes) c[a] = 0;
            int64_t o = 0;
            for (size_t k = 0; k < ns.size(); k++) o = o * ns[k] + c[k];
            out.v[o] = is_max ? std::max(out.v[o], v[i]) : out.v[o] + v[i];
        }
        return out;
    }
};

Host host(const std::vector<int64_t>& shape, uint32_t seed) {
    Host h{uniform(size_t(count(shape)), seed, -3, 3), shape};
    for (auto& x : h.v) x = to_dtype(x, f32);  // what the f32 tensor holds
    return h;
}

// Sums of a few hundred f32 values in [-3, 3) carry ~1e-5 absolute rounding: `rtol` also sets that floor.
void check(const Tensor& t, const Host& h, double rtol = 0) {
    REQUIRE(shape_str(t.shape()) == shape_str(dims(h.s)));
    require_close(values(t), h.v, rtol, rtol * 10);
}

}  // namespace

TEST_CASE("chains of views read the right elements without copies") {
    Host h = host({4, 6, 5}, 1);
    Tensor t = tensor(h.v, dims(h.s), f32);
    check(t.reshape({6, 20}).permute({1, 0}), h.reshape({6, 20}).permute({1, 0}));
    check(t.permute({2, 0, 1}).reshape({5, 24}).shrink({{1, 4}, {3, 22}}),
          h.permute({2, 0, 1}).reshape({5, 24}).shrink({{1, 4}, {3, 22}}));
    check(t.shrink({{1, 3}, {0, 6}, {2, 5}}).pad({{1, 2}, {0, 1}, {3, 0}}, -7.5),
          h.shrink({{1, 3}, {0, 6}, {2, 5}}).pad({{1, 2}, {0, 1}, {3, 0}}, -7.5));
    check(t.slice(1, 2, 3).reshape({4, 1, 15}).expand({4, 3, 15}),
          h.shrink({{0, 4}, {2, 5}, {0, 5}}).reshape({4, 1, 15}).expand({4, 3, 15}));
    check(t.transpose(0, 2).flatten(1).unsqueeze(0).squeeze(0), h.permute({2, 1, 0}).reshape({5, 24}));
    // pad, then view the padding through a reshape and a permute
    check(t.pad({{0, 1}, {2, 0}, {0, 0}}).reshape({5, 40}).permute({1, 0}).shrink({{3, 37}, {1, 5}}),
          h.pad({{0, 1}, {2, 0}, {0, 0}}, 0).reshape({5, 40}).permute({1, 0}).shrink({{3, 37}, {1, 5}}));
    // odd sizes, 1-element dims, expand of a scalar
    Host o = host({1, 13, 1}, 2);
    Tensor ot = tensor(o.v, {1, 13, 1}, f32);
    check(ot.expand({3, 13, 7}).permute({1, 2, 0}), o.expand({3, 13, 7}).permute({1, 2, 0}));
    check(Tensor::full({2, 3}, 4.25), Host::make({2, 3}, [](const auto&) { return 4.25; }));
    check(Tensor::arange(7).cast(f32).reshape({7, 1}).expand({7, 2}), Host::make({7, 2}, [](const auto& c) { return double(c[0]); }));
}

TEST_CASE("views of other dtypes keep their values") {
    for (DType d : {f16, bf16, i8, u16, i64, bool_}) {
        std::vector<double> v;
        for (int i = 0; i < 30; i++) v.push_back(d.code == DType::BOOL ? i % 3 == 0 : (i * 7) % 23 - (d.is_signed() || d.is_float() ? 11 : 0));
        Tensor t = tensor(v, {5, 6}, d);
        Host h{{}, {5, 6}};
        for (double x : v) h.v.push_back(to_dtype(x, d));
        Tensor r = t.permute({1, 0}).shrink({{1, 5}, {0, 5}}).pad({{1, 0}, {0, 2}});
        REQUIRE(r.dtype() == d);
        check(r, h.permute({1, 0}).shrink({{1, 5}, {0, 5}}).pad({{1, 0}, {0, 2}}, 0));
    }
}

TEST_CASE("sum and max over any axes, with keepdim and on transposed views") {
    Host h = host({5, 7, 9}, 3);
    Tensor t = tensor(h.v, {5, 7, 9}, f32);
    for (std::vector<int> axes : std::vector<std::vector<int>>{{0}, {1}, {2}, {0, 2}, {0, 1, 2}, {1, 2}}) {
        check(t.sum(axes, true), h.reduce(axes, false), 1e-6);
        check(t.max(axes, true), h.reduce(axes, true));
    }
    check(t.sum(1), h.reduce({1}, false).reshape({5, 9}), 1e-6);
    check(t.max(-1), h.reduce({2}, true).reshape({5, 7}));
    Host p = h.permute({2, 0, 1});
    check(t.permute({2, 0, 1}).sum({0, 2}, true), p.reduce({0, 2}, false), 1e-6);
    check(t.permute({2, 0, 1}).shrink({{2, 7}, {0, 5}, {1, 6}}).max(1, true), p.shrink({{2, 7}, {0, 5}, {1, 6}}).reduce({1}, true));
    check(t.mean(2, true), [&] {
        Host m = h.reduce({2}, false);
        for (auto& x : m.v) x /= 9;
        return m;
    }(), 1e-6);
    // a reduction of a reduction, and an elementwise op between two reductions
    check(t.sum(2, true).max(0, true), h.reduce({2}, false).reduce({0}, true), 1e-6);
    Host s1 = h.reduce({2}, false), m1 = h.reduce({2}, true);
    for (size_t i = 0; i < s1.v.size(); i++) s1.v[i] -= m1.v[i];
    check(t.sum(2, true) - t.max(2, true), s1, 1e-6);
}

TEST_CASE("a last axis of 1 to 5 elements (written out in the loop before it) under views and reductions") {
    for (int64_t k = 1; k <= 5; k++) {
        CAPTURE(k);
        Host h = host({3, 5, 4, k}, 7);
        Tensor t = tensor(h.v, {3, 5, 4, k}, f32);
        check(t.permute({1, 0, 2, 3}) * 2.0, [&] {
            Host p = h.permute({1, 0, 2, 3});
            for (auto& x : p.v) x *= 2;
            return p;
        }(), 1e-6);
        check(t.sum(2, true), h.reduce({2}, false), 1e-6);
        check(t.permute({0, 3, 1, 2}).max(3, true).permute({0, 2, 3, 1}), h.reduce({2}, true));
        check(t.shrink({{1, 3}, {0, 5}, {1, 4}, {0, k}}).sum({0, 1}, true), h.shrink({{1, 3}, {0, 5}, {1, 4}, {0, k}}).reduce({0, 1}, false), 1e-6);
    }
}

TEST_CASE("reductions of integer, half and bool tensors") {
    std::vector<double> v;
    for (int i = 0; i < 24; i++) v.push_back((i * 5) % 11 - 4);
    require_close(values(tensor(v, {4, 6}, i32).sum(1)), [&] {
        std::vector<double> w(4, 0.0);
        for (int i = 0; i < 24; i++) w[i / 6] += v[i];
        return w;
    }(), 0);
    require_close(values(tensor(v, {4, 6}, i8).max(0)), [&] {
        std::vector<double> w(6, -1e9);
        for (int i = 0; i < 24; i++) w[i % 6] = std::max(w[i % 6], v[i]);
        return w;
    }(), 0);
    Tensor h = tensor(uniform(4096, 4, 0, 1), {4096}, f16);  // f16 input accumulates in f32
    double want = 0;
    for (double x : values(h)) want += x;
    REQUIRE(h.sum(0).dtype() == f16);
    require_close(values(h.sum(0)), {to_dtype(want, f16)}, 1e-3);
    Tensor b = Tensor::from_vector<bool>({true, false, true, true, false, true}, {2, 3});
    REQUIRE(b.sum(1).dtype() == i32);
    require_close(values(b.sum(1)), {2, 2}, 0);
    require_close(values(b.max(1)), {1, 1}, 0);
}

TEST_CASE("concat, stack and gather") {
    Host a = host({3, 2, 4}, 5), b = host({3, 5, 4}, 6), c = host({3, 1, 4}, 7);
    Tensor ta = tensor(a.v, {3, 2, 4}, f32), tb = tensor(b.v, {3, 5, 4}, f32), tc = tensor(c.v, {3, 1, 4}, f32);
    Host cat = Host::make({3, 8, 4}, [&](const std::vector<int64_t>& x) {
        if (x[1] < 2) return a.at(x);
        if (x[1] < 7) return b.at({x[0], x[1] - 2, x[2]});
        return c.at({x[0], 0, x[2]});
    });
    check(concat({ta, tb, tc}, 1), cat);
    Tensor st = stack({ta, ta * 2.0}, 0);
    REQUIRE(shape_str(st.shape()) == "(2,3,2,4)");
    require_close(values(st.shrink({{1, 2}, {0, 3}, {0, 2}, {0, 4}})), [&] {
        std::vector<double> w;
        for (double x : a.v) w.push_back(2 * double(float(x)));
        return w;
    }(), 1e-7);
    // gather along each axis; indices out of range are clamped
    Host x = host({4, 5}, 8);
    Tensor tx = tensor(x.v, {4, 5}, f32);
    Tensor rows = tensor({3, 0, 0, 2, 1, 9, -4, 3, 1, 1}, {2, 5}, i32);
    check(gather(tx, 0, rows), Host::make({2, 5}, [&](const std::vector<int64_t>& c) {
        int64_t r = std::clamp<int64_t>(int64_t(std::vector<double>{3, 0, 0, 2, 1, 9, -4, 3, 1, 1}[c[0] * 5 + c[1]]), 0, 3);
        return x.at({r, c[1]});
    }));
    Tensor cols = tensor({4, 0, 2, 2, 1, 1, 0, 3}, {4, 2}, i64);
    check(gather(tx, 1, cols), Host::make({4, 2}, [&](const std::vector<int64_t>& c) {
        return x.at({c[0], int64_t(std::vector<double>{4, 0, 2, 2, 1, 1, 0, 3}[c[0] * 2 + c[1]])});
    }));
}

TEST_CASE("bad shapes and axes are clear errors") {
    Tensor t = Tensor::zeros({2, 3});
    REQUIRE_THROWS_WITH(t.reshape({4, 2}), Catch::Contains("[engine] reshape: cannot reshape (2,3) to (4,2)"));
    REQUIRE_THROWS_WITH(t.expand({2, 4}), Catch::Contains("[engine] expand: cannot expand (2,3) to (2,4)"));
    REQUIRE_THROWS_WITH(t.permute({0, 0}), Catch::Contains("[engine] permute: axis 0 repeated"));
    REQUIRE_THROWS_WITH(t.sum(2), Catch::Contains("[engine] sum: axis 2 out of range"));
    REQUIRE_THROWS_WITH(t.shrink({{0, 3}, {0, 3}}), Catch::Contains("[engine] shrink: range [0, 3) outside dimension 0"));
    REQUIRE_THROWS_WITH(t + Tensor::zeros({4}), Catch::Contains("[engine] add: cannot broadcast (2,3) with (4,)"));
    REQUIRE_THROWS_WITH(concat({t, Tensor::zeros({3, 3})}, 1), Catch::Contains("[engine] concat: shapes (2,3) and (3,3) differ"));
    REQUIRE(shape_str(t.reshape({-1}).shape()) == "(6,)");
}
