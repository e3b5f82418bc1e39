// Vars and the symbolic rules: index math folds back to plain strides, symbolic shapes and offsets run
// under new bindings without recompiling, and assign writes through views at symbolic offsets.
#include "engine_test_util.h"

#include "engine/rewrite.h"

using namespace engine;
using namespace etest;

namespace {
NodeRef range(int id, int64_t n) {
    Arg a;
    a.i = id;
    return make(Op::RANGE, i64, {cidx(n)}, std::move(a));
}
}  // namespace

TEST_CASE("symbolic rules fold reshape index math back to strides") {
    NodeRef r0 = range(0, 7), r1 = range(1, 64);
    NodeRef flat = iadd(imul(r0, cidx(64)), r1);                       // r0*64 + r1
    REQUIRE(simplify(idiv(flat, cidx(64))) == r0);                     // (r0*64 + r1) / 64 -> r0
    REQUIRE(simplify(imod(flat, cidx(64))) == r1);                     // (r0*64 + r1) % 64 -> r1
    REQUIRE(simplify(iadd(imul(idiv(flat, cidx(64)), cidx(64)), imod(flat, cidx(64)))) == simplify(flat));
    NodeRef two = iadd(imul(r0, cidx(4)), cidx(2));                    // (r0*4 + 2) / 2 -> r0*2 + 1
    REQUIRE(simplify(idiv(two, cidx(2))) == simplify(iadd(imul(r0, cidx(2)), cidx(1))));
    REQUIRE(simplify(idiv(idiv(flat, cidx(8)), cidx(8))) == r0);       // (x / 8) / 8 -> x / 64
    REQUIRE(simplify(alu(Op::CMPLT, r1, cidx(64)))->const_value() == 1);  // decided by bounds
    REQUIRE(simplify(iadd(iadd(r0, cidx(3)), imul(r0, cidx(-1))))->const_value() == 3);  // r0 + 3 - r0 -> 3
    Var v("v", 0, 100);
    Dim d = Dim(v) + 1 - 1;
    REQUIRE(d.str() == "v");
    REQUIRE((Dim(v) * 2 + 4).max() == 204);
    REQUIRE(((Dim(v) + 8) % 4).max() == 3);
}

TEST_CASE("symbolic shapes run under new bindings without recompiling") {
    Var n("n", 1, 32);
    auto build = [&] { return (Tensor::arange(n).cast(f32) * 2.0 + Tensor::from_dim(Dim(n) * 10).cast(f32)).sum(0); };
    n.bind(5);
    REQUIRE(build().item<float>() == 2 * 10 + 5 * 50);
    uint64_t compiles = stats().compiles;
    n.bind(9);
    REQUIRE(build().item<float>() == 2 * 36 + 9 * 90);
    REQUIRE(stats().compiles == compiles);
    REQUIRE_THROWS_WITH(n.bind(33), Catch::Contains("[engine] Var n: value 33 outside [1, 32]"));
}

TEST_CASE("slices at a symbolic offset read the bound position") {
    std::vector<double> v;
    for (int i = 0; i < 40; i++) v.push_back(i);
    Tensor t = tensor(v, {10, 4}, f32);
    Var pos("pos", 0, 8);
    Tensor window = t.slice(0, pos, 2).sum(1);
    for (int p : {0, 3, 8}) {
        pos.bind(p);
        Tensor w = t.slice(0, pos, 2).sum(1);
        require_close(values(w), {double(16 * p + 6), double(16 * p + 22)}, 0);
    }
    // A window that may fit is accepted when built and refused at launch when the binding overflows it.
    Tensor wide = t.slice(0, pos, 4).sum(1);
    pos.bind(6);
    REQUIRE(values(wide).size() == 4);
    Tensor wide2 = t.slice(0, pos, 4).sum(1);
    pos.bind(7);
    REQUIRE_THROWS_WITH(wide2.realize(), Catch::Contains("window end (pos+4) = 11 exceeds the dimension 10"));
}

TEST_CASE("assign writes a KV-cache slice at a symbolic position") {
    Tensor cache = Tensor::zeros({6, 2, 3}).contiguous().realize();
    Var sp("start_pos", 0, 5);
    uint64_t compiles = 0;
    for (int p = 0; p < 4; p++) {
        sp.bind(p);
        std::vector<double> kv;
        for (int i = 0; i < 6; i++) kv.push_back(100 * p + i);
        Tensor k = tensor(kv, {1, 2, 3}, f32);
        cache.slice(0, sp, 1).assign(k * 1.0);
        Tensor keys = cache.slice(0, 0, Dim(sp) + 1).sum({1, 2});
        std::vector<double> want;
        for (int q = 0; q <= p; q++) want.push_back(600.0 * q + 15);
        require_close(values(keys), want, 0);
        if (p == 1) compiles = stats().compiles;
        if (p > 1) REQUIRE(stats().compiles == compiles);  // same kernels at every position
    }
    REQUIRE(cache.is_realized());
    std::vector<double> all = values(cache);
    REQUIRE(all[3 * 6 + 5] == 305);
    REQUIRE(all[4 * 6] == 0);
}

TEST_CASE("assign through a transposed view and pending writes at the next realize") {
    Tensor buf = Tensor::zeros({3, 4}).contiguous().realize();
    buf.transpose().slice(0, 1, 2).assign(tensor({1, 2, 3, 4, 5, 6}, {2, 3}, f32));
    Tensor other = Tensor::ones({2}) * 3.0;
    other.realize();  // realizing anything runs the pending write
    require_close(values(buf), {0, 1, 4, 0, 0, 2, 5, 0, 0, 3, 6, 0}, 0);
    buf.assign(buf + 1.0);  // read and write the same buffer
    require_close(values(buf), {1, 2, 5, 1, 1, 3, 6, 1, 1, 4, 7, 1}, 0);
    REQUIRE_THROWS_WITH((buf + 1.0).assign(buf), Catch::Contains("[engine] assign: the target must be a realized buffer"));
    REQUIRE_THROWS_WITH(buf.reshape({3, 1, 4}).expand({3, 2, 4}).assign(Tensor::zeros({3, 2, 4})),
                        Catch::Contains("cannot write through EXPAND"));
    static const float ro[4] = {1, 2, 3, 4};
    Tensor ext = Tensor::external(ro, {4}, f32, nullptr);
    REQUIRE_THROWS_WITH(ext.assign(Tensor::zeros({4})), Catch::Contains("external (mapped) buffers are read-only"));
    require_close(values(ext * 2.0), {2, 4, 6, 8}, 0);
}
