// The Device defaults shared by backends (the host ops of devices/cpu/ops.cpp) and the op names.
#include "devices/device.h"
#include "devices/ops.h"

#include "devices/cpu/cpu_impl.h"

namespace devices {

Memory Device::wrap(const void* host, size_t bytes, Access) {
    Memory m = alloc(bytes);
    copy_in(m, 0, host, bytes);
    return m;
}

void Device::run_host(HostFn, const void*, int64_t, int64_t) {
    throw Error("[devices] " + name() + ": cannot run host functions (custom kernel without a " + name() +
                " implementation)");
}

void Device::launch_hand_kernel(const std::string& kernel, std::span<const uint8_t>) {
    throw Error("[devices] " + name() + ": has no hand-written kernel '" + kernel + "'");
}

ops::Impl Device::op(ops::Kind kind, gguf::Type type, const void*) const { return cpu::host_op(kind, type); }
// A GPU without a plan of its own multiplies float weights in a generated kernel rather than in host code
// over its memory.
LinearPlan Device::linear_plan(gguf::Type weight, int64_t, int64_t) const {
    LinearPlan plan{activation_type(weight)};
    plan.generated = target().arch != Arch::X86_64 && (weight == gguf::Type::F32 || weight == gguf::Type::BF16);
    plan.fuse_norm = target().arch == Arch::X86_64;  // the host QUANTIZE normalizes rows itself
    return plan;
}
bool Device::can_pack(gguf::Type, int64_t, int64_t) const { return false; }
bool Device::can_pack_experts(gguf::Type, int64_t, int64_t, int64_t) const { return false; }
bool Device::rows_read_packed() const { return false; }
size_t Device::packed_bytes(gguf::Type type, int64_t rows, int64_t cols) const { return size_t(rows) * gguf::row_bytes(type, cols).value_or(0); }
void Device::pack(gguf::Type, const void*, int64_t, int64_t, void*) { throw Error("[devices] " + name() + ": has no weight layout of its own"); }
gguf::Type Device::activation_type(gguf::Type weight) const { return cpu::host_activation_type(weight); }
std::vector<gguf::Type> Device::kv_cache_types() const { return {gguf::Type::F16, gguf::Type::F32, gguf::Type::Q8_0, gguf::Type::Q4_0}; }

const char* ops::name(Kind kind) {
    switch (kind) {
        case Kind::QUANTIZE: return "quantize";
        case Kind::LINEAR: return "linear";
        case Kind::LINEAR_EXPERTS: return "linear_experts";
        case Kind::EXPERT_PLAN: return "expert_plan";
        case Kind::ATTENTION: return "attention";
        case Kind::TOPK: return "topk";
        case Kind::ROWS: return "rows";
        case Kind::CONV1D: return "causal_conv1d";
        case Kind::DELTA_RULE: return "delta_rule";
        case Kind::PAGED_ATTENTION: return "paged_attention";
        case Kind::KV_STORE: return "kv_store";
    }
    return "?";
}

}  // namespace devices
