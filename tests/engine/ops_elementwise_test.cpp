// Elementwise ops against scalar references: unary math, binary arithmetic for every dtype with
// broadcasting and odd sizes, comparisons and logic, casts and bitcasts across all dtypes.
#include "engine_test_util.h"

#include <functional>
#include <limits>

using namespace engine;
using namespace etest;

namespace {

const std::vector<DType> ALL = {f32, f16, bf16, i8, u8, i16, u16, i32, u32, i64};

double ulp_tol(DType d) { return d.code == DType::F16 ? 1e-3 : d.code == DType::BF16 ? 8e-3 : 2.4e-7; }

void check_unary(const char* name, std::function<Tensor(const Tensor&)> op, std::function<double(double)> ref,
                 const std::vector<double>& in, double rtol, double atol) {
    for (DType d : {f32, f16, bf16}) {
        std::vector<double> want;
        for (double x : in) want.push_back(to_dtype(ref(to_dtype(x, d)), d));
        double tol = d.code == DType::F32 ? rtol : ulp_tol(d);
        require_close(values(op(tensor(in, {int64_t(in.size())}, d))), want, tol, atol, std::string(name) + " " + d.name());
    }
}

}  // namespace

TEST_CASE("unary math matches libm in f32, f16 and bf16") {
    const double inf = INFINITY, nan = NAN;
    std::vector<double> wide = uniform(257, 1, -20, 20);
    for (double s : {0.0, -0.0, 1.0, -1.0, 0.5, 100.0, -100.0, 127.9, -140.0, 150.0, inf, -inf, nan}) wide.push_back(s);
    check_unary("exp2", [](const Tensor& x) { return exp2(x); }, [](double x) { return std::exp2(x); }, wide, 5e-7, 1e-44);
    check_unary("exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, uniform(255, 2, -20, 20), 2e-6, 0);
    check_unary("neg", [](const Tensor& x) { return -x; }, [](double x) { return -x; }, wide, 0, 0);
    check_unary("abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::fabs(x); }, wide, 0, 0);

    std::vector<double> pos = uniform(255, 3, 0, 1000);
    for (double s : {0.0, 1e-30, 1e-40, 1.0, 2.0, 0.999999, 1.000001, 1e30, inf, -1.0, nan}) pos.push_back(s);
    check_unary("log2", [](const Tensor& x) { return log2(x); }, [](double x) { return std::log2(x); }, pos, 5e-7, 2e-7);
    check_unary("log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, pos, 5e-7, 2e-7);
    check_unary("sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, pos, 1e-7, 0);
    check_unary("reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1.0 / x; }, pos, 1e-7, 0);
    check_unary("rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1.0 / std::sqrt(x); }, pos, 3e-7, 0);

    std::vector<double> angles = uniform(255, 4, -20000, 20000);
    for (double s : {0.0, -0.0, 1e-8, 3.14159265, 1.5707963, 1e5, -1e6, inf, nan}) angles.push_back(s);
    check_unary("sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, angles, 2e-7, 1e-7);
    check_unary("cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, angles, 2e-7, 1e-7);
}

TEST_CASE("binary arithmetic for every dtype broadcasts like numpy") {
    struct Case {
        std::vector<int64_t> a, b, out;
    };
    const Case shapes[] = {{{3, 1, 5}, {4, 5}, {3, 4, 5}}, {{17}, {33, 1}, {33, 17}}, {{1}, {7, 1, 3}, {7, 1, 3}}};
    struct BinOp {
        const char* name;
        std::function<Tensor(const Tensor&, const Tensor&)> op;
        std::function<double(double, double, DType)> ref;
        bool nonzero_rhs;
    };
    const BinOp ops[] = {
        {"add", [](auto& a, auto& b) { return a + b; }, [](double a, double b, DType) { return a + b; }, false},
        {"sub", [](auto& a, auto& b) { return a - b; }, [](double a, double b, DType) { return a - b; }, false},
        {"mul", [](auto& a, auto& b) { return a * b; }, [](double a, double b, DType) { return a * b; }, false},
        {"div", [](auto& a, auto& b) { return a / b; },
         [](double a, double b, DType d) { return d.is_float() ? a / b : std::trunc(a / b); }, true},
        {"mod", [](auto& a, auto& b) { return a % b; }, [](double a, double b, DType) { return std::fmod(a, b); }, true},
        {"maximum", [](auto& a, auto& b) { return maximum(a, b); }, [](double a, double b, DType) { return std::max(a, b); }, false},
        {"minimum", [](auto& a, auto& b) { return minimum(a, b); }, [](double a, double b, DType) { return std::min(a, b); }, false},
    };
    uint32_t seed = 10;
    for (DType d : ALL) {
        double lo = d.is_float() || d.is_signed() ? -60 : 0, hi = d.code == DType::I8 ? 60 : 250;
        for (auto& sc : shapes) {
            if (&sc != &shapes[0] && d.code != DType::F32 && d.code != DType::I32) continue;  // fewer compiles
            for (auto& op : ops) {
                std::vector<double> a = uniform(size_t(count(sc.a)), seed++, lo, hi), b = uniform(size_t(count(sc.b)), seed++, lo, hi);
                for (auto* v : {&a, &b})
                    for (auto& x : *v) x = d.is_float() ? x / 16 : std::round(x);
                if (op.nonzero_rhs)
                    for (auto& x : b) x = to_dtype(x, d) == 0 ? 3 : x;
                std::vector<double> want;
                for (int64_t i = 0; i < count(sc.out); i++) {
                    auto c = unravel(i, sc.out);
                    double x = to_dtype(a[ravel_broadcast(c, sc.a)], d), y = to_dtype(b[ravel_broadcast(c, sc.b)], d);
                    want.push_back(to_dtype(op.ref(x, y, d), d));
                }
                Tensor r = op.op(tensor(a, dims(sc.a), d), tensor(b, dims(sc.b), d));
                REQUIRE(r.dtype() == d);
                REQUIRE(shape_str(r.shape()) == shape_str(dims(sc.out)));
                require_close(values(r), want, d.is_float() ? ulp_tol(d) : 0.0, 0.0, std::string(op.name) + " " + d.name());
            }
        }
    }
}

TEST_CASE("mixed dtypes promote and scalars take the tensor's dtype") {
    Tensor a = tensor({1, 2, 3}, {3}, i32), b = tensor({0.5, 0.25, 2}, {3}, f16);
    REQUIRE((a + b).dtype() == f16);
    REQUIRE((b + tensor({1, 1, 1}, {3}, f32)).dtype() == f32);
    REQUIRE((b + tensor({1, 1, 1}, {3}, bf16)).dtype() == f32);
    require_close(values(a + b), {1.5, 2.25, 5}, 0);
    REQUIRE((a * 2.0).dtype() == i32);
    require_close(values(a * 0.5), {0.5, 1, 1.5}, 0);  // a fractional scalar does not truncate
    require_close(values(10.0 - a), {9, 8, 7}, 0);
}

TEST_CASE("comparisons, where and bitwise logic") {
    std::vector<double> av = {-3, 0, 2, 200, 7, 7}, bv = {-2, 0, 1, 100, 8, 7};
    for (DType d : {f32, i32, u8, f16}) {
        Tensor a = tensor(av, {6}, d), b = tensor(bv, {6}, d);
        std::vector<double> A, B;
        for (size_t i = 0; i < 6; i++) A.push_back(to_dtype(av[i], d)), B.push_back(to_dtype(bv[i], d));
        auto cmp = [&](std::function<bool(double, double)> f) {
            std::vector<double> w;
            for (size_t i = 0; i < 6; i++) w.push_back(f(A[i], B[i]));
            return w;
        };
        REQUIRE(lt(a, b).dtype() == bool_);
        require_close(values(lt(a, b)), cmp([](double x, double y) { return x < y; }), 0);
        require_close(values(le(a, b)), cmp([](double x, double y) { return x <= y; }), 0);
        require_close(values(gt(a, b)), cmp([](double x, double y) { return x > y; }), 0);
        require_close(values(ge(a, b)), cmp([](double x, double y) { return x >= y; }), 0);
        require_close(values(eq(a, b)), cmp([](double x, double y) { return x == y; }), 0);
        require_close(values(ne(a, b)), cmp([](double x, double y) { return x != y; }), 0);
    }
    // where broadcasts its condition: (2, 1) against (2, 3)
    Tensor cond = Tensor::from_vector<bool>({true, false}, {2, 1});
    Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, f32);
    require_close(values(where(cond, x, -1.0)), {1, 2, 3, -1, -1, -1}, 0);
    require_close(values(logical_not(cond)), {0, 1}, 0);

    Tensor p = tensor({12, -7, 255, 0}, {4}, i32), q = tensor({10, 3, 15, 9}, {4}, i32);
    require_close(values(bitwise_and(p, q)), {12 & 10, -7 & 3, 255 & 15, 0}, 0);
    require_close(values(bitwise_or(p, q)), {12 | 10, -7 | 3, 255 | 15, 9}, 0);
    require_close(values(bitwise_xor(p, q)), {12 ^ 10, -7 ^ 3, 255 ^ 15, 9}, 0);
    Tensor sh = tensor({1, 2, 3, 31}, {4}, i32);
    require_close(values(shl(p, sh)), {24, -28, 2040, 0}, 0);
    require_close(values(shr(p, sh)), {6, -2, 31, 0}, 0);  // arithmetic for signed
    Tensor u = tensor({4294967295.0, 8, 1, 2}, {4}, u32);
    require_close(values(shr(u, sh)), {2147483647, 2, 0, 0}, 0);  // logical for unsigned
    Tensor bt = Tensor::from_vector<bool>({true, true, false, false}, {4}), bf = Tensor::from_vector<bool>({true, false, true, false}, {4});
    require_close(values(bitwise_xor(bt, bf)), {0, 1, 1, 0}, 0);
    REQUIRE_THROWS_WITH(bitwise_and(x, x), Catch::Contains("[engine] bitwise_and: needs integer or bool operands"));
}

TEST_CASE("casts between every pair of dtypes") {
    std::vector<double> in = {-300, -3.7, -1, -0.5, 0, 0.5, 1, 2.5, 3.99, 100, 200.5, 70000};
    for (DType from : ALL) {
        std::vector<double> src;
        for (double v : in) src.push_back(to_dtype(v, from));
        Tensor t = tensor(src, {int64_t(src.size())}, from);
        for (DType to : ALL) {
            std::vector<double> want;
            for (double v : src) {
                if (to.is_float()) {
                    want.push_back(to_dtype(v, to));
                } else if (from.is_float()) {  // truncate toward zero, saturate at the type's range
                    double lo = to_dtype(0, to), hi = 0;
                    switch (to.code) {
                        case DType::I8: lo = -128, hi = 127; break;
                        case DType::U8: lo = 0, hi = 255; break;
                        case DType::I16: lo = -32768, hi = 32767; break;
                        case DType::U16: lo = 0, hi = 65535; break;
                        case DType::I32: lo = -2147483648.0, hi = 2147483647.0; break;
                        case DType::U32: lo = 0, hi = 4294967295.0; break;
                        default: lo = -9.223372036854775808e18, hi = 9.223372036854775807e18; break;
                    }
                    want.push_back(std::clamp(std::trunc(v), lo, hi));
                } else {
                    want.push_back(to_dtype(v, to));  // integers wrap
                }
            }
            require_close(values(t.cast(to)), want, 0, 0, from.name() + "->" + to.name());
        }
        require_close(values(t.cast(bool_)), [&] {
            std::vector<double> w;
            for (double v : src) w.push_back(v != 0);
            return w;
        }(), 0);
    }
    Tensor nan = tensor({NAN, INFINITY, -INFINITY}, {3}, f32);
    require_close(values(nan.cast(i32)), {0, 2147483647.0, -2147483648.0}, 0);  // saturating, NaN -> 0
    Tensor b = Tensor::from_vector<bool>({true, false}, {2});
    require_close(values(b.cast(f32)), {1, 0}, 0);
    require_close(values(b.cast(i64) + 5.0), {6, 5}, 0);
}

TEST_CASE("bitcasts reinterpret the bits") {
    Tensor x = tensor({1.0, -2.0, 0.15625}, {3}, f32);
    require_close(values(x.bitcast(i32)), {1065353216, -1073741824, 1042284544}, 0);
    require_close(values(x.bitcast(u32).bitcast(f32)), {1.0, -2.0, 0.15625}, 0);
    Tensor h = tensor({1.0, -2.0, 65504}, {3}, f16);
    require_close(values(h.bitcast(u16)), {0x3c00, 0xc000, 0x7bff}, 0);
    require_close(values(h.bitcast(i16)), {0x3c00, int16_t(0xc000), 0x7bff}, 0);
    require_close(values(tensor({0x3c00, 0x4000}, {2}, u16).bitcast(f16)), {1.0, 2.0}, 0);
    Tensor bh = tensor({1.0, -2.0}, {2}, bf16);
    require_close(values(bh.bitcast(u16)), {0x3f80, 0xc000}, 0);
    require_close(values(tensor({0x3f80, 0x4040}, {2}, u16).bitcast(bf16)), {1.0, 3.0}, 0);
    REQUIRE_THROWS_WITH(x.bitcast(f16), Catch::Contains("[engine] bitcast: cannot bitcast f32 to f16"));
}
