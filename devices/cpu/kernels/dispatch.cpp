// The public entry points: instruction-set detection, argument checks, and routing to the active
// variant's kernels or to the generic path (dequantize a tile of rows with gguf's type table, then
// multiply in F32).
#include "devices/cpu/kernels/kernels_impl.h"

#include <algorithm>
#include <cpuid.h>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace cpu_kernels {

using gguf::Type;

// ---- instruction sets ------------------------------------------------------------------------------

const char* isa_name(Isa isa) {
    switch (isa) {
        case Isa::SCALAR: return "scalar";
        case Isa::AVX2: return "avx2";
        case Isa::AVX512: return "avx512";
    }
    return "?";
}

bool isa_supported(Isa isa) {
    // libgcc's cpu model checks both cpuid and the OS-enabled register state (xgetbv).
    __builtin_cpu_init();
    switch (isa) {
        case Isa::SCALAR: return true;
        case Isa::AVX2:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
        case Isa::AVX512:
            return isa_supported(Isa::AVX2) && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512dq") &&
                   __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bf16");
    }
    return false;
}

Isa best_isa() {
    static const Isa best = isa_supported(Isa::AVX512) ? Isa::AVX512
                            : isa_supported(Isa::AVX2) ? Isa::AVX2
                                                       : Isa::SCALAR;
    return best;
}

// ---- prefetch ----------------------------------------------------------------------------------------

const char* prefetch_name(Prefetch p) { return p == Prefetch::L1 ? "l1" : "l2"; }

bool g_prefetch_l2 = false;  // set with the active variant (active_isa_ref)

Prefetch prefetch_level() {
    static const Prefetch level = [] {
        const char* env = std::getenv("TINYLLM_CPU_PREFETCH");
        if (!env || !*env) return amx_supported() ? Prefetch::L1 : Prefetch::L2;
        for (Prefetch p : {Prefetch::L1, Prefetch::L2})
            if (std::string(env) == prefetch_name(p)) return p;
        throw Error(std::string("[cpu_kernels] TINYLLM_CPU_PREFETCH=") + env + ": expected l1 or l2");
    }();
    return level;
}

namespace {

Isa isa_from_env() {
    const char* env = std::getenv("TINYLLM_CPU_ISA");
    if (!env || !*env) return best_isa();
    for (Isa isa : {Isa::SCALAR, Isa::AVX2, Isa::AVX512})
        if (std::string(env) == isa_name(isa)) {
            if (!isa_supported(isa))
                throw Error(std::string("[cpu_kernels] TINYLLM_CPU_ISA=") + env + ": not supported by this CPU");
            return isa;
        }
    throw Error(std::string("[cpu_kernels] TINYLLM_CPU_ISA=") + env + ": expected scalar, avx2 or avx512");
}

Isa& active_isa_ref() {
    static Isa isa = [] {
        g_prefetch_l2 = prefetch_level() == Prefetch::L2;
        return isa_from_env();
    }();
    return isa;
}

const Kernels& active_kernels() {
    switch (active_isa()) {
        case Isa::AVX512: return avx512::kernels;
        case Isa::AVX2: return avx2::kernels;
        case Isa::SCALAR: break;
    }
    return scalar::kernels;
}

}  // namespace

Isa active_isa() { return active_isa_ref(); }

void set_active_isa(Isa isa) {
    if (!isa_supported(isa)) throw Error(std::string("[cpu_kernels] ") + isa_name(isa) + ": not supported by this CPU");
    active_isa_ref() = isa;
}

// ---- AMX ---------------------------------------------------------------------------------------------

namespace {

// cpuid leaf 7 (AMX-TILE edx bit 24, AMX-INT8 bit 25), the OS saving the tile state (XCR0 bits 17, 18:
// XTILECFG, XTILEDATA), and Linux's per-process permission for the large tile data state, which it
// grants only on request (arch_prctl ARCH_REQ_XCOMP_PERM); without it the first tile instruction faults.
bool detect_amx() {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!(d & (1u << 22)) || !(d & (1u << 24)) || !(d & (1u << 25))) return false;  // AMX-BF16, -TILE, -INT8
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE: xgetbv usable
    uint32_t xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    if ((xcr0_lo & (3u << 17)) != (3u << 17)) return false;
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

bool& amx_enabled_ref() {
    static bool enabled = [] {
        const char* env = std::getenv("TINYLLM_CPU_AMX");
        if (env && std::string(env) == "0") return false;
        if (env && *env && std::string(env) != "1")
            throw Error(std::string("[cpu_kernels] TINYLLM_CPU_AMX=") + env + ": expected 0 or 1");
        return amx_supported();
    }();
    return enabled;
}

}  // namespace

bool amx_supported() {
    static const bool supported = isa_supported(Isa::AVX512) && detect_amx();
    return supported;
}

// The environment first: a bad TINYLLM_CPU_AMX is reported whichever variant runs.
bool amx_active() { return amx_enabled_ref() && active_isa() == Isa::AVX512; }

void set_amx_enabled(bool on) {
    if (on && !amx_supported()) throw Error("[cpu_kernels] AMX: not supported by this CPU and OS");
    amx_enabled_ref() = on;
}

// ---- activations -----------------------------------------------------------------------------------

namespace {

// Errors name the kernel and, where one is involved, the type. Messages are built only on failure:
// these checks run on every call.
[[noreturn]] void fail(const char* kernel, const std::string& detail) {
    throw Error(std::string("[cpu_kernels.") + kernel + "] " + detail);
}

std::string type_label(Type t) {
    const gguf::TypeTraits* traits = gguf::type_traits(static_cast<uint32_t>(t));
    return traits ? traits->name : "type id " + std::to_string(static_cast<uint32_t>(t));
}

}  // namespace

bool has_hand_kernel(Type t) {
    return t == Type::F32 || t == Type::F16 || t == Type::BF16 || quant_layout(t) != nullptr;
}

// The type table's activation format, where this CPU has a hand kernel for the type; F32 for the generic path.
Type activation_type(Type t) { return has_hand_kernel(t) ? gguf::type_traits(t).act_type : Type::F32; }

int64_t activation_row_bytes(Type weight_type, int64_t n_cols) {
    auto bytes = gguf::row_bytes(activation_type(weight_type), n_cols);
    if (!bytes || n_cols <= 0)
        fail("activation_row_bytes", type_label(weight_type) + ": n_cols " + std::to_string(n_cols) +
                                         " does not fit the activation block size");
    return static_cast<int64_t>(*bytes);
}

void rms_norm_row(const float* x, const float* w, int64_t n, float eps, float* out) { active_kernels().rms_norm(x, w, n, eps, out); }

void swiglu_row(const float* gate, const float* up, int64_t n, float* out) { active_kernels().swiglu(gate, up, n, out); }

void quantize_rows(Type act, const float* x, int64_t x_stride, int64_t n_cols, void* out, int64_t row_begin,
                   int64_t row_end) {
    auto error = [&](const std::string& detail) { fail("quantize_rows", type_label(act) + ": " + detail); };
    if (act != Type::F32 && act != Type::F16 && act != Type::BF16 && act != Type::Q8_0 && act != Type::Q8_1 &&
        act != Type::Q8_K && act != Type::Q4_0)
        error("not an activation or KV cache format (expected f32, f16, bf16, q8_0, q8_1, q8_K or q4_0)");
    if (n_cols <= 0 || !gguf::row_bytes(act, n_cols))
        error("n_cols " + std::to_string(n_cols) + " is not a positive multiple of the block size");
    if (row_begin < 0 || row_end < row_begin) error("bad row range");
    if (row_end == row_begin) return;
    if (!x || !out) error("null pointer");
    if (x_stride < n_cols) error("x_stride smaller than n_cols");
    const Kernels& k = act == Type::Q4_0 ? scalar::kernels : active_kernels();  // Q4_0: KV rows, a few per token
    k.quantize_rows(act, x, x_stride, n_cols, out, row_begin, row_end);
}

// ---- matrix products -------------------------------------------------------------------------------

void validate(const Matmul& m) {
    const gguf::TypeTraits* traits = gguf::type_traits(static_cast<uint32_t>(m.type));
    if (!traits) fail("matmul", "unknown weight type id " + std::to_string(static_cast<uint32_t>(m.type)));
    auto error = [&](const std::string& detail) { fail("matmul", std::string(traits->name) + ": " + detail); };
    if (!has_hand_kernel(m.type) && !traits->dequantize) error("no hand kernel and no dequantizer for the generic path");
    if (m.n_rows < 0 || m.n_tokens < 0) error("negative n_rows or n_tokens");
    if (m.n_cols <= 0 || m.n_cols % traits->block_size != 0)
        error("n_cols " + std::to_string(m.n_cols) + " is not a positive multiple of " + std::to_string(traits->block_size));
    if (!gguf::row_bytes(activation_type(m.type), m.n_cols))
        error("n_cols " + std::to_string(m.n_cols) + " does not fit the activation block size");
    if (m.y_stride < m.n_rows) error("y_stride " + std::to_string(m.y_stride) + " < n_rows");
    if (m.n_rows > 0 && m.n_tokens > 0 && (!m.w || !m.x || !m.y)) error("null pointer");
    if (m.packed && !can_pack(m.type, m.n_rows, m.n_cols)) error("packed weights must be pack_rows() panels of a type with a panel format, 16·k rows");
}

void matmul_generic(const Matmul& m, gguf::DequantizeFn dequantize, int64_t row_begin, int64_t row_end) {
    const Kernels& k = active_kernels();
    const size_t row_bytes = *gguf::row_bytes(m.type, m.n_cols);
    const int64_t tile_rows = kMatmulRowAlign;
    auto tile = static_cast<float*>(scratch(ScratchSlot::TILE, sizeof(float) * tile_rows * m.n_cols));
    for (int64_t r0 = row_begin; r0 < row_end; r0 += tile_rows) {
        const int64_t n = std::min(tile_rows, row_end - r0);
        for (int64_t r = 0; r < n; r++)
            dequantize(static_cast<const uint8_t*>(m.w) + (r0 + r) * row_bytes, tile + r * m.n_cols, m.n_cols);
        Matmul part = m;
        part.type = Type::F32, part.w = tile, part.n_rows = n, part.y = m.y + r0;
        k.matmul(part, 0, n);
    }
}

void matmul(const Matmul& m, int64_t row_begin, int64_t row_end) {
    validate(m);
    if (row_begin < 0 || row_end < row_begin || row_end > m.n_rows)
        fail("matmul", "row range [" + std::to_string(row_begin) + ", " + std::to_string(row_end) + ") outside 0.." +
                           std::to_string(m.n_rows));
    if (row_end == row_begin || m.n_tokens == 0) return;
    if (m.packed && active_isa() == Isa::SCALAR)
        matmul_packed_rows(m, row_begin, row_end, active_kernels());
    else if (has_hand_kernel(m.type))
        active_kernels().matmul(m, row_begin, row_end);
    else
        matmul_generic(m, gguf::type_traits(m.type).dequantize, row_begin, row_end);
}

// ---- attention -------------------------------------------------------------------------------------

void validate(const Attention& a) {
    auto error = [](const std::string& detail) { fail("attention", detail); };
    const bool blocks = a.kv_type == Type::Q8_0 || a.kv_type == Type::Q4_0;
    if (a.kv_type != Type::F32 && a.kv_type != Type::F16 && !blocks)
        error("KV cache type " + type_label(a.kv_type) + ": expected f32, f16, q8_0 or q4_0");
    const int64_t block = blocks ? gguf::type_traits(a.kv_type).block_size : 1;
    for (int64_t n : {a.head_dim_k, a.head_dim_v, a.k_pos_stride, a.k_head_stride, a.v_pos_stride, a.v_head_stride})
        if (n % block != 0)  // every row a kernel reads starts at a block and is whole blocks
            error("KV cache type " + type_label(a.kv_type) + ": head dims and strides must be multiples of its " + std::to_string(block) +
                  "-value blocks, got " + std::to_string(n));
    if (a.n_tokens < 0 || a.start_pos < 0) error("negative n_tokens or start_pos");
    if (a.n_head <= 0 || a.n_head_kv <= 0 || a.n_head % a.n_head_kv != 0)
        error("n_head " + std::to_string(a.n_head) + " is not a positive multiple of n_head_kv " + std::to_string(a.n_head_kv));
    if (a.head_dim_k <= 0 || a.head_dim_v <= 0) error("head dims must be positive");
    if (a.window < 0) error("negative window");
    if (a.n_tokens > 0 && (!a.q || !a.k || !a.v || !a.out)) error("null pointer");
    if (a.block_table && (!a.pos || !a.seq || a.n_seqs <= 0 || a.blocks_per_seq <= 0 || a.block_size <= 0 || a.n_blocks <= 0))
        error("paged: null pos/seq or an empty block table");
}

void attention(const Attention& a, int64_t pair_begin, int64_t pair_end) {
    validate(a);
    if (pair_begin < 0 || pair_end < pair_begin || pair_end > a.n_tokens * a.n_head)
        fail("attention", "pair range [" + std::to_string(pair_begin) + ", " + std::to_string(pair_end) + ") outside 0.." +
                              std::to_string(a.n_tokens * a.n_head));
    if (pair_end == pair_begin) return;
    active_kernels().attention(a, pair_begin, pair_end);
}

size_t bytes_per_row(Type t, int64_t n) { return static_cast<size_t>(*gguf::row_bytes(t, n)); }

KvView key_view(const Attention& a) {  // whole blocks of the cache type: validate()
    return {static_cast<const uint8_t*>(a.k), int64_t(bytes_per_row(a.kv_type, a.k_pos_stride)),
            int64_t(bytes_per_row(a.kv_type, a.k_head_stride)), int64_t(bytes_per_row(a.kv_type, a.head_dim_k))};
}

KvView value_view(const Attention& a) {
    return {static_cast<const uint8_t*>(a.v), int64_t(bytes_per_row(a.kv_type, a.v_pos_stride)),
            int64_t(bytes_per_row(a.kv_type, a.v_head_stride)), int64_t(bytes_per_row(a.kv_type, a.head_dim_v))};
}

// ---- per-thread scratch ----------------------------------------------------------------------------

namespace {

struct ScratchBuffers {
    void* ptr[static_cast<int>(ScratchSlot::COUNT)] = {};
    size_t size[static_cast<int>(ScratchSlot::COUNT)] = {};
    uint64_t key[static_cast<int>(ScratchSlot::COUNT)] = {};  // of the contents; 0: unnamed
    ~ScratchBuffers() {
        for (void* p : ptr) std::free(p);
    }
};

thread_local ScratchBuffers buffers;

}  // namespace

void* scratch_keyed(ScratchSlot slot, size_t bytes, uint64_t key, bool& kept) {
    const int i = static_cast<int>(slot);
    kept = key != 0 && buffers.key[i] == key && buffers.size[i] >= bytes;
    void* p = scratch(slot, bytes);
    buffers.key[i] = key;
    return p;
}

void* scratch(ScratchSlot slot, size_t bytes) {
    const int i = static_cast<int>(slot);
    buffers.key[i] = 0;
    if (buffers.size[i] < bytes) {
        std::free(buffers.ptr[i]);
        const size_t rounded = (bytes + 63) / 64 * 64;  // aligned_alloc wants a multiple of the alignment
        buffers.ptr[i] = std::aligned_alloc(64, rounded);
        if (!buffers.ptr[i]) {
            buffers.size[i] = 0;
            throw std::bad_alloc();
        }
        buffers.size[i] = rounded;
    }
    return buffers.ptr[i];
}

}  // namespace cpu_kernels
