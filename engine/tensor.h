// The engine's one public header: lazy Tensors over a hash-consed graph, bound symbolic ints (Var, Dim),
// ops that only build nodes, realize/capture entry points and the hot ops (devices/ops.h). DESIGN.md §3.
// Nothing runs until realize(): the scheduler fuses the graph into kernels, JIT-compiles and launches them.
#pragma once

#include "gguf/types.h"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gguf {
struct TensorInfo;
}
namespace devices {
class Device;
struct Memory;
}

namespace engine {

// Every error the engine throws on bad use or bad input; the message starts with "[engine] <op>: ".
struct Error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------------------------------
// Element types. GGUF block types (Q4_K, ...) are opaque: a tensor of them has its shape in elements
// and is consumed only by custom kernels (linear, embedding) and by dequantize().
class DType {
public:
    enum Code : uint8_t { BOOL, U8, I8, U16, I16, U32, I32, I64, F16, BF16, F32, GGUF };
    constexpr DType(Code c = F32) : code(c), block(gguf::Type::F32) {}
    // F32/F16/BF16/I8/I16/I32/I64 map to the plain dtypes; anything else is an opaque block type.
    static DType from_gguf(gguf::Type t);
    // The GGUF type of a float or block dtype, as kernels that read weights take it; nullopt otherwise.
    std::optional<gguf::Type> weight_type() const;

    Code code;
    gguf::Type block;  // meaningful only when code == GGUF

    bool is_float() const { return code == F16 || code == BF16 || code == F32; }
    bool is_int() const { return code >= U8 && code <= I64; }
    bool is_signed() const { return code == I8 || code == I16 || code == I32 || code == I64; }
    bool is_quantized() const { return code == GGUF; }
    size_t itemsize() const;                 // bytes per element; 0 for block types
    size_t nbytes(int64_t numel) const;      // storage for numel elements (whole blocks for GGUF types)
    std::string name() const;                // "f32", "q4_K", ...
    friend bool operator==(DType a, DType b) { return a.code == b.code && (a.code != GGUF || a.block == b.block); }
};
inline constexpr DType bool_{DType::BOOL}, u8{DType::U8}, i8{DType::I8}, u16{DType::U16}, i16{DType::I16},
    u32{DType::U32}, i32{DType::I32}, i64{DType::I64}, f16{DType::F16}, bf16{DType::BF16}, f32{DType::F32};

// ---------------------------------------------------------------------------------------------------
// Graph nodes are the engine's IR (engine/ir.h); handles keep them alive by reference count.
struct Node;
void node_retain(const Node* n);
void node_release(const Node* n);
class NodeRef {
public:
    NodeRef() = default;
    explicit NodeRef(const Node* n) : n_(n) { if (n_) node_retain(n_); }
    NodeRef(const NodeRef& o) : n_(o.n_) { if (n_) node_retain(n_); }
    NodeRef(NodeRef&& o) noexcept : n_(o.n_) { o.n_ = nullptr; }
    NodeRef& operator=(NodeRef o) noexcept { std::swap(n_, o.n_); return *this; }
    ~NodeRef() { if (n_) node_release(n_); }
    const Node* get() const { return n_; }
    const Node* operator->() const { return n_; }
    const Node& operator*() const { return *n_; }
    explicit operator bool() const { return n_ != nullptr; }
    friend bool operator==(const NodeRef& a, const NodeRef& b) { return a.n_ == b.n_; }

private:
    const Node* n_ = nullptr;
};

class Var;

// A symbolic integer: a constant or an expression over Vars (start_pos + n_tokens). Used for shapes,
// offsets and index math; one compiled kernel serves every value the Vars take.
class Dim {
public:
    Dim(int64_t v = 0);
    Dim(int v) : Dim(int64_t(v)) {}
    Dim(const Var& v);
    explicit Dim(NodeRef expr);            // an integer expression node (internal)

    bool is_const() const { return !expr_; }
    int64_t value() const;                 // the constant; throws for a symbolic Dim
    int64_t min() const;                   // bounds over all values of its Vars
    int64_t max() const;
    int64_t eval() const;                  // value under the Vars' current bindings
    NodeRef node() const;                  // as an i64 expression node (a CONST for constants)
    std::string str() const;               // "start_pos+1"

    friend Dim operator+(const Dim& a, const Dim& b);
    friend Dim operator-(const Dim& a, const Dim& b);
    friend Dim operator*(const Dim& a, const Dim& b);
    friend Dim operator/(const Dim& a, const Dim& b);  // floor division (operands are non-negative)
    friend Dim operator%(const Dim& a, const Dim& b);
    friend bool same(const Dim& a, const Dim& b);     // structurally equal (constants by value)

private:
    int64_t c_ = 0;
    NodeRef expr_;
};
using Shape = std::vector<Dim>;
std::string shape_str(const Shape& s);  // "(2,start_pos+1,64)"
Dim numel(const Shape& s);

// A bound symbolic integer with a range [min, max]: start_pos, n_tokens. Copies share the binding.
// Bind before realize()/a Jit call; every kernel reads the current value when it launches.
class Var {
public:
    Var(std::string name, int64_t min, int64_t max);
    const std::string& name() const;
    int64_t min() const;
    int64_t max() const;
    int64_t value() const;
    const Var& bind(int64_t value) const;  // throws when outside [min, max]
    NodeRef node() const;

private:
    NodeRef node_;
};

// ---------------------------------------------------------------------------------------------------
// A lazy tensor: a small handle to a graph node. Copies share state: realizing or assigning through
// one handle is seen by all its copies. Row-major; shape[0] is the outermost dimension.
// The engine is used from one thread at a time (the model loop); kernels themselves run in parallel.
namespace detail { struct TensorImpl; }

class Tensor {
public:
    Tensor() = default;

    // --- creation (device "" = default_device()) -----------------------------------------------------
    static Tensor empty(const Shape& shape, DType dtype = f32, const std::string& device = "");
    static Tensor full(const Shape& shape, double value, DType dtype = f32);   // lazy constant
    static Tensor zeros(const Shape& shape, DType dtype = f32) { return full(shape, 0.0, dtype); }
    static Tensor ones(const Shape& shape, DType dtype = f32) { return full(shape, 1.0, dtype); }
    static Tensor scalar(double value, DType dtype = f32) { return full({}, value, dtype); }
    static Tensor from_dim(const Dim& d, DType dtype = i32);   // the value of a Var expression
    static Tensor arange(const Dim& n, DType dtype = i32);      // 0, 1, ..., n-1
    // Copies `bytes` of raw data (dtype's storage layout) into a new realized buffer.
    static Tensor from_data(const void* data, size_t bytes, const Shape& shape, DType dtype,
                            const std::string& device = "");
    template <class T> static Tensor from_vector(const std::vector<T>& v, const Shape& shape);
    // Wraps external memory without copying (mmap'd weights); `owner` keeps it alive. Read-only. On a
    // device that cannot read host memory (AMD) the data is uploaded once. The CPU copies large weights
    // into huge pages unless `sparse`: a table only ever read a few rows at a time (embedding lookups).
    static Tensor external(const void* data, const Shape& shape, DType dtype, std::shared_ptr<const void> owner,
                           bool sparse = false);
    // A GGUF tensor in place: shape reversed from ggml order (dims[0] innermost -> last), dtype from its
    // type. `owner` keeps the mapping alive (e.g. the gguf::File).
    static Tensor from_gguf(const gguf::TensorInfo& info, std::shared_ptr<const void> owner);

    // --- properties -------------------------------------------------------------------------------
    const Shape& shape() const;
    int ndim() const { return int(shape().size()); }
    Dim dim(int axis) const;  // negative counts from the end
    DType dtype() const;
    Dim numel() const { return engine::numel(shape()); }
    const std::string& device() const;
    bool defined() const { return impl_ != nullptr; }
    bool is_realized() const;  // backed by a buffer (no pending work)
    NodeRef node() const;

    // --- movement: views, never copies -------------------------------------------------------------
    Tensor reshape(const Shape& shape) const;              // one dim may be -1
    Tensor permute(const std::vector<int>& order) const;
    Tensor transpose(int a = -2, int b = -1) const;
    Tensor expand(const Shape& shape) const;               // broadcast size-1 dims (and add leading ones)
    Tensor shrink(const std::vector<std::pair<Dim, Dim>>& ranges) const;  // [begin, end) per dim
    Tensor pad(const std::vector<std::pair<Dim, Dim>>& widths, double value = 0.0) const;  // before, after
    Tensor slice(int axis, const Dim& start, const Dim& length) const;
    Tensor unsqueeze(int axis) const;
    Tensor squeeze(int axis) const;
    Tensor flatten(int start = 0, int end = -1) const;

    // --- type -------------------------------------------------------------------------------------
    Tensor cast(DType dtype) const;
    Tensor bitcast(DType dtype) const;  // same itemsize
    Tensor contiguous() const;          // forces a materialized, row-major copy

    // --- reductions (keepdim keeps reduced axes as size 1) ------------------------------------------
    Tensor sum(const std::vector<int>& axes, bool keepdim = false) const;
    Tensor max(const std::vector<int>& axes, bool keepdim = false) const;
    Tensor mean(const std::vector<int>& axes, bool keepdim = false) const;
    Tensor sum(int axis, bool keepdim = false) const { return sum(std::vector<int>{axis}, keepdim); }
    Tensor max(int axis, bool keepdim = false) const { return max(std::vector<int>{axis}, keepdim); }
    Tensor mean(int axis, bool keepdim = false) const { return mean(std::vector<int>{axis}, keepdim); }

    // --- state --------------------------------------------------------------------------------------
    // Writes `value` (broadcast to this shape) into this view of a realized buffer at the next realize.
    // Every handle of the underlying buffer then reads the written data: the KV cache idiom is
    //   cache.slice(0, start_pos, n).assign(k);  keys = cache.slice(0, 0, start_pos + n);
    Tensor& assign(const Tensor& value);
    Tensor& realize();
    // Overwrites a realized buffer's contents from host memory (jit inputs: token ids, ...).
    void copy_from(const void* data, size_t bytes);
    // Realizes and copies to the host, converting numeric dtypes to T.
    template <class T> std::vector<T> to_vector() const;
    template <class T> T item() const { return to_vector<T>().at(0); }

    explicit Tensor(std::shared_ptr<detail::TensorImpl> impl) : impl_(std::move(impl)) {}
    const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }

private:
    std::shared_ptr<detail::TensorImpl> impl_;
};

// Realizes several tensors in one schedule (shared work runs once); also runs every pending assign.
void realize(const std::vector<Tensor>& tensors);

// The device new tensors go to when none is named (TINYLLM_DEVICE, else "CPU"). Setting it opens the
// device, so a missing GPU is reported here (devices::Error), before any model is loaded. Process-wide,
// like tinygrad's Device.DEFAULT: set it before building graphs, not while other threads build them.
const std::string& default_device();
void set_default_device(const std::string& name);

// ---------------------------------------------------------------------------------------------------
// Elementwise ops broadcast numpy-style and promote dtypes (bool < ints < f16/bf16 < f32); a scalar
// operand takes the tensor's dtype.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);  // ints: truncating division
Tensor operator%(const Tensor& a, const Tensor& b);  // ints: C remainder; floats: fmod
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator%(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

Tensor exp2(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, double b);
Tensor minimum(const Tensor& a, double b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, double a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, double b);
Tensor lt(const Tensor& a, const Tensor& b);  // comparisons give bool
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor shl(const Tensor& a, const Tensor& b);
Tensor shr(const Tensor& a, const Tensor& b);  // arithmetic for signed, logical for unsigned

Tensor concat(const std::vector<Tensor>& parts, int axis);
Tensor stack(const std::vector<Tensor>& parts, int axis);
// out[i...] = x[i... with i[axis] replaced by index[i...]] (torch.gather); index is clamped into range.
Tensor gather(const Tensor& x, int axis, const Tensor& index);

// ---------------------------------------------------------------------------------------------------
// Model helpers (engine/nn.cpp). Shapes in comments: (T, D) = tokens x features.
Tensor matmul(const Tensor& a, const Tensor& b);          // (..., M, K) @ (..., K, N), generated kernel
// (..., K) x (N, K)^T -> (..., N) f32 for any weight dtype, as the device plans it (Device::linear_plan):
// its linear (hot op, devices/ops.h) over activations quantized to its format for the weight type (on CPU
// as ggml does: F16 for F16 weights, Q8_0 / Q8_K for quantized ones), or a generated kernel.
Tensor linear(const Tensor& x, const Tensor& w);
// Matmul weights declared once at load: one weight (N, K), or several that multiply the same input (q, k,
// v; gate, up). The device's layout hook lays them out (Device::can_pack/pack): where it applies to all of
// them, as one stack in its layout, so one matmul gives every output (the CPU: panels of 16 rows of
// Q8_0/Q4_0/Q4_K/Q6_K on AVX-512); else each on its own, in the layout where it has one. A weight left in
// a file mapping for sparse reads (a tied embedding table) gets a streamed copy where none applies.
struct LinearWeight {
    std::vector<Tensor> parts;  // what linear() multiplies: the stack, or each weight
    std::vector<int64_t> rows;  // each declared weight's rows, in order
};
LinearWeight linear_weight(const std::vector<Tensor>& ws);
// One output (..., rows[i]) f32 per declared weight, whatever the layout.
std::vector<Tensor> linear_split(const Tensor& x, const LinearWeight& w);
Tensor linear(const Tensor& x, const LinearWeight& w);  // the outputs side by side: (..., sum of rows)
// The layout itself: w (N, K) in its device's own layout for linear() when it has one (Device::can_pack),
// else w itself. The result feeds linear(), and embedding() where embeds_from() says so; dequantize()
// rejects it.
Tensor pack_for_linear(const Tensor& w);
// Weights with the same columns and dtype stacked row-wise into one packed weight: one linear() gives
// their outputs side by side (q|k|v, gate|up). Undefined when the layout does not apply to all of them.
Tensor pack_for_linear(const std::vector<Tensor>& ws);
Tensor embedding(const Tensor& table, const Tensor& ids); // (V, D)[ids (...)] -> (..., D) f32; any table dtype
// Whether embedding() reads its rows from w as linear_weight() laid it out: w is in rows, or its device's
// ROWS reads its layout (Device::rows_read_packed; the CPU's panels). A tied output matrix's copy then
// serves the lookups too, and the file mapping's pages of the table are never touched.
bool embeds_from(const Tensor& w);
Tensor dequantize(const Tensor& w);                       // any dtype -> f32, same shape
Tensor softmax(const Tensor& x, int axis = -1);
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);  // over the last axis
Tensor rms_norm(const Tensor& x, double eps);                         // without weight
Tensor silu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor softplus(const Tensor& x);
Tensor cumsum(const Tensor& x, int axis);
// The k largest values along the last axis, in descending order (ties: lower index first).
std::pair<Tensor, Tensor> topk(const Tensor& x, int k);   // (values f32, indices i32)

// Rotary embedding of x (T, H, Dh) at positions start_pos + t, rotating the first rope_dim features.
// NORM pairs (2i, 2i+1) (llama); NEOX pairs (i, i + rope_dim/2) (qwen2/3, neox).
enum class RopeLayout { NORM, NEOX };
// Context extension, as ggml's rope_ext takes it: linear (freq_scale only) or YaRN (ext_factor > 0 blends
// interpolated and original frequencies over the dims between the beta_fast/beta_slow corrections and
// scales cos/sin by attn_factor · (1 + 0.1 ln(1/freq_scale))).
struct RopeScaling {
    float freq_scale = 1.0f;   // 1 / context scaling factor
    float ext_factor = 0.0f;   // YaRN extrapolation mix (1 when YaRN is on)
    float attn_factor = 1.0f;  // magnitude scale of cos/sin
    int n_ctx_orig = 0;        // the training context the corrections refer to
    float beta_fast = 32.0f, beta_slow = 1.0f;
};
Tensor rope(const Tensor& x, const Dim& start_pos, int rope_dim, double theta, RopeLayout layout,
            const Tensor& freq_factors = {}, const RopeScaling& scaling = {});
// The same at per-token positions (T) i32: token t rotated at positions[t] (a batch of sequences).
Tensor rope(const Tensor& x, const Tensor& positions, int rope_dim, double theta, RopeLayout layout,
            const Tensor& freq_factors = {}, const RopeScaling& scaling = {});
// KV caches hold f32, f16, or GGUF blocks of 32 values along the head dimension (q8_0, q4_0: llama.cpp's
// -ctk/-ctv types) where the device's attention reads them (Device::kv_cache_types). The GGUF type of a
// cache of `dtype` with rows of head_dim values on `device` ("" = the default device); throws Error
// (naming `op`) when the device does not read that type or head_dim is not whole blocks.
gguf::Type kv_cache_type(DType dtype, int64_t head_dim, const std::string& device = "", const char* op = "kv_cache");
// Writes x (T, Hkv, D) (any float) into rows start_pos..start_pos+T-1 of cache (C, Hkv, D) and returns the
// cache after the write: read it, not `cache`. Float caches: an assign (fused into x's producer); block
// caches: the KV_STORE op below, which quantizes each row as it writes it (a generated kernel cannot
// write blocks).
Tensor kv_store(const Tensor& cache, const Tensor& x, const Dim& start_pos);
// Causal grouped-query attention over a KV cache (hot op). q (T, H, Dk) is at positions
// start_pos..start_pos+T-1; k_cache (C, Hkv, Dk) and v_cache (C, Hkv, Dv) hold positions 0..start_pos+T-1
// (one KV cache type, kv_cache_type). Returns (T, H, Dv) f32. window > 0: the query at p sees only keys
// p-window+1..p.
// sinks (H) f32: a per-head logit that joins each softmax's denominator without a value (gpt-oss).
Tensor attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const Dim& start_pos, double scale,
                 int window = 0, const Tensor& sinks = {});

// Paged KV (engine/paged.cpp): one pool of rows for every sequence, in blocks of block_size rows; a
// sequence's block table row lists its blocks, so its position p is pool row
// block_table[s, p / block_size] * block_size + p % block_size.
// Writes x (T, Hkv, D) (any float) into rows slots (T) i32 of pool (n_rows, Hkv, D), a KV cache type (a
// realized buffer, written in place; a slot outside the pool is skipped). Returns the pool after the
// write: read it, not `pool`, so the readers run after the store.
Tensor kv_store(const Tensor& pool, const Tensor& x, const Tensor& slots);
// Causal attention of a mixed batch (hot op): q (T, H, Dk), token t at position pos[t] of sequence
// seq[t] (i32 (T) each) sees that sequence's keys 0..pos[t] through block_table (S, MB) i32 in the pools
// k (n_blocks * block_size, Hkv, Dk), v (.., Hkv, Dv), one KV cache type. Scale, window and sinks as
// attention(). Returns (T, H, Dv) f32. Nonzero v strides read the values inside k_pool's rows instead
// (v_pool then only gives Dv; f32 or f16): what paged_attention_latent does.
Tensor paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const Tensor& pos, const Tensor& seq,
                       const Tensor& block_table, int block_size, double scale, int window = 0, const Tensor& sinks = {},
                       const Dim& v_pos_stride = 0, const Dim& v_head_stride = 0);
// attention_latent through block tables: MLA's pool (n_rows, 1, R + Dr) holds each token's latent (the
// values, its first value_dim = R features) and rotated key part.
Tensor paged_attention_latent(const Tensor& q, const Tensor& pool, int value_dim, const Tensor& pos, const Tensor& seq,
                              const Tensor& block_table, int block_size, double scale);

// Mixture of experts (engine/experts.cpp), like ggml's mul_mat_id.
// Indices (i32) of the k largest values along the last axis, in llama.cpp's order: its top-k is the
// head of std::sort with a descending comparator, so ties fall as that call leaves them.
Tensor top_k_ggml(const Tensor& x, int k);
// The experts chosen per token, grouped once so each product below streams an expert's weights once
// for all the tokens that chose it, and never touches the experts nobody chose.
struct ExpertSelection {
    Tensor ids;        // (T, k) i32 expert ids
    Tensor plan;       // i32: the (token, slot) rows grouped by expert (engine/experts.cpp)
    int n_expert = 0;
};
ExpertSelection select_experts(const Tensor& ids, int n_expert);
// out[t, s] = W[ids[t, s]] . x[t] (x (T, K): each token's row feeds all its experts) or . x[t, s]
// (x (T, k, K): one row per slot). W (E, N, K) any weight dtype -> (T, k, N) f32.
Tensor linear_experts(const Tensor& x, const Tensor& w, const ExpertSelection& selection);
// Expert weights (E, N, K) in their device's layout for linear_experts() (Device::can_pack_experts: the
// rows packed as pack_for_linear's), else w itself, read whole when it was left in its file mapping
// (WeightLoader::layer_matrix). The packed result feeds linear_experts() only.
Tensor pack_experts(const Tensor& w);

// Multi-head latent attention helpers (engine/mla.cpp).
// One matrix per head: x (T, H, K) times w (H, N, K) -> (T, H, N) f32, any weight dtype (MLA's
// attn_k_b / attn_v_b). Activations are packed like linear()'s.
Tensor linear_heads(const Tensor& x, const Tensor& w);
// Causal attention over a latent cache whose rows are keys and whose first `value_dim` features are
// also the values (MLA in absorbed form: one cache row per token, not per head). q (T, H, Dk) at
// positions start_pos..start_pos+T-1; cache (C, Hkv, Dk) f32 or f16. Returns (T, H, value_dim) f32.
Tensor attention_latent(const Tensor& q, const Tensor& cache, int value_dim, const Dim& start_pos, double scale);

// Recurrent token mixers (engine/recurrent.cpp, hot ops). Both take the state a sequence carries
// and return the new one for the caller to assign back; at start_pos 0 the old state reads as zeros.
// Causal depthwise convolution over time: y[t][c] = Σ_j w[c][j] · in[t+j][c] over in = concat(state, x),
// x (T, C), state (K-1, C) f32 (the last K-1 inputs), w (C, K). Returns y (T, C) and the new state.
struct ConvResult { Tensor y, state; };
ConvResult causal_conv1d(const Tensor& x, const Tensor& state, const Tensor& w, const Dim& start_pos);
// The gated delta rule, per v head with state S (Dv, Dk), token by token:
//   S ← S·diag(e^g_t);  S ← S + β_t (v_t − S k_t) k_tᵀ;  o_t = scale · S q_t
// q, k (T, Hk, Dk); v (T, Hv, Dv); g (T, Hv, 1) one log-decay per head (GatedDeltaNet) or (T, Hv, Dk)
// per key channel (KDA); beta (T, Hv); state (Hv, Dv, Dk) f32. V head h reads q/k head h % Hk (MODULO,
// ggml's broadcast) or h / (Hv/Hk) (INTERLEAVE, repeat_interleave). Computed chunk-wise (64 tokens).
enum class HeadMap { MODULO, INTERLEAVE };
struct DeltaResult { Tensor o, state; };  // o (T, Hv, Dv), state (Hv, Dv, Dk)
DeltaResult delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                       const Tensor& state, const Dim& start_pos, double scale, HeadMap head_map = HeadMap::MODULO);
// Their batch forms: the tokens of several sequences, each one's contiguous and in position order,
// token t at position pos[t] of sequence seq[t]. Sequence s carries row s of `states`, (S, K-1, C) or
// (S, Hv, Dv, Dk) f32, a realized buffer read and updated in place; a sequence whose first token here
// is at position 0 starts from zeros. Checkpoints (load and save given): a sequence whose first token
// here has load[t] >= 0 starts from row load[t] instead, and after a token with save[t] >= 0 its state
// is also copied to row save[t]. They return y (T, C) and o (T, Hv, Dv); the pool holds the new states
// once that output is computed.
struct SeqRows {
    Tensor pos, seq;    // (T) integers
    Tensor load, save;  // (T) integers, -1 for none; optional (both or neither)
};
Tensor causal_conv1d_seqs(const Tensor& x, const Tensor& states, const Tensor& w, const SeqRows& rows);
Tensor delta_rule_seqs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta, const Tensor& states,
                       const SeqRows& rows, double scale, HeadMap head_map = HeadMap::MODULO);

// ---------------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------------
// Graph capture/replay (like tinygrad's TinyJit). The first call of a shape class (input shapes and
// dtypes) runs `fn` and records every kernel it launches with its buffers; later calls replay them
// with new input buffers and the Vars' current bindings, without building, scheduling or compiling.
// Work inside `fn` runs on every replay: create state (caches, tables) before the first call; the
// recording keeps the buffers it used, so reset() after replacing a state buffer (a new KV cache).
// Returned tensors alias the captured output buffers and are overwritten by the next call.
class Jit {
public:
    using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
    explicit Jit(Fn fn);
    ~Jit();
    Jit(const Jit&) = delete;
    Jit& operator=(const Jit&) = delete;
    std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);
    size_t n_captured() const;  // shape classes recorded so far
    void reset();               // forget all captures

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------------
// Counters since process start (the capture test asserts a replay adds none of the first three).
struct Stats {
    uint64_t nodes_built = 0;      // graph nodes created (cache misses of the hash-consing table)
    uint64_t schedules = 0;        // graphs scheduled into kernels
    uint64_t compiles = 0;         // kernels JIT-compiled (kernel-cache misses)
    uint64_t kernels_run = 0;      // generated kernel launches
    uint64_t custom_run = 0;       // custom kernel launches
    uint64_t replays = 0;          // Jit replays
    uint64_t bytes_in_use = 0;     // device memory held by kernel outputs and intermediates (not the free-block cache)
    uint64_t peak_bytes_in_use = 0;  // its high-water mark since the last reset_peak_bytes()
};
Stats stats();
void reset_peak_bytes();

// The kernels the last realize() scheduled (tests assert fusion with these).
struct KernelInfo {
    std::string name;   // "r_64_256": r(educe)/E(lementwise)/C(ustom), then the loop sizes
    bool custom = false;
    bool has_reduce = false;
    Shape out_shape;
};
std::vector<KernelInfo> last_schedule();

}  // namespace engine

// --- template definitions --------------------------------------------------------------------------
namespace engine {
namespace detail {
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return f32; }
template <> constexpr DType dtype_of<int32_t>() { return i32; }
template <> constexpr DType dtype_of<int64_t>() { return i64; }
template <> constexpr DType dtype_of<uint8_t>() { return u8; }
template <> constexpr DType dtype_of<int8_t>() { return i8; }
template <> constexpr DType dtype_of<uint16_t>() { return u16; }
template <> constexpr DType dtype_of<int16_t>() { return i16; }
template <> constexpr DType dtype_of<uint32_t>() { return u32; }
template <> constexpr DType dtype_of<bool>() { return bool_; }
// Host copy of a realized tensor converted to f64/i64 (the conversion hub of to_vector).
std::vector<double> to_f64(const Tensor& t);
std::vector<int64_t> to_i64(const Tensor& t);
std::vector<float> f32_values(const Tensor& t);  // t is f32: its values copied as they are
}  // namespace detail

template <class T> Tensor Tensor::from_vector(const std::vector<T>& v, const Shape& shape) {
    if constexpr (std::is_same_v<T, bool>) {
        std::vector<uint8_t> b(v.begin(), v.end());
        return from_data(b.data(), b.size(), shape, bool_);
    } else {
        return from_data(v.data(), v.size() * sizeof(T), shape, detail::dtype_of<T>());
    }
}

template <class T> std::vector<T> Tensor::to_vector() const {
    std::vector<T> out;
    if constexpr (std::is_same_v<T, float>) {
        if (dtype() == f32) return detail::f32_values(*this);  // logits every decode step: one copy
    }
    if constexpr (std::is_floating_point_v<T>) {
        for (double d : detail::to_f64(*this)) out.push_back(static_cast<T>(d));
    } else {
        for (int64_t d : detail::to_i64(*this)) out.push_back(static_cast<T>(d));
    }
    return out;
}
}  // namespace engine
