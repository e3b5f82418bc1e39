// Kernel IR -> LLVM IR text. x86-64: the output's outer loops are flattened into one index that the
// thread pool splits ([begin, end)), the innermost output loop and REDUCE loops are plain loops left to
// LLVM's vectorizer, buffers are noalias. Half types live in float registers, rounded after each op.
// amdgcn: the same body in an amdgpu_kernel, one work-item per output element (all output loops
// flattened into the global work-item id), global pointers cast to flat for the shared body code.
#include "engine/llvm_prelude_impl.h"
#include "engine/realize_impl.h"
#include "engine/rewrite.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>

namespace engine {

namespace {

// Work-items per workgroup of generated amdgcn kernels (launch: ceil(global / 256) workgroups).
constexpr int AMD_WORKGROUP = 256;

[[noreturn]] void fail(const std::string& what) { throw Error("[engine] render: " + what); }

const char* reg_type(DType d) {
    switch (d.code) {
        case DType::BOOL: return "i1";
        case DType::U8: case DType::I8: return "i8";
        case DType::U16: case DType::I16: return "i16";
        case DType::U32: case DType::I32: return "i32";
        case DType::I64: return "i64";
        case DType::F16: case DType::BF16: case DType::F32: return "float";
        default: fail("no register type for " + d.name());
    }
}

const char* mem_type(DType d) {
    switch (d.code) {
        case DType::BOOL: return "i8";
        case DType::F16: return "half";
        case DType::BF16: return "i16";
        default: return reg_type(d);
    }
}

int bits(DType d) { return d.code == DType::BOOL ? 1 : int(d.itemsize() * 8); }

std::string literal(const Node* n) {
    DType d = n->dtype;
    if (d.is_float()) return hex_float(n->arg.f);
    if (d.code == DType::BOOL) return n->arg.i ? "true" : "false";
    int64_t v = n->arg.i;
    switch (d.code) {
        case DType::U8: case DType::I8: v = int8_t(v); break;
        case DType::U16: case DType::I16: v = int16_t(v); break;
        case DType::U32: case DType::I32: v = int32_t(v); break;
        default: break;
    }
    return std::to_string(v);
}

// Which loops the threads' index g covers. On x86-64 all but the last, which is the loop inside; a
// last loop of at most 4 iterations (RoPE's pair) is written out in full inside the one before it
// instead, so the inner loop walks pairs, which the vectorizer turns into interleaved loads and
// stores, where a loop of two iterations per pair stays scalar. amdgcn: all of them, one per item.
struct LoopNest {
    size_t n_outer;
    int64_t unroll_last = 0;  // iterations of the last loop written out, or 0
    LoopNest(const LoweredKernel& k, bool amd) {
        const size_t n = k.loops.size();
        const Node* last_end = n ? k.loops.back()->src(0) : nullptr;
        if (!amd && n >= 3 && last_end->op == Op::CONST && last_end->arg.i <= 4) unroll_last = last_end->arg.i;
        n_outer = amd || n < 2 ? n : unroll_last ? n - 2 : n - 1;
    }
};

struct Renderer {
    const LoweredKernel& k;
    std::string name;
    std::string out;
    std::string block;
    int tmp = 0, labels = 0;
    std::vector<std::unordered_map<const Node*, std::string>> scopes;
    std::unordered_map<const Node*, std::string> ranges;
    std::map<const Node*, int> var_index;

    std::string fresh() { return "%t" + std::to_string(tmp++); }
    void emit(const std::string& s) { out += "  " + s + "\n"; }
    void label(const std::string& l) {
        out += l + ":\n";
        block = l;
    }
    std::string op(const std::string& rhs) {
        std::string r = fresh();
        emit(r + " = " + rhs);
        return r;
    }

    std::string val(const Node* n) {
        if (n->op == Op::CONST) return literal(n);
        if (n->op == Op::VAR) return "%v" + std::to_string(var_index.at(n));
        if (n->op == Op::RANGE) {
            auto it = ranges.find(n);
            if (it == ranges.end()) fail("loop index used outside its loop");
            return it->second;
        }
        for (auto s = scopes.rbegin(); s != scopes.rend(); ++s)
            if (auto it = s->find(n); it != s->end()) return it->second;
        std::string r = compute(n);
        scopes.back()[n] = r;
        return r;
    }

    // Half types are kept in float registers; results are rounded to their precision.
    std::string round_half(const std::string& v, DType d) {
        if (d.code == DType::F16) return op("fpext half " + op("fptrunc float " + v + " to half") + " to float");
        if (d.code == DType::BF16) return op("call float @tl_bf16(float " + v + ")");
        return v;
    }

    std::string address(const Node* param, const Node* index) {
        int p = int(param->arg.i);
        return op("getelementptr inbounds " + std::string(mem_type(param->dtype)) + ", ptr %p" + std::to_string(p) + ", i64 " + val(index));
    }

    std::string load(const Node* n) {
        DType d = n->dtype;
        std::string v = op("load " + std::string(mem_type(d)) + ", ptr " + address(n->src(0), n->src(1)));
        switch (d.code) {
            case DType::BOOL: return op("icmp ne i8 " + v + ", 0");
            case DType::F16: return op("fpext half " + v + " to float");
            case DType::BF16: return op("bitcast i32 " + op("shl i32 " + op("zext i16 " + v + " to i32") + ", 16") + " to float");
            default: return v;
        }
    }

    void store(const Node* n) {
        DType d = n->src(0)->dtype;
        std::string v = val(n->src(2));
        if (d.code == DType::BOOL) v = op("zext i1 " + v + " to i8");
        else if (d.code == DType::F16) v = op("fptrunc float " + v + " to half");
        else if (d.code == DType::BF16) v = op("trunc i32 " + op("lshr i32 " + op("bitcast float " + v + " to i32") + ", 16") + " to i16");
        std::string addr = address(n->src(0), n->src(1));
        emit("store " + std::string(mem_type(d)) + " " + v + ", ptr " + addr);
    }

    std::string intrinsic(const std::string& fn, const std::string& type, std::vector<std::string> args) {
        std::string call = "call " + type + " " + fn + "(";
        for (size_t i = 0; i < args.size(); i++) call += (i ? ", " : "") + type + " " + args[i];
        return op(call + ")");
    }

    std::string compute(const Node* n) {
        DType d = n->dtype;
        auto s = [&](size_t i) { return val(n->src(i)); };
        if (n->op == Op::LOAD) return load(n);
        if (n->op == Op::REDUCE) return reduce(n);
        if (n->op == Op::CAST) return convert(s(0), n->src(0)->dtype, d);
        if (n->op == Op::BITCAST) return bitcast(s(0), n->src(0)->dtype, d);
        if (n->op == Op::WHERE) return op("select i1 " + s(0) + ", " + reg_type(d) + " " + s(1) + ", " + reg_type(d) + " " + s(2));
        DType sd = n->src(0)->dtype;
        std::string t = reg_type(sd);
        if (sd.is_float()) {
            std::string r;
            switch (n->op) {
                case Op::NEG: r = op("fneg float " + s(0)); break;
                case Op::EXP2: r = op("call float @tl_exp2(float " + s(0) + ")"); break;
                case Op::LOG2: r = op("call float @tl_log2(float " + s(0) + ")"); break;
                case Op::SIN: r = op("call float @tl_sin(float " + s(0) + ", double " + hex_double(n->arg.f) + ")"); break;
                case Op::SQRT: r = intrinsic("@llvm.sqrt.f32", "float", {s(0)}); break;
                case Op::RECIP: r = op("fdiv float " + hex_float(1.0) + ", " + s(0)); break;
                case Op::ADD: r = op("fadd float " + s(0) + ", " + s(1)); break;
                case Op::SUB: r = op("fsub float " + s(0) + ", " + s(1)); break;
                case Op::MUL: r = op("fmul float " + s(0) + ", " + s(1)); break;
                case Op::DIV: r = op("fdiv float " + s(0) + ", " + s(1)); break;
                case Op::MOD: r = op("frem float " + s(0) + ", " + s(1)); break;
                case Op::MAX: r = intrinsic("@llvm.maxnum.f32", "float", {s(0), s(1)}); break;
                case Op::CMPLT: return op("fcmp olt float " + s(0) + ", " + s(1));
                case Op::CMPEQ: return op("fcmp oeq float " + s(0) + ", " + s(1));
                case Op::CMPNE: return op("fcmp une float " + s(0) + ", " + s(1));
                default: fail(std::string(op_name(n->op)) + " on floats");
            }
            return round_half(r, d);
        }
        bool sg = sd.is_signed();
        std::string ty = t + " ";
        switch (n->op) {
            case Op::NEG: return op("sub " + ty + "0, " + s(0));
            case Op::NOT: return op("xor " + ty + s(0) + ", -1");
            case Op::ADD: return op("add " + ty + s(0) + ", " + s(1));
            case Op::SUB: return op("sub " + ty + s(0) + ", " + s(1));
            case Op::MUL: return op("mul " + ty + s(0) + ", " + s(1));
            case Op::DIV: case Op::MOD: {
                // Division by zero (and INT_MIN / -1) would trap: divide by 1 instead (garbage, no crash).
                std::string b = s(1);
                std::string bad = op("icmp eq " + ty + b + ", 0");
                if (sg && sd.code != DType::BOOL) bad = op("or i1 " + bad + ", " + op("icmp eq " + ty + b + ", -1"));
                std::string safe = op("select i1 " + bad + ", " + ty + "1, " + ty + b);
                std::string q = op(std::string(n->op == Op::DIV ? (sg ? "sdiv " : "udiv ") : (sg ? "srem " : "urem ")) + ty + s(0) + ", " + safe);
                if (!sg) return q;
                std::string alt = n->op == Op::DIV ? op("sub " + ty + "0, " + s(0)) : std::string("0");  // x / -1, x % -1
                std::string is_m1 = op("icmp eq " + ty + b + ", -1");
                return op("select i1 " + is_m1 + ", " + ty + alt + ", " + ty + q);
            }
            case Op::MAX:
                if (sd.code == DType::BOOL) return op("or i1 " + s(0) + ", " + s(1));
                return intrinsic(std::string(sg ? "@llvm.smax." : "@llvm.umax.") + t, t, {s(0), s(1)});
            case Op::CMPLT:
                if (sd.code == DType::BOOL) return op("icmp ult i1 " + s(0) + ", " + s(1));
                return op(std::string("icmp ") + (sg ? "slt " : "ult ") + ty + s(0) + ", " + s(1));
            case Op::CMPEQ: return op("icmp eq " + ty + s(0) + ", " + s(1));
            case Op::CMPNE: return op("icmp ne " + ty + s(0) + ", " + s(1));
            case Op::AND: return op("and " + ty + s(0) + ", " + s(1));
            case Op::OR: return op("or " + ty + s(0) + ", " + s(1));
            case Op::XOR: return op("xor " + ty + s(0) + ", " + s(1));
            case Op::SHL: case Op::SHR: {
                // Shift counts wrap at the type width (x86 semantics) instead of being poison.
                std::string amt = op("and " + ty + s(1) + ", " + std::to_string(bits(sd) - 1));
                const char* ins = n->op == Op::SHL ? "shl " : (sg ? "ashr " : "lshr ");
                return op(ins + ty + s(0) + ", " + amt);
            }
            default: fail(std::string(op_name(n->op)) + " on " + sd.name());
        }
    }

    std::string convert(const std::string& v, DType from, DType to) {
        if (from == to) return v;
        std::string ft = reg_type(from), tt = reg_type(to);
        if (from.is_float() && to.is_float()) return round_half(v, to);  // all floats share f32 registers
        if (from.is_float()) {
            if (to.code == DType::BOOL) return op("fcmp une float " + v + ", " + hex_float(0.0));
            std::string fn = std::string(to.is_signed() ? "@llvm.fptosi.sat." : "@llvm.fptoui.sat.") + tt + ".f32";
            return op("call " + tt + " " + fn + "(float " + v + ")");
        }
        if (to.is_float()) {
            const char* ins = from.is_signed() ? "sitofp " : "uitofp ";
            return round_half(op(ins + ft + " " + v + " to float"), to);
        }
        if (to.code == DType::BOOL) return op("icmp ne " + ft + " " + v + ", 0");
        int fb = bits(from), tb = bits(to);
        if (fb == tb) return v;
        if (fb > tb) return op("trunc " + ft + " " + v + " to " + tt);
        return op(std::string(from.is_signed() ? "sext " : "zext ") + ft + " " + v + " to " + tt);
    }

    std::string bitcast(const std::string& v, DType from, DType to) {
        auto to_bits = [&](const std::string& x, DType d) -> std::string {  // register -> i<bits>
            if (d.code == DType::F32) return op("bitcast float " + x + " to i32");
            if (d.code == DType::F16) return op("bitcast half " + op("fptrunc float " + x + " to half") + " to i16");
            if (d.code == DType::BF16) return op("trunc i32 " + op("lshr i32 " + op("bitcast float " + x + " to i32") + ", 16") + " to i16");
            return x;
        };
        std::string b = to_bits(v, from);
        if (to.code == DType::F32) return op("bitcast i32 " + b + " to float");
        if (to.code == DType::F16) return op("fpext half " + op("bitcast i16 " + b + " to half") + " to float");
        if (to.code == DType::BF16) return op("bitcast i32 " + op("shl i32 " + op("zext i16 " + b + " to i32") + ", 16") + " to float");
        return b;
    }

    std::string reduce_init(DType d, ReduceOp rop) {
        if (rop == ReduceOp::SUM) return d.is_float() ? hex_float(0.0) : (d.code == DType::BOOL ? "false" : "0");
        if (d.is_float()) return hex_float(-INFINITY);
        if (d.code == DType::BOOL) return "false";
        if (!d.is_signed()) return "0";
        return std::to_string(int64_t(-1) << (bits(d) - 1));
    }

    std::string combine(const std::string& acc, const std::string& v, DType d, ReduceOp rop) {
        std::string t = reg_type(d);
        if (d.is_float())  // reassoc lets LLVM vectorize the reduction (the sum order changes, as in any BLAS)
            return rop == ReduceOp::SUM ? op("fadd reassoc contract float " + acc + ", " + v)
                                        : op("call reassoc nnan nsz float @llvm.maxnum.f32(float " + acc + ", float " + v + ")");
        if (d.code == DType::BOOL) return op(std::string(rop == ReduceOp::SUM ? "xor" : "or") + " i1 " + acc + ", " + v);
        if (rop == ReduceOp::SUM) return op("add " + t + " " + acc + ", " + v);
        return intrinsic(std::string(d.is_signed() ? "@llvm.smax." : "@llvm.umax.") + t, t, {acc, v});
    }

    std::string reduce(const Node* n) { return reduce_loop(n, 1, reduce_init(n->dtype, ReduceOp(n->arg.i))); }

    // One while-form loop per reduced range; the accumulator is the header phi, final at the exit.
    std::string reduce_loop(const Node* n, size_t k, const std::string& acc_in) {
        const Node* r = n->src(k);
        std::string id = std::to_string(labels++), t = reg_type(n->dtype);
        std::string end = val(r->src(0));
        std::string pre = block, iv = "%r" + id, acc = "%acc" + id, latch = "red" + id + ".latch";
        emit("br label %red" + id + ".hdr");
        label("red" + id + ".hdr");
        emit(iv + " = phi i64 [ 0, %" + pre + " ], [ " + iv + ".next, %" + latch + " ]");
        size_t phi_at = out.size();
        emit(acc + " = phi " + t + " [ " + acc_in + ", %" + pre + " ], [ @ACC@, %" + latch + " ]");
        std::string cond = op("icmp slt i64 " + iv + ", " + end);
        emit("br i1 " + cond + ", label %red" + id + ".body, label %red" + id + ".exit");
        label("red" + id + ".body");
        ranges[r] = iv;
        scopes.emplace_back();
        std::string next = k + 1 < n->srcs.size() ? reduce_loop(n, k + 1, acc)
                                                   : combine(acc, val(n->src(0)), n->dtype, ReduceOp(n->arg.i));
        scopes.pop_back();
        ranges.erase(r);
        out.replace(out.find("@ACC@", phi_at), 5, next);
        emit("br label %" + latch);
        label(latch);
        emit(iv + ".next = add i64 " + iv + ", 1");
        emit("br label %red" + id + ".hdr");
        label("red" + id + ".exit");
        return acc;
    }

    // The body function: outer loops flattened into one index g, the last output loop inside (the
    // last two with a tiny last one, see LoopNest). x86-64 loops g over [begin, end) (a thread's
    // share); amdgcn takes g from the work-item id and checks it against the global size.
    std::string body_function(const std::vector<const Node*>& vars, bool amd) {
        const auto& loops = k.loops;
        const LoopNest nest(k, amd);
        const size_t n_outer = nest.n_outer;
        const int64_t unroll = nest.unroll_last;
        out.clear();
        label("entry");
        scopes.emplace_back();
        if (amd)  // kernel arguments are global pointers; the body addresses them as flat ones
            for (size_t p = 0; p < k.params.size(); p++)
                emit("%p" + std::to_string(p) + " = addrspacecast ptr addrspace(1) %p" + std::to_string(p) + ".global to ptr");
        std::vector<std::string> ends;
        for (auto& l : loops) ends.push_back(val(l->src(0)));
        if (amd) {
            emit("%wg = call i32 @llvm.amdgcn.workgroup.id.x()");
            emit("%wi = call i32 @llvm.amdgcn.workitem.id.x()");
            emit("%wg64 = zext i32 %wg to i64");
            emit("%wi64 = zext i32 %wi to i64");
            emit("%gb = mul i64 %wg64, " + std::to_string(AMD_WORKGROUP));
            emit("%g = add i64 %gb, %wi64");
        } else {
            emit("br label %outer.hdr");
            std::string pre = block;
            label("outer.hdr");
            emit("%g = phi i64 [ %begin, %" + pre + " ], [ %g.next, %outer.latch ]");
        }
        emit("%g.ok = icmp slt i64 %g, %end");
        emit("br i1 %g.ok, label %outer.body, label %exit");
        label("outer.body");
        scopes.emplace_back();
        std::string rem = "%g";
        for (size_t i = n_outer; i-- > 0;) {
            if (i == 0) { ranges[loops[0].get()] = rem; break; }
            ranges[loops[i].get()] = op("urem i64 " + rem + ", " + ends[i]);
            rem = op("udiv i64 " + rem + ", " + ends[i]);
        }
        if (n_outer < loops.size()) {
            std::string from = block;
            emit("br label %inner.hdr");
            label("inner.hdr");
            emit("%i = phi i64 [ 0, %" + from + " ], [ %i.next, %inner.latch ]");
            emit("%i.ok = icmp slt i64 %i, " + ends[n_outer]);
            emit("br i1 %i.ok, label %inner.body, label %outer.latch");
            label("inner.body");
            ranges[loops[n_outer].get()] = "%i";
            for (int64_t u = 0; u < std::max<int64_t>(unroll, 1); u++) {  // a copy per written-out iteration
                if (unroll) ranges[loops.back().get()] = std::to_string(u);
                scopes.emplace_back();
                store(k.ast.get());
                scopes.pop_back();
            }
            emit("br label %inner.latch");
            label("inner.latch");
            emit("%i.next = add i64 %i, 1");
            emit("br label %inner.hdr");
        } else {
            store(k.ast.get());
            emit("br label %outer.latch");
        }
        label("outer.latch");
        if (amd) {
            emit("br label %exit");
        } else {
            emit("%g.next = add i64 %g, 1");
            emit("br label %outer.hdr");
        }
        label("exit");
        emit("ret void");

        std::string sig = amd ? "define amdgpu_kernel void @" + name + "(" : "define internal void @" + name + "_body(";
        int n_params = int(k.params.size());
        for (int p = 0; p < n_params; p++)
            sig += amd ? "ptr addrspace(1) noalias %p" + std::to_string(p) + ".global, " : "ptr noalias %p" + std::to_string(p) + ", ";
        for (size_t v = 0; v < vars.size(); v++) sig += "i64 %v" + std::to_string(v) + ", ";
        return sig + (amd ? "i64 %end) #2 {\n" : "i64 %begin, i64 %end) #0 {\n") + out + "}\n";
    }
};

// The x86-64 entry point unpacks the buffer and var arrays (CPU calling convention in devices/device.h)
// and calls the body, whose noalias parameters the optimizer can rely on.
std::string x86_entry(const std::string& name, size_t n_params, size_t n_vars) {
    std::string ir = "define void @" + name + "(ptr %bufs, ptr %vars, i64 %begin, i64 %end) #0 {\nentry:\n", args;
    for (size_t p = 0; p < n_params; p++) {
        std::string s = std::to_string(p);
        ir += "  %pp" + s + " = getelementptr ptr, ptr %bufs, i64 " + s + "\n  %p" + s + " = load ptr, ptr %pp" + s + "\n";
        args += "ptr %p" + s + ", ";
    }
    for (size_t v = 0; v < n_vars; v++) {
        std::string s = std::to_string(v);
        ir += "  %vp" + s + " = getelementptr i64, ptr %vars, i64 " + s + "\n  %v" + s + " = load i64, ptr %vp" + s + "\n";
        args += "i64 %v" + s + ", ";
    }
    return ir + "  call void @" + name + "_body(" + args + "i64 %begin, i64 %end)\n  ret void\n}\n";
}

}  // namespace

RenderedKernel render_llvm(const LoweredKernel& k, const devices::Target& target) {
    bool amd = target.arch == devices::Arch::AMDGCN;
    static std::atomic<uint64_t> counter{0};
    RenderedKernel rk;
    rk.name = k.name + "_" + std::to_string(counter++);

    // Vars used by the kernel body or its loop bounds, in a stable order.
    std::vector<const Node*> roots{k.ast.get()};
    for (auto& l : k.loops) roots.push_back(l.get());
    std::vector<const Node*> vars;
    NodeRef reduce_work = cidx(1);
    for (const Node* n : toposort(roots)) {
        if (n->op == Op::VAR) vars.push_back(n);
        if (n->op == Op::REDUCE)
            for (size_t i = 1; i < n->srcs.size(); i++) reduce_work = imul(reduce_work, n->src(i)->srcs[0]);
    }
    std::sort(vars.begin(), vars.end(), [](const Node* a, const Node* b) {
        return var_state(a).name != var_state(b).name ? var_state(a).name < var_state(b).name : a < b;
    });

    Renderer r{k, rk.name, {}, {}, 0, 0, {}, {}, {}};
    for (size_t i = 0; i < vars.size(); i++) r.var_index[vars[i]] = int(i);
    std::string body = r.body_function(vars, amd);

    std::string ir = llvm_prelude();
    ir += body;
    ir += amd ? "declare i32 @llvm.amdgcn.workgroup.id.x()\ndeclare i32 @llvm.amdgcn.workitem.id.x()\n"
                "attributes #2 = { nounwind \"amdgpu-flat-work-group-size\"=\"1," + std::to_string(AMD_WORKGROUP) + "\" }\n"
              : x86_entry(rk.name, k.params.size(), vars.size());
    rk.llvm_ir = std::move(ir);

    for (const Node* v : vars) rk.vars.push_back(NodeRef(v));
    const size_t n_outer = LoopNest(k, amd).n_outer;
    NodeRef global = cidx(1), work = reduce_work;
    for (size_t i = 0; i < k.loops.size(); i++) {
        if (i < n_outer) global = imul(global, k.loops[i]->srcs[0]);
        work = imul(work, k.loops[i]->srcs[0]);
    }
    rk.global_size = simplify(global);
    rk.work = simplify(work);
    return rk;
}

}  // namespace engine
