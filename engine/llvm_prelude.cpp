// Math helpers in LLVM IR. exp2: round-to-nearest range reduction and a degree-7 Taylor polynomial of
// 2^f on [-1/2, 1/2] (error < 1e-8 before rounding), scaled by two exponent-built powers of two so
// 2^-150..2^128 never overflow midway. log2: exponent + 2/ln2 * atanh((m-1)/(m+1)) with m in
// [sqrt(1/2), sqrt(2)). sin: in double, Cody-Waite reduction by pi/2 (exact for |x| < 1.6e6) and Taylor
// polynomials for sin/cos on [-pi/4, pi/4]; the phase argument makes cos(x) = sin(x + pi/2) exact.
#include "engine/llvm_prelude_impl.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace engine {

std::string hex_double(double v) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    char buf[32];
    std::snprintf(buf, sizeof buf, "0x%016" PRIX64, b);
    return buf;
}

std::string hex_float(double v) { return hex_double(double(float(v))); }

namespace {

std::string horner(const std::string& type, const std::string& x, const double* c, int n, const std::string& tag) {
    // c[0] + x*(c[1] + x*(...)): returns IR lines ending in %<tag>0
    auto lit = [&](double v) { return type == "float" ? hex_float(v) : hex_double(v); };
    std::string s;
    std::string acc = lit(c[n - 1]);
    for (int i = n - 2; i >= 0; i--) {
        std::string m = "%" + tag + "m" + std::to_string(i), a = "%" + tag + std::to_string(i);
        s += "  " + m + " = fmul contract " + type + " " + acc + ", " + x + "\n";
        s += "  " + a + " = fadd contract " + type + " " + m + ", " + lit(c[i]) + "\n";
        acc = a;
    }
    return s;
}

std::string build() {
    std::string s;
    s += "attributes #0 = { nounwind }\n";
    s += "attributes #1 = { alwaysinline nounwind memory(none) }\n";
    s += "declare float @llvm.sqrt.f32(float)\ndeclare float @llvm.maxnum.f32(float, float)\n";
    s += "declare float @llvm.rint.f32(float)\ndeclare double @llvm.rint.f64(double)\n";
    for (const char* t : {"i8", "i16", "i32", "i64"}) {
        std::string ty = t;
        s += "declare " + ty + " @llvm.fptosi.sat." + ty + ".f32(float)\n";
        s += "declare " + ty + " @llvm.fptoui.sat." + ty + ".f32(float)\n";
        s += "declare " + ty + " @llvm.smax." + ty + "(" + ty + ", " + ty + ")\n";
        s += "declare " + ty + " @llvm.umax." + ty + "(" + ty + ", " + ty + ")\n";
    }
    s += "declare i64 @llvm.fptosi.sat.i64.f64(double)\n";

    // exp2
    const double ln2 = 0.6931471805599453;
    double ec[8];
    double term = 1.0;
    for (int i = 0; i < 8; i++) {
        ec[i] = term;
        term *= ln2 / (i + 1);
    }
    s += "define internal float @tl_exp2(float %x0) #1 {\n";
    s += "  %hi = fcmp ogt float %x0, " + hex_float(128.0) + "\n";
    s += "  %x1 = select i1 %hi, float " + hex_float(128.0) + ", float %x0\n";
    s += "  %lo = fcmp olt float %x1, " + hex_float(-150.0) + "\n";
    s += "  %x = select i1 %lo, float " + hex_float(-150.0) + ", float %x1\n";
    s += "  %n = call float @llvm.rint.f32(float %x)\n";
    s += "  %f = fsub float %x, %n\n";
    s += horner("float", "%f", ec, 8, "e");
    // %n is clamped to [-150, 128] or NaN; a plain fptosi (NaN zeroed first: the result is NaN through %e0
    // anyway) vectorizes, where the saturating intrinsic is scalarized lane by lane.
    s += "  %nnan = fcmp uno float %n, %n\n  %nz = select i1 %nnan, float " + hex_float(0.0) + ", float %n\n";
    s += "  %ni = fptosi float %nz to i32\n";
    s += "  %n1 = ashr i32 %ni, 1\n  %n2 = sub i32 %ni, %n1\n";
    s += "  %b1 = add i32 %n1, 127\n  %s1i = shl i32 %b1, 23\n  %s1 = bitcast i32 %s1i to float\n";
    s += "  %b2 = add i32 %n2, 127\n  %s2i = shl i32 %b2, 23\n  %s2 = bitcast i32 %s2i to float\n";
    s += "  %r1 = fmul float %e0, %s1\n  %r = fmul float %r1, %s2\n  ret float %r\n}\n";

    // log2
    double lc[5] = {1.0, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9};
    s += "define internal float @tl_log2(float %x) #1 {\n";
    s += "  %den = fcmp olt float %x, " + hex_float(std::ldexp(1.0, -126)) + "\n";
    s += "  %xs = fmul float %x, " + hex_float(8388608.0) + "\n";
    s += "  %xn = select i1 %den, float %xs, float %x\n";
    s += "  %eadj = select i1 %den, i32 -23, i32 0\n";
    s += "  %b = bitcast float %xn to i32\n  %eb = lshr i32 %b, 23\n  %eb2 = and i32 %eb, 255\n";
    s += "  %e0 = sub i32 %eb2, 127\n  %e1 = add i32 %e0, %eadj\n";
    s += "  %mb = and i32 %b, 8388607\n  %mb2 = or i32 %mb, 1065353216\n  %m = bitcast i32 %mb2 to float\n";
    s += "  %big = fcmp ogt float %m, " + hex_float(1.4142135623730951) + "\n";
    s += "  %mh = fmul float %m, " + hex_float(0.5) + "\n";
    s += "  %m2 = select i1 %big, float %mh, float %m\n";
    s += "  %e1p = add i32 %e1, 1\n  %e2 = select i1 %big, i32 %e1p, i32 %e1\n";
    s += "  %num = fsub float %m2, " + hex_float(1.0) + "\n  %dnm = fadd float %m2, " + hex_float(1.0) + "\n";
    s += "  %s = fdiv float %num, %dnm\n  %s2 = fmul float %s, %s\n";
    s += horner("float", "%s2", lc, 5, "l");
    s += "  %at = fmul float %s, %l0\n  %lm = fmul float %at, " + hex_float(2.0 / ln2) + "\n";
    s += "  %ef = sitofp i32 %e2 to float\n  %r0 = fadd float %ef, %lm\n";
    s += "  %isz = fcmp oeq float %x, " + hex_float(0.0) + "\n";
    s += "  %r1 = select i1 %isz, float " + hex_float(-INFINITY) + ", float %r0\n";
    s += "  %isneg = fcmp olt float %x, " + hex_float(0.0) + "\n";
    s += "  %r2 = select i1 %isneg, float " + hex_float(NAN) + ", float %r1\n";
    s += "  %isinf = fcmp oeq float %x, " + hex_float(INFINITY) + "\n";
    s += "  %r3 = select i1 %isinf, float " + hex_float(INFINITY) + ", float %r2\n";
    s += "  %isnan = fcmp uno float %x, %x\n";
    s += "  %r = select i1 %isnan, float %x, float %r3\n  ret float %r\n}\n";

    // sin(x + phase), computed in double
    double sc[7], cc[8];
    double f = 1.0;
    for (int i = 0; i < 7; i++) {  // sin: r * sum (-1)^i r^(2i) / (2i+1)!
        sc[i] = (i % 2 ? -1.0 : 1.0) / f;
        f *= (2 * i + 2) * (2 * i + 3);
    }
    f = 1.0;
    for (int i = 0; i < 8; i++) {  // cos: sum (-1)^i r^(2i) / (2i)!
        cc[i] = (i % 2 ? -1.0 : 1.0) / f;
        f *= (2 * i + 1) * (2 * i + 2);
    }
    s += "define internal float @tl_sin(float %xf, double %phase) #1 {\n";
    s += "  %x0 = fpext float %xf to double\n  %x = fadd double %x0, %phase\n";
    s += "  %kf = fmul double %x, " + hex_double(0.6366197723675814) + "\n";
    s += "  %k = call double @llvm.rint.f64(double %kf)\n";
    s += "  %kh = fmul double %k, " + hex_double(1.5707963267341256) + "\n  %ra = fsub double %x, %kh\n";
    s += "  %kl = fmul double %k, " + hex_double(6.077100506506192e-11) + "\n  %r = fsub double %ra, %kl\n";
    s += "  %r2 = fmul double %r, %r\n";
    s += horner("double", "%r2", sc, 7, "s");
    s += "  %sn = fmul double %r, %s0\n";
    s += horner("double", "%r2", cc, 8, "c");
    // only k's two low bits matter: clamp it into i64 range (NaN to 0) so a plain fptosi vectorizes
    s += "  %kh1 = fcmp ogt double %k, " + hex_double(0x1p62) + "\n  %k1 = select i1 %kh1, double " + hex_double(0x1p62) + ", double %k\n";
    s += "  %kl1 = fcmp olt double %k1, " + hex_double(-0x1p62) + "\n  %k2 = select i1 %kl1, double " + hex_double(-0x1p62) + ", double %k1\n";
    s += "  %kn = fcmp uno double %k2, %k2\n  %k3 = select i1 %kn, double " + hex_double(0.0) + ", double %k2\n";
    s += "  %ki = fptosi double %k3 to i64\n";
    s += "  %odd = and i64 %ki, 1\n  %isodd = icmp ne i64 %odd, 0\n";
    s += "  %v = select i1 %isodd, double %c0, double %sn\n";
    s += "  %hi2 = and i64 %ki, 2\n  %isneg = icmp ne i64 %hi2, 0\n";
    s += "  %nv = fneg double %v\n  %res = select i1 %isneg, double %nv, double %v\n";
    s += "  %out = fptrunc double %res to float\n  ret float %out\n}\n";

    // f32 -> bf16 precision, round to nearest even (NaN stays a quiet NaN), as gguf::f32_to_bf16
    s += "define internal float @tl_bf16(float %x) #1 {\n";
    s += "  %b = bitcast float %x to i32\n  %l = lshr i32 %b, 16\n  %l1 = and i32 %l, 1\n";
    s += "  %bias = add i32 %l1, 32767\n  %r = add i32 %b, %bias\n  %m = and i32 %r, -65536\n";
    s += "  %isnan = fcmp uno float %x, %x\n  %q = or i32 %b, 4194304\n  %qm = and i32 %q, -65536\n";
    s += "  %o = select i1 %isnan, i32 %qm, i32 %m\n  %f = bitcast i32 %o to float\n  ret float %f\n}\n";
    return s;
}

}  // namespace

const std::string& llvm_prelude() {
    static const std::string p = build();
    return p;
}

}  // namespace engine
