// The kernel table: for each kernel its source, kernarg struct and waves, how to validate its arguments,
// the launch shape it expects and the byte extent of every buffer it touches.
#include "kernels_amd/kernels_amd.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace tinyllm::amd {
namespace {

enum class Kind { Q8_QUANTIZE, GEMV_Q8, GEMV_F16, GEMM, ATTN_PARTIAL, ATTN_COMBINE, KV_STORE };

struct Entry {
    KernelInfo info;
    Kind kind;
    gguf::Type weight = gguf::Type::F32;  // weight type of GEMVs/GEMMs (geometry: the type table)
    uint32_t head_dim = 0;                // attention partials
};

constexpr KernelInfo info(const char* name, const char* source, uint32_t size, uint32_t waves) {
    return {name, source, size, waves};
}

const Entry ENTRIES[] = {
    {info("q8_quantize", "q8_quantize", sizeof(Q8QuantizeArgs), Q8_QUANTIZE_WAVES), Kind::Q8_QUANTIZE},
    {info("gemv_q4_k_q8", "gemv_q8", sizeof(GemvQ8Args), GEMV_WAVES), Kind::GEMV_Q8, gguf::Type::Q4_K},
    {info("gemv_q5_k_q8", "gemv_q8", sizeof(GemvQ8Args), GEMV_WAVES), Kind::GEMV_Q8, gguf::Type::Q5_K},
    {info("gemv_q6_k_q8", "gemv_q8", sizeof(GemvQ8Args), GEMV_WAVES), Kind::GEMV_Q8, gguf::Type::Q6_K},
    {info("gemv_iq4_xs_q8", "gemv_q8", sizeof(GemvQ8Args), GEMV_WAVES), Kind::GEMV_Q8, gguf::Type::IQ4_XS},
    {info("gemv_q8_0_q8", "gemv_q8", sizeof(GemvQ8Args), GEMV_WAVES), Kind::GEMV_Q8, gguf::Type::Q8_0},
    {info("gemv_q4_0_q8", "gemv_q8", sizeof(GemvQ8Args), GEMV_WAVES), Kind::GEMV_Q8, gguf::Type::Q4_0},
    {info("gemv_f16", "gemv_f16", sizeof(GemvF16Args), GEMV_WAVES), Kind::GEMV_F16, gguf::Type::F16},
    {info("gemm_f16", "gemm", sizeof(GemmArgs), GEMM_WAVES), Kind::GEMM, gguf::Type::F16},
    {info("gemm_q4_k", "gemm", sizeof(GemmArgs), GEMM_WAVES), Kind::GEMM, gguf::Type::Q4_K},
    {info("gemm_q5_k", "gemm", sizeof(GemmArgs), GEMM_WAVES), Kind::GEMM, gguf::Type::Q5_K},
    {info("gemm_q6_k", "gemm", sizeof(GemmArgs), GEMM_WAVES), Kind::GEMM, gguf::Type::Q6_K},
    {info("gemm_iq4_xs", "gemm", sizeof(GemmArgs), GEMM_WAVES), Kind::GEMM, gguf::Type::IQ4_XS},
    {info("gemm_q8_0", "gemm", sizeof(GemmArgs), GEMM_WAVES), Kind::GEMM, gguf::Type::Q8_0},
    {info("gemm_q4_0", "gemm", sizeof(GemmArgs), GEMM_WAVES), Kind::GEMM, gguf::Type::Q4_0},
    {info("attn_decode_partial_d8", "attention_decode", sizeof(AttnDecodeArgs), ATTN_WAVES), Kind::ATTN_PARTIAL, {}, 8},
    {info("attn_decode_partial_d16", "attention_decode", sizeof(AttnDecodeArgs), ATTN_WAVES), Kind::ATTN_PARTIAL, {}, 16},
    {info("attn_decode_partial_d32", "attention_decode", sizeof(AttnDecodeArgs), ATTN_WAVES), Kind::ATTN_PARTIAL, {}, 32},
    {info("attn_decode_partial_d64", "attention_decode", sizeof(AttnDecodeArgs), ATTN_WAVES), Kind::ATTN_PARTIAL, {}, 64},
    {info("attn_decode_partial_d128", "attention_decode", sizeof(AttnDecodeArgs), ATTN_WAVES), Kind::ATTN_PARTIAL, {}, 128},
    {info("attn_decode_partial_d256", "attention_decode", sizeof(AttnDecodeArgs), ATTN_WAVES), Kind::ATTN_PARTIAL, {}, 256},
    {info("attn_decode_combine", "attention_decode", sizeof(AttnCombineArgs), ATTN_COMBINE_WAVES), Kind::ATTN_COMBINE},
    {info("kv_store_f16", "attention_decode", sizeof(KvStoreArgs), KV_STORE_WAVES), Kind::KV_STORE},
};

const Entry& entry(std::string_view name) {
    for (const Entry& e : ENTRIES)
        if (e.info.name == name) return e;
    throw KernelError("[kernels_amd] unknown kernel '" + std::string(name) + "'");
}

template <class Args>
Args read_args(const Entry& e, std::span<const uint8_t> kernarg) {
    if (kernarg.size() < sizeof(Args))
        throw KernelError("[kernels_amd] " + std::string(e.info.name) + ": kernarg of " + std::to_string(kernarg.size()) +
                          " bytes, need " + std::to_string(sizeof(Args)));
    Args a;
    std::memcpy(&a, kernarg.data(), sizeof(Args));
    return a;
}

void require(const Entry& e, bool ok, const std::string& what) {
    if (!ok) throw KernelError("[kernels_amd] " + std::string(e.info.name) + ": " + what);
}
std::string num(uint64_t v) { return std::to_string(v); }
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t round_up4(uint64_t bytes) { return (bytes + 3) / 4 * 4; }

// Weight block geometry as the kernel reads it: the type table's, except Q6_K (repacked).
uint32_t block_elems(const Entry& e) { return static_cast<uint32_t>(gguf::type_traits(e.weight).block_size); }
uint64_t block_bytes(const Entry& e) {
    return e.weight == gguf::Type::Q6_K ? Q6_K_REPACKED_BYTES : gguf::type_traits(e.weight).bytes_per_block;
}

// Bytes of n_out rows of n_in weights (the kernels may read the last word in full).
uint64_t weight_bytes(const Entry& e, uint32_t n_out, uint32_t n_in) {
    return round_up4(uint64_t{n_out} * (n_in / block_elems(e)) * block_bytes(e));
}

void check_weight_shape(const Entry& e, uint32_t n_out, uint32_t n_in, uint32_t n_tokens, uint32_t n_in_multiple) {
    require(e, n_out >= 1 && n_tokens >= 1, "n_out and n_tokens must be at least 1");
    uint32_t multiple = std::max(block_elems(e), n_in_multiple);
    require(e, n_in >= multiple && n_in % multiple == 0, "n_in " + num(n_in) + " is not a positive multiple of " + num(multiple));
}

LaunchDims dims(uint64_t groups_x, uint64_t groups_y, uint32_t block, const Entry& e) {
    require(e, groups_x * block <= UINT32_MAX && groups_y <= UINT32_MAX, "grid exceeds 2^32 work-items");
    return {{static_cast<uint32_t>(groups_x * block), static_cast<uint32_t>(groups_y), 1}, {block, 1, 1}};
}

}  // namespace

const std::vector<KernelInfo>& kernels() {
    static const std::vector<KernelInfo> list = [] {
        std::vector<KernelInfo> v;
        for (const Entry& e : ENTRIES) v.push_back(e.info);
        return v;
    }();
    return list;
}

const KernelInfo& kernel_info(std::string_view name) { return entry(name).info; }

void validate(std::string_view kernel, std::span<const uint8_t> kernarg) {
    const Entry& e = entry(kernel);
    switch (e.kind) {
    case Kind::Q8_QUANTIZE: {
        auto a = read_args<Q8QuantizeArgs>(e, kernarg);
        require(e, a.n_tokens >= 1, "n_tokens must be at least 1");
        require(e, a.n_in >= Q8_GROUP && a.n_in % Q8_GROUP == 0, "n_in " + num(a.n_in) + " is not a positive multiple of 32");
        break;
    }
    case Kind::GEMV_Q8: {
        auto a = read_args<GemvQ8Args>(e, kernarg);
        check_weight_shape(e, a.n_out, a.n_in, a.n_tokens, Q8_GROUP);
        break;
    }
    case Kind::GEMV_F16: {
        auto a = read_args<GemvF16Args>(e, kernarg);
        check_weight_shape(e, a.n_out, a.n_in, a.n_tokens, 8);
        break;
    }
    case Kind::GEMM: {
        auto a = read_args<GemmArgs>(e, kernarg);
        check_weight_shape(e, a.n_out, a.n_in, a.n_tokens, 32);
        break;
    }
    case Kind::ATTN_PARTIAL: {
        auto a = read_args<AttnDecodeArgs>(e, kernarg);
        require(e, a.n_heads >= 1 && a.n_kv_heads >= 1 && a.n_heads % a.n_kv_heads == 0,
                "n_heads " + num(a.n_heads) + " is not a positive multiple of n_kv_heads " + num(a.n_kv_heads));
        require(e, a.kv_head_stride % 2 == 0 && a.pos_stride % 2 == 0, "KV strides must be even (4-byte aligned rows)");
        if (!a.block_table) {
            require(e, a.kv_len >= 1, "kv_len must be at least 1");
            require(e, a.n_chunks == ceil_div(a.kv_len, ATTN_CHUNK),
                    "n_chunks " + num(a.n_chunks) + " is not ceil(kv_len / " + num(ATTN_CHUNK) + ") = " + num(ceil_div(a.kv_len, ATTN_CHUNK)));
            break;
        }
        require(e, a.n_tokens >= 1 && a.n_seqs >= 1 && a.blocks_per_seq >= 1 && a.block_size >= 1 && a.n_blocks >= 1,
                "n_tokens, n_seqs, blocks_per_seq, block_size and n_blocks must be at least 1");
        const uint64_t cap = uint64_t{a.blocks_per_seq} * a.block_size;
        require(e, cap <= INT32_MAX, "blocks_per_seq * block_size must fit an i32 position");
        require(e, a.n_chunks == ceil_div(cap, ATTN_CHUNK),
                "n_chunks " + num(a.n_chunks) + " is not ceil(blocks_per_seq * block_size / " + num(ATTN_CHUNK) + ") = " + num(ceil_div(cap, ATTN_CHUNK)));
        break;
    }
    case Kind::ATTN_COMBINE: {
        auto a = read_args<AttnCombineArgs>(e, kernarg);
        require(e, a.n_heads >= 1 && a.n_chunks >= 1 && a.head_dim >= 1, "n_heads, n_chunks and head_dim must be at least 1");
        break;
    }
    case Kind::KV_STORE: {
        auto a = read_args<KvStoreArgs>(e, kernarg);
        require(e, a.n_tokens >= 1 && a.row >= 1 && a.n_rows >= 1, "n_tokens, row and n_rows must be at least 1");
        break;
    }
    }
}

LaunchDims launch_dims(std::string_view kernel, std::span<const uint8_t> kernarg, Target target) {
    validate(kernel, kernarg);
    const Entry& e = entry(kernel);
    uint32_t block = e.info.waves * wave_size(target);
    switch (e.kind) {
    case Kind::Q8_QUANTIZE: {
        auto a = read_args<Q8QuantizeArgs>(e, kernarg);
        return dims(ceil_div(uint64_t{a.n_tokens} * a.n_in / 4, block), 1, block, e);
    }
    case Kind::GEMV_Q8: {
        auto a = read_args<GemvQ8Args>(e, kernarg);
        return dims(ceil_div(a.n_out, GEMV_WAVES), a.n_tokens, block, e);
    }
    case Kind::GEMV_F16: {
        auto a = read_args<GemvF16Args>(e, kernarg);
        return dims(ceil_div(a.n_out, GEMV_WAVES), a.n_tokens, block, e);
    }
    case Kind::GEMM: {
        auto a = read_args<GemmArgs>(e, kernarg);
        return dims(ceil_div(a.n_out, GEMM_TILE), ceil_div(a.n_tokens, GEMM_TILE), block, e);
    }
    case Kind::ATTN_PARTIAL: {
        auto a = read_args<AttnDecodeArgs>(e, kernarg);
        return dims(a.n_chunks, uint64_t{a.n_kv_heads} * (a.block_table ? a.n_tokens : 1), block, e);
    }
    case Kind::ATTN_COMBINE: {
        auto a = read_args<AttnCombineArgs>(e, kernarg);
        return dims(a.n_heads, 1, block, e);
    }
    case Kind::KV_STORE: {
        auto a = read_args<KvStoreArgs>(e, kernarg);
        return dims(a.n_tokens, 1, block, e);
    }
    }
    return {};
}

std::vector<BufferUse> buffers(std::string_view kernel, std::span<const uint8_t> kernarg) {
    validate(kernel, kernarg);
    const Entry& e = entry(kernel);
    auto f32 = [](uint64_t n) { return n * 4; };
    switch (e.kind) {
    case Kind::Q8_QUANTIZE: {
        auto a = read_args<Q8QuantizeArgs>(e, kernarg);
        uint64_t n = uint64_t{a.n_tokens} * a.n_in;
        return {{"x", offsetof(Q8QuantizeArgs, x), f32(n), false},
                {"xq", offsetof(Q8QuantizeArgs, xq), n, true},
                {"xscale", offsetof(Q8QuantizeArgs, xscale), f32(n / 32), true},
                {"xsum", offsetof(Q8QuantizeArgs, xsum), f32(n / 16), true}};
    }
    case Kind::GEMV_Q8: {
        auto a = read_args<GemvQ8Args>(e, kernarg);
        uint64_t n = uint64_t{a.n_tokens} * a.n_in;
        return {{"w", offsetof(GemvQ8Args, w), weight_bytes(e, a.n_out, a.n_in), false},
                {"xq", offsetof(GemvQ8Args, xq), n, false},
                {"xscale", offsetof(GemvQ8Args, xscale), f32(n / 32), false},
                {"xsum", offsetof(GemvQ8Args, xsum), f32(n / 16), false},
                {"y", offsetof(GemvQ8Args, y), f32(uint64_t{a.n_tokens} * a.n_out), true}};
    }
    case Kind::GEMV_F16: {
        auto a = read_args<GemvF16Args>(e, kernarg);
        return {{"w", offsetof(GemvF16Args, w), weight_bytes(e, a.n_out, a.n_in), false},
                {"x", offsetof(GemvF16Args, x), f32(uint64_t{a.n_tokens} * a.n_in), false},
                {"y", offsetof(GemvF16Args, y), f32(uint64_t{a.n_tokens} * a.n_out), true}};
    }
    case Kind::GEMM: {
        auto a = read_args<GemmArgs>(e, kernarg);
        return {{"w", offsetof(GemmArgs, w), weight_bytes(e, a.n_out, a.n_in), false},
                {"x", offsetof(GemmArgs, x), uint64_t{a.n_tokens} * a.n_in * 2, false},
                {"y", offsetof(GemmArgs, y), f32(uint64_t{a.n_tokens} * a.n_out), true}};
    }
    case Kind::ATTN_PARTIAL: {
        auto a = read_args<AttnDecodeArgs>(e, kernarg);
        const uint64_t last_row = a.block_table ? uint64_t{a.n_blocks} * a.block_size - 1 : a.kv_len - 1;
        uint64_t kv = (uint64_t{a.n_kv_heads - 1} * a.kv_head_stride + last_row * a.pos_stride + e.head_dim) * 2;
        const uint64_t tokens = a.block_table ? a.n_tokens : 1, rows = tokens * a.n_heads * a.n_chunks;
        std::vector<BufferUse> out = {{"q", offsetof(AttnDecodeArgs, q), f32(tokens * a.n_heads * e.head_dim), false},
                                      {"k", offsetof(AttnDecodeArgs, k), kv, false},
                                      {"v", offsetof(AttnDecodeArgs, v), kv, false},
                                      {"partial", offsetof(AttnDecodeArgs, partial), f32(rows * e.head_dim), true},
                                      {"stats", offsetof(AttnDecodeArgs, stats), f32(rows * 2), true}};
        if (a.block_table) {
            out.push_back({"pos", offsetof(AttnDecodeArgs, pos), f32(a.n_tokens), false});
            out.push_back({"seq", offsetof(AttnDecodeArgs, seq), f32(a.n_tokens), false});
            out.push_back({"block_table", offsetof(AttnDecodeArgs, block_table), f32(uint64_t{a.n_seqs} * a.blocks_per_seq), false});
        }
        return out;
    }
    case Kind::ATTN_COMBINE: {
        auto a = read_args<AttnCombineArgs>(e, kernarg);
        uint64_t rows = uint64_t{a.n_heads} * a.n_chunks;
        return {{"partial", offsetof(AttnCombineArgs, partial), f32(rows * a.head_dim), false},
                {"stats", offsetof(AttnCombineArgs, stats), f32(rows * 2), false},
                {"out", offsetof(AttnCombineArgs, out), f32(uint64_t{a.n_heads} * a.head_dim), true}};
    }
    case Kind::KV_STORE: {
        auto a = read_args<KvStoreArgs>(e, kernarg);
        return {{"x", offsetof(KvStoreArgs, x), f32(uint64_t{a.n_tokens} * a.row), false},
                {"slot", offsetof(KvStoreArgs, slot), f32(a.n_tokens), false},
                {"pool", offsetof(KvStoreArgs, pool), uint64_t{a.n_rows} * a.row * 2, true},
                {"out", offsetof(KvStoreArgs, out), f32(a.n_tokens), true}};
    }
    }
    return {};
}

std::optional<std::string_view> gemv_kernel_for(gguf::Type weight_type) {
    for (const Entry& e : ENTRIES)
        if ((e.kind == Kind::GEMV_Q8 || e.kind == Kind::GEMV_F16) && weight_type == e.weight) return e.info.name;
    return std::nullopt;
}

std::optional<std::string_view> gemm_kernel_for(gguf::Type weight_type) {
    for (const Entry& e : ENTRIES)
        if (e.kind == Kind::GEMM && weight_type == e.weight) return e.info.name;
    return std::nullopt;
}

std::optional<std::string_view> attention_partial_kernel_for(uint32_t head_dim) {
    for (const Entry& e : ENTRIES)
        if (e.kind == Kind::ATTN_PARTIAL && e.head_dim == head_dim) return e.info.name;
    return std::nullopt;
}

}  // namespace tinyllm::amd
