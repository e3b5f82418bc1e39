// The AMD device's hot ops (devices/ops.h) over kernels_amd's code objects, queued with
// Device::launch_hand_kernel on device addresses. linear: decode GEMVs over GGUF blocks against q8
// activations (quantized once per input, shared by every projection of it), an fp16 GEMV, WMMA/MFMA GEMMs
// for prefill. attention: the split flash-decode (partial over 64-key chunks + combine) per query token;
// paged attention: the same kernels over a mixed batch through the block table; kv_store into an fp16 pool.
// Everything else, and what these kernels do not cover, runs the host implementations over the CPU mapping.
#include "devices/amd/ops_impl.h"
#include "devices/cpu/cpu_impl.h"

#include "kernels_amd/kernels_amd.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace amd {

namespace {

namespace ka = tinyllm::amd;
namespace ops = devices::ops;
using gguf::Type;

OpsDevice& gpu(devices::Device& d) { return static_cast<OpsDevice&>(d); }

// Pointers in the argument structs are GPU addresses here.
uint64_t va(const void* p) { return reinterpret_cast<uint64_t>(p); }
template <class T> T* at(uint64_t address, uint64_t offset = 0) { return reinterpret_cast<T*>(address + offset); }

uint32_t u32(int64_t v, const char* what) {
    if (v < 0 || v > int64_t(UINT32_MAX)) throw devices::Error(std::string("[devices] AMD: ") + what + " " + std::to_string(v) + " does not fit the kernel's u32");
    return uint32_t(v);
}

// q8 activations of `tokens` tokens of k values: the int8 values (tokens, k), a scale per 32 values, a sum
// per 16. Quantize and linear both lay them out from the launch's token count.
struct Q8Layout {
    uint64_t scale, sum, bytes;
};
Q8Layout q8_layout(int64_t tokens, int64_t k) {
    uint64_t n = uint64_t(tokens) * uint64_t(k);
    return {n, n + n / 8, n + n / 8 + n / 4};
}

void q8_quantize(devices::Device& dev, const ops::Quantize& a) {
    Q8Layout l = q8_layout(a.rows, a.n_cols);
    ka::Q8QuantizeArgs k{};
    k.x = a.x;
    k.xq = at<uint32_t>(va(a.out));
    k.xscale = at<float>(va(a.out), l.scale);
    k.xsum = at<float>(va(a.out), l.sum);
    k.n_tokens = u32(a.rows, "tokens");
    k.n_in = u32(a.n_cols, "n_in");
    dev.launch_hand_kernel("q8_quantize", ka::kernarg_bytes(k));
}

// The weights as the kernels read them: Q6_K in the device's layout (OpsDevice::pack), converted per
// launch when the weight was not laid out at load.
const uint32_t* weights(devices::Device& dev, const ops::Linear& a) {
    if (a.type != Type::Q6_K || a.packed) return static_cast<const uint32_t*>(a.w);
    const size_t blocks = size_t(a.N * a.K) / gguf::type_traits(Type::Q6_K).block_size;
    auto repack = [](const void* in, size_t bytes, void* out) {
        std::vector<uint8_t> r = ka::repack_q6_k({static_cast<const uint8_t*>(in), bytes});
        std::memcpy(out, r.data(), r.size());
    };
    return at<const uint32_t>(gpu(dev).converted(va(a.w), blocks * ka::Q6_K_BYTES, blocks * ka::Q6_K_REPACKED_BYTES, repack));
}

void gemv_q8(devices::Device& dev, const ops::Linear& a) {
    Q8Layout l = q8_layout(a.T, a.K);
    ka::GemvQ8Args k{};
    k.w = weights(dev, a);
    k.xq = at<const uint32_t>(va(a.x));
    k.xscale = at<const float>(va(a.x), l.scale);
    k.xsum = at<const float>(va(a.x), l.sum);
    k.y = a.y;
    k.n_out = u32(a.N, "n_out");
    k.n_in = u32(a.K, "n_in");
    k.n_tokens = u32(a.T, "tokens");
    dev.launch_hand_kernel(std::string(*ka::gemv_kernel_for(a.type)), ka::kernarg_bytes(k));
}

void gemv_f16(devices::Device& dev, const ops::Linear& a) {
    ka::GemvF16Args k{};
    k.w = static_cast<const uint16_t*>(a.w);
    k.x = static_cast<const float*>(a.x);
    k.y = a.y;
    k.n_out = u32(a.N, "n_out");
    k.n_in = u32(a.K, "n_in");
    k.n_tokens = u32(a.T, "tokens");
    dev.launch_hand_kernel("gemv_f16", ka::kernarg_bytes(k));
}

// x (T, K) f16 on the matrix cores.
void gemm(devices::Device& dev, const ops::Linear& a) {
    ka::GemmArgs k{};
    k.w = weights(dev, a);
    k.x = static_cast<const uint16_t*>(a.x);
    k.y = a.y;
    k.n_out = u32(a.N, "n_out");
    k.n_in = u32(a.K, "n_in");
    k.n_tokens = u32(a.T, "tokens");
    dev.launch_hand_kernel(std::string(*ka::gemm_kernel_for(a.type)), ka::kernarg_bytes(k));
}

// With sinks (which the kernels lack): the host implementation over the CPU mapping, for both forms.
template <class A> void host_attention(devices::Device& dev, const A& a) {
    OpsDevice& g = gpu(dev);
    auto host = [&](auto* p) { return static_cast<decltype(p)>(g.host_address(va(p))); };
    A h = a;
    h.q = host(a.q), h.k = host(a.k), h.v = host(a.v), h.sinks = host(a.sinks), h.out = host(a.out);
    if constexpr (std::is_same_v<A, ops::PagedAttention>) h.pos = host(a.pos), h.seq = host(a.seq), h.block_table = host(a.block_table);
    devices::cpu::host_op(A::KIND, a.kv_type).run(dev, &h);
}

// The split decode's scratch: partial sums for `rows` (token, head) rows of n_chunks chunks, then their stats.
struct DecodeScratch {
    uint64_t partial, stats;
};
DecodeScratch decode_scratch(devices::Device& dev, uint64_t rows, uint64_t n_chunks, int64_t D) {
    const uint64_t partial_bytes = (rows * n_chunks * uint64_t(D) * 4 + 255) / 256 * 256;
    const uint64_t base = gpu(dev).scratch(partial_bytes + rows * n_chunks * 2 * 4);
    return {base, base + partial_bytes};
}

// The partial kernel's arguments both attention forms share, for the query tokens from token0 on.
template <class A> ka::AttnDecodeArgs decode_args(const A& a, const DecodeScratch& s, int64_t token0, uint64_t n_chunks) {
    ka::AttnDecodeArgs p{};
    p.q = at<const float>(va(a.q), uint64_t(token0 * a.H * a.Dk) * 4);
    p.k = static_cast<const uint16_t*>(a.k);
    p.v = static_cast<const uint16_t*>(a.v);
    p.partial = at<float>(s.partial);
    p.stats = at<float>(s.stats);
    p.n_heads = u32(a.H, "heads");
    p.n_kv_heads = u32(a.Hkv, "KV heads");
    p.n_chunks = u32(int64_t(n_chunks), "chunks");
    p.kv_head_stride = u32(a.Dk, "head size");
    p.pos_stride = u32(a.Hkv * a.Dk, "KV row");
    p.scale = a.scale;
    return p;
}

// The partial kernel, then the combine over its (token, head) rows into out from token0 on.
template <class A> void split_decode(devices::Device& dev, const A& a, const ka::AttnDecodeArgs& p, int64_t token0, int64_t n_tokens) {
    dev.launch_hand_kernel(std::string(*ka::attention_partial_kernel_for(p.kv_head_stride)), ka::kernarg_bytes(p));
    ka::AttnCombineArgs c{};
    c.partial = p.partial;
    c.stats = p.stats;
    c.out = at<float>(va(a.out), uint64_t(token0 * a.H * a.Dk) * 4);
    c.n_heads = u32(n_tokens * a.H, "token heads");  // the combine's rows are (token, head)
    c.n_chunks = p.n_chunks;
    c.head_dim = p.kv_head_stride;
    dev.launch_hand_kernel("attn_decode_combine", ka::kernarg_bytes(c));
}

// Query t sees positions 0..start+t: one split decode each. Queued kernels run in order, so every token
// (and every layer) reuses the partial sums' scratch without waiting.
void attention(devices::Device& dev, const ops::Attention& a) {
    if (a.sinks) return host_attention(dev, a);
    const int64_t start = std::min(a.start_pos, a.C - a.T);  // never past the cache
    const DecodeScratch s = decode_scratch(dev, uint64_t(a.H), (uint64_t(a.C) + ka::ATTN_CHUNK - 1) / ka::ATTN_CHUNK, a.Dk);
    for (int64_t t = 0; t < a.T; t++) {
        const uint32_t kv_len = u32(start + t + 1, "kv length");
        ka::AttnDecodeArgs p = decode_args(a, s, t, (kv_len + ka::ATTN_CHUNK - 1) / ka::ATTN_CHUNK);
        p.kv_len = kv_len;
        split_decode(dev, a, p, t, 1);
    }
}

// The kernels' own implementation of a launch of `a`, or an empty Impl.
ops::Impl linear_kernel(const ops::Linear& a) {
    if (a.H != 1) return {};
    if (a.act == Q8_ACTIVATIONS && ka::gemv_kernel_for(a.type)) return ops::impl<ops::Linear, gemv_q8>(false, "amd_gemv_q8");
    if (a.act == Type::F16 && ka::gemm_kernel_for(a.type) && a.K % 32 == 0) return ops::impl<ops::Linear, gemm>(false, "amd_gemm");
    if (a.act == Type::F32 && a.type == Type::F16 && a.K % 8 == 0) return ops::impl<ops::Linear, gemv_f16>(false, "amd_gemv_f16");
    return {};
}

ops::Impl attention_kernel(const ops::Attention& a) {
    const bool fits = a.kv_type == Type::F16 && a.window == 0 && a.Dk == a.Dv && a.Dk > 0 && a.v_head_stride == a.Dv &&
                      a.v_pos_stride == a.Hkv * a.Dv && ka::attention_partial_kernel_for(uint32_t(a.Dk));
    return fits ? ops::impl<ops::Attention, attention>(false, "amd_attention") : ops::Impl{};
}

// The same kernels over a mixed batch, paged: each token reads its own sequence's keys through the block
// table. Chunks cover a whole sequence (the host does not read the positions), so the partial sums of
// a launch take tokens x heads x chunks x D floats: launches take as many tokens as fit 64 MB of scratch.
void paged_attention(devices::Device& dev, const ops::PagedAttention& a) {
    if (a.sinks) return host_attention(dev, a);
    const uint64_t cap = uint64_t(a.MB) * uint64_t(a.BS), n_chunks = (cap + ka::ATTN_CHUNK - 1) / ka::ATTN_CHUNK;
    const uint64_t per_token = uint64_t(a.H) * n_chunks * (uint64_t(a.Dk) + 2) * 4;
    const int64_t step = std::clamp<int64_t>(int64_t((uint64_t(64) << 20) / per_token), 1, a.T);
    const DecodeScratch s = decode_scratch(dev, uint64_t(step) * uint64_t(a.H), n_chunks, a.Dk);
    for (int64_t t0 = 0; t0 < a.T; t0 += step) {
        const int64_t n = std::min(step, a.T - t0);
        ka::AttnDecodeArgs p = decode_args(a, s, t0, n_chunks);
        p.pos = a.pos + t0;
        p.seq = a.seq + t0;
        p.block_table = a.block_table;
        p.n_tokens = u32(n, "tokens");
        p.n_seqs = u32(a.S, "sequences");
        p.blocks_per_seq = u32(a.MB, "blocks per sequence");
        p.block_size = u32(a.BS, "block size");
        p.n_blocks = u32(a.n_blocks, "blocks");
        split_decode(dev, a, p, t0, n);
    }
}

void kv_store(devices::Device& dev, const ops::KvStore& a) {
    ka::KvStoreArgs k{};
    k.x = a.x;
    k.slot = a.slot;
    k.pool = static_cast<uint16_t*>(a.pool);
    k.out = a.out;
    k.n_tokens = u32(a.T, "tokens");
    k.row = u32(a.row, "row");
    k.n_rows = u32(a.n_rows, "pool rows");
    dev.launch_hand_kernel("kv_store_f16", ka::kernarg_bytes(k));
}

ops::Impl paged_attention_kernel(const ops::PagedAttention& a) {
    const bool fits = a.kv_type == Type::F16 && a.window == 0 && a.Dk == a.Dv && a.Dk > 0 && a.v_pos_stride == 0 &&
                      ka::attention_partial_kernel_for(uint32_t(a.Dk));
    return fits ? ops::impl<ops::PagedAttention, paged_attention>(false, "amd_paged_attention") : ops::Impl{};
}

}  // namespace

ops::Impl OpsDevice::op(ops::Kind kind, Type type, const void* args) const {
    ops::Impl own;
    if (kind == ops::Kind::QUANTIZE && type == Q8_ACTIVATIONS && !static_cast<const ops::Quantize*>(args)->rms_norm &&
        !static_cast<const ops::Quantize*>(args)->glu)
        own = ops::impl<ops::Quantize, q8_quantize>(false, "amd_q8_quantize");
    if (kind == ops::Kind::LINEAR) own = linear_kernel(*static_cast<const ops::Linear*>(args));
    if (kind == ops::Kind::ATTENTION) own = attention_kernel(*static_cast<const ops::Attention*>(args));
    if (kind == ops::Kind::PAGED_ATTENTION) own = paged_attention_kernel(*static_cast<const ops::PagedAttention*>(args));
    if (kind == ops::Kind::KV_STORE && type == Type::F16) own = ops::impl<ops::KvStore, kv_store>(false, "amd_kv_store");
    return own ? own : Device::op(kind, type, args);
}

// Prefill on the matrix cores (x cast to f16), decode through q8 activations or the fp16 GEMV; float
// weights without a kernel that fits get a generated kernel, the rest the host implementations.
devices::LinearPlan OpsDevice::linear_plan(Type weight, int64_t cols, int64_t max_tokens) const {
    devices::LinearPlan p;  // x as it is (f32)
    if (weight == Type::F32 || weight == Type::BF16) {
        p.generated = true;
    } else if (max_tokens > 1 && ka::gemm_kernel_for(weight) && cols % 32 == 0) {
        p.act = Type::F16, p.cast = true;
    } else if (weight == Type::F16) {
        p.generated = cols % 8 != 0;
    } else if (ka::gemv_kernel_for(weight)) {
        p.act = Q8_ACTIVATIONS, p.act_row_bytes = int64_t(q8_layout(1, cols).bytes);
    } else {
        p = Device::linear_plan(weight, cols, max_tokens);
    }
    return p;
}

bool OpsDevice::can_pack(Type type, int64_t rows, int64_t cols) const {
    return type == Type::Q6_K && rows > 0 && cols % gguf::type_traits(type).block_size == 0;
}

size_t OpsDevice::packed_bytes(Type type, int64_t rows, int64_t cols) const {
    if (type != Type::Q6_K) return Device::packed_bytes(type, rows, cols);
    return size_t(rows * cols) / gguf::type_traits(type).block_size * ka::Q6_K_REPACKED_BYTES;
}

void OpsDevice::pack(Type type, const void* w, int64_t rows, int64_t cols, void* out) {
    if (type != Type::Q6_K) return Device::pack(type, w, rows, cols, out);
    const size_t bytes = size_t(rows * cols) / gguf::type_traits(type).block_size * ka::Q6_K_BYTES;
    std::vector<uint8_t> r = ka::repack_q6_k({static_cast<const uint8_t*>(w), bytes});
    std::memcpy(out, r.data(), r.size());
    flush_host_writes();
}

}  // namespace amd
