// The engine's custom kernels on AMD: graph nodes whose DeviceKernelFn fills kernels_amd's argument
// structs with device addresses and queues the embedded code objects (Device::launch_hand_kernel).
// linear: decode GEMVs over raw GGUF blocks against q8 activations (quantized once per input, shared by
// every projection of it), fp16 GEMV, WMMA/MFMA GEMMs for prefill; F32/BF16 weights get a generated
// kernel. attention: the split flash-decode (partial over 64-key chunks + combine) once per query token.
#include "engine/amd_kernels_impl.h"
#include "engine/ir_impl.h"
#include "engine/realize_impl.h"

#include "kernels_amd/kernels_amd.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

namespace engine::amd_kernels {

namespace {

namespace ka = tinyllm::amd;

bool on_amd(const Tensor& t) { return devices::get(t.device()).target().arch == devices::Arch::AMDGCN; }

// A device address `offset` bytes into m, typed as the kernarg field.
template <class T> T* at(const devices::Memory* m, uint64_t offset = 0) { return reinterpret_cast<T*>(m->handle + offset); }

uint32_t u32(int64_t v, const char* what) {
    if (v < 0 || v > int64_t(UINT32_MAX)) throw Error(std::string("[engine] amd: ") + what + " " + std::to_string(v) + " does not fit the kernel's u32");
    return uint32_t(v);
}

std::string_view kernel_for(std::optional<std::string_view> name, int64_t weight_type) {
    if (!name) throw Error("[engine] amd: no kernel for weights of type " + std::string(gguf::type_name(gguf::Type(weight_type))));
    return *name;
}

// q8 activations of up to t_cap tokens of k values in one buffer: the int8 values (t_cap, k), a scale per
// 32 values, a sum per 16 (kernargs.h). The offsets depend on t_cap only, so a symbolic T shares them.
struct Q8Layout {
    uint64_t scale, sum, bytes;
};
Q8Layout q8_layout(int64_t t_cap, int64_t k) {
    uint64_t n = uint64_t(t_cap) * uint64_t(k);
    return {n, n + n / 8, n + n / 8 + n / 4};
}

// scalar {T, K, T_cap}; in {x (T, K) f32} -> q8 activations.
void q8_quantize(devices::Device& dev, const DeviceArgs& a) {
    Q8Layout l = q8_layout(a.scalar[2], a.scalar[1]);
    ka::Q8QuantizeArgs k{};
    k.x = at<const float>(a.in[0]);
    k.xq = at<uint32_t>(a.out);
    k.xscale = at<float>(a.out, l.scale);
    k.xsum = at<float>(a.out, l.sum);
    k.n_tokens = u32(a.scalar[0], "tokens");
    k.n_in = u32(a.scalar[1], "n_in");
    dev.launch_hand_kernel("q8_quantize", ka::kernarg_bytes(k));
}

// scalar {T, N, K, T_cap, weight type}; in {q8 activations, W} -> y (T, N) f32.
void gemv_q8(devices::Device& dev, const DeviceArgs& a) {
    std::string_view name = kernel_for(ka::gemv_kernel_for(gguf::Type(a.scalar[4])), a.scalar[4]);
    Q8Layout l = q8_layout(a.scalar[3], a.scalar[2]);
    ka::GemvQ8Args k{};
    k.w = at<const uint32_t>(a.in[1]);
    k.xq = at<const uint32_t>(a.in[0]);
    k.xscale = at<const float>(a.in[0], l.scale);
    k.xsum = at<const float>(a.in[0], l.sum);
    k.y = at<float>(a.out);
    k.n_out = u32(a.scalar[1], "n_out");
    k.n_in = u32(a.scalar[2], "n_in");
    k.n_tokens = u32(a.scalar[0], "tokens");
    dev.launch_hand_kernel(std::string(name), ka::kernarg_bytes(k));
}

// scalar {T, N, K}; in {x (T, K) f32, W (N, K) f16} -> y (T, N) f32.
void gemv_f16(devices::Device& dev, const DeviceArgs& a) {
    ka::GemvF16Args k{};
    k.w = at<const uint16_t>(a.in[1]);
    k.x = at<const float>(a.in[0]);
    k.y = at<float>(a.out);
    k.n_out = u32(a.scalar[1], "n_out");
    k.n_in = u32(a.scalar[2], "n_in");
    k.n_tokens = u32(a.scalar[0], "tokens");
    dev.launch_hand_kernel("gemv_f16", ka::kernarg_bytes(k));
}

// scalar {T, N, K, weight type}; in {x (T, K) f16, W} -> y (T, N) f32 on the matrix cores.
void gemm(devices::Device& dev, const DeviceArgs& a) {
    std::string_view name = kernel_for(ka::gemm_kernel_for(gguf::Type(a.scalar[3])), a.scalar[3]);
    ka::GemmArgs k{};
    k.w = at<const uint32_t>(a.in[1]);
    k.x = at<const uint16_t>(a.in[0]);
    k.y = at<float>(a.out);
    k.n_out = u32(a.scalar[1], "n_out");
    k.n_in = u32(a.scalar[2], "n_in");
    k.n_tokens = u32(a.scalar[0], "tokens");
    dev.launch_hand_kernel(std::string(name), ka::kernarg_bytes(k));
}

// The reference ATTENTION's arguments: scalar {T, H, Hkv, Dk, Dv, start_pos, k_f16, v_f16, C}, fscalar
// {scale}; in {q (T, H, D) f32, k, v (C, Hkv, D) f16, partial and stats scratch for ceil(C / chunk)
// chunks}. Query t sees positions 0..start+t: one decode each. Queued kernels run in order, so every
// token (and every layer) reuses the scratch without waiting.
void attention_decode(devices::Device& dev, const DeviceArgs& a) {
    int64_t T = a.scalar[0], H = a.scalar[1], Hkv = a.scalar[2], D = a.scalar[3], C = a.scalar[8];
    int64_t start = std::min(a.scalar[5], C - T);  // never past the cache, as the reference
    std::string partial_kernel(kernel_for(ka::attention_partial_kernel_for(u32(D, "head size")), int64_t(gguf::Type::F16)));
    for (int64_t t = 0; t < T; t++) {
        uint32_t kv_len = u32(start + t + 1, "kv length"), n_chunks = (kv_len + ka::ATTN_CHUNK - 1) / ka::ATTN_CHUNK;
        ka::AttnDecodeArgs p{};
        p.q = at<const float>(a.in[0], uint64_t(t * H * D) * 4);
        p.k = at<const uint16_t>(a.in[1]);
        p.v = at<const uint16_t>(a.in[2]);
        p.partial = at<float>(a.in[3]);
        p.stats = at<float>(a.in[4]);
        p.n_heads = u32(H, "heads");
        p.n_kv_heads = u32(Hkv, "KV heads");
        p.kv_len = kv_len;
        p.n_chunks = n_chunks;
        p.kv_head_stride = u32(D, "head size");
        p.pos_stride = u32(Hkv * D, "KV row");
        p.scale = float(a.fscalar[0]);
        dev.launch_hand_kernel(partial_kernel, ka::kernarg_bytes(p));
        ka::AttnCombineArgs c{};
        c.partial = at<const float>(a.in[3]);
        c.stats = at<const float>(a.in[4]);
        c.out = at<float>(a.out, uint64_t(t * H * D) * 4);
        c.n_heads = p.n_heads;
        c.n_chunks = n_chunks;
        c.head_dim = u32(D, "head size");
        dev.launch_hand_kernel("attn_decode_combine", ka::kernarg_bytes(c));
    }
}

const CustomKernel Q8_QUANTIZE{"amd_q8_quantize", nullptr, 1, q8_quantize};
const CustomKernel GEMV_Q8{"amd_gemv_q8", nullptr, 1, gemv_q8};
const CustomKernel GEMV_F16{"amd_gemv_f16", nullptr, 1, gemv_f16};
const CustomKernel GEMM{"amd_gemm", nullptr, 1, gemm};
const CustomKernel ATTENTION{"amd_attention", nullptr, 1, attention_decode};

// Q6_K weights as the kernels read them (blocks padded from 210 to 212 bytes), made once per weight buffer.
std::optional<Tensor> q6_k_repacked(const Tensor& w) {
    if (!w.is_realized()) return std::nullopt;
    static std::mutex mu;
    static std::map<const void*, std::pair<std::weak_ptr<const void>, Tensor>> cache;
    std::lock_guard lock(mu);
    const std::shared_ptr<const void>& owner = w.node()->arg.obj;
    auto it = cache.find(owner.get());
    if (it != cache.end() && !it->second.first.expired()) return it->second.second;
    Buffer& b = buffer_of(w.node().get());
    std::vector<uint8_t> raw(b.dtype.nbytes(b.numel));
    if (b.host_data) std::memcpy(raw.data(), b.host_data, raw.size());
    else b.device->copy_out(raw.data(), *b.mem, 0, raw.size());
    std::vector<uint8_t> packed = ka::repack_q6_k(raw);
    int64_t rows = w.dim(0).value();
    Tensor t = Tensor::from_data(packed.data(), packed.size(), {rows, int64_t(packed.size()) / rows}, u8, w.device());
    cache[owner.get()] = {owner, t};
    return t;
}

Tensor call(const CustomKernel& kernel, std::vector<Tensor> inputs, Shape out_shape, DType out_dtype, std::vector<Dim> scalars) {
    CustomCall c;
    c.kernel = &kernel;
    c.inputs = std::move(inputs);
    c.out_shape = std::move(out_shape);
    c.out_dtype = out_dtype;
    c.scalars = std::move(scalars);
    return custom(c);
}

}  // namespace

std::optional<Tensor> linear(const Tensor& x, const Tensor& w) {
    if (!on_amd(x)) return std::nullopt;
    Dim T = x.dim(0), N = w.dim(0), K = w.dim(1);
    DType wt = w.dtype();
    // Float weights without a hand kernel that fits: a generated kernel, one work-item per output.
    auto generated = [&] { return std::optional((x.reshape({T, 1, K}) * w.cast(f32).reshape({1, N, K})).sum(-1)); };
    if (wt.code == DType::F32 || wt.code == DType::BF16) return generated();
    if (!N.is_const() || !K.is_const()) return wt.is_float() ? generated() : std::nullopt;
    if (!wt.weight_type()) return std::nullopt;
    gguf::Type type = *wt.weight_type();
    int64_t type_id = int64_t(type);
    Tensor weights = w;
    if (wt.is_quantized() && wt.block == gguf::Type::Q6_K) {
        auto repacked = q6_k_repacked(w);
        if (!repacked) return std::nullopt;
        weights = *repacked;
    }
    if (T.max() > 1 && ka::gemm_kernel_for(type) && K.value() % 32 == 0)  // prefill: the matrix cores
        return call(GEMM, {x.cast(f16), weights}, {T, N}, f32, {T, N, K, type_id});
    if (wt.code == DType::F16) return K.value() % 8 == 0 ? std::optional(call(GEMV_F16, {x, w}, {T, N}, f32, {T, N, K})) : generated();
    if (!ka::gemv_kernel_for(type)) return std::nullopt;
    Dim t_cap = T.max();
    Tensor xq = call(Q8_QUANTIZE, {x}, {t_cap, int64_t(q8_layout(1, K.value()).bytes)}, u8, {T, K, t_cap});
    return call(GEMV_Q8, {xq, weights}, {T, N}, f32, {T, N, K, t_cap, type_id});
}

std::optional<Tensor> attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Dim& start_pos, double scale) {
    if (!on_amd(q) || k_cache.dtype() != f16 || v_cache.dtype() != f16) return std::nullopt;
    Dim T = q.dim(0), H = q.dim(1), D = q.dim(2), Hkv = k_cache.dim(1);
    if (!D.is_const() || !same(v_cache.dim(2), D) || !ka::attention_partial_kernel_for(uint32_t(D.value()))) return std::nullopt;
    CustomCall c;
    c.kernel = &ATTENTION;
    int64_t chunks = (k_cache.dim(0).max() + ka::ATTN_CHUNK - 1) / ka::ATTN_CHUNK;
    Tensor partial = Tensor::empty({H * chunks * D}, f32, q.device()), stats = Tensor::empty({H * chunks * 2}, f32, q.device());
    c.inputs = {q.cast(f32), k_cache, v_cache, partial, stats};
    c.out_shape = {T, H, D};
    c.scalars = {T, H, Hkv, D, D, start_pos, 1, 1, k_cache.dim(0)};
    c.fscalars = {scale};
    return custom(c);
}

}  // namespace engine::amd_kernels
