// Derived test models (see mla_models.h): metadata copied key by key (same value types, which llama.cpp
// checks), MoE tensors dropped, dense FFNs copied from the first layer, RoPE scaling keys added.
#include "mla_models.h"

#include "common/test_data.h"
#include "gguf/gguf.h"

#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <unistd.h>

namespace mla_models {

namespace {

struct Recipe {
    std::string source;                        // a file in ../shared/models (stem)
    bool dense = true;                         // replace the MoE FFNs and drop recurrent (KDA) layers
    std::vector<std::pair<std::string, gguf::Value>> extra;  // keys without the "<arch>." prefix
    std::string arch = "";                     // rename the architecture (its keys follow)
    bool reference = true;                     // llama.cpp runs it (names() lists it for make.sh)
};

gguf::Value f32(double x) { return gguf::Value::make_float(gguf::ValueType::FLOAT32, x); }
gguf::Value u32(uint64_t x) { return gguf::Value::make_uint(gguf::ValueType::UINT32, x); }
gguf::Value str(const std::string& s) { return gguf::Value::make_string(s); }

// YaRN as DeepSeek-V3 configures it (factor 40, mscale = mscale_all_dim = 1 stored × 0.1), but with a
// short original context so the frequency ramp falls inside the 16 rotated dims.
std::vector<std::pair<std::string, gguf::Value>> yarn(double log_mul) {
    std::vector<std::pair<std::string, gguf::Value>> kv = {{"rope.scaling.type", str("yarn")},
                                                           {"rope.scaling.factor", f32(40.0)},
                                                           {"rope.scaling.original_context_length", u32(64)}};
    if (log_mul != 0.0) kv.push_back({"rope.scaling.yarn_log_multiplier", f32(log_mul)});
    return kv;
}

const std::map<std::string, Recipe>& recipes() {
    static const std::map<std::string, Recipe> r = {
        {"deepseek2-dense-f32", {"random-deepseek2-f32", true, {}}},
        {"deepseek2-dense-f16", {"random-deepseek2-f16", true, {}}},
        {"deepseek2-dense-q8_0", {"random-deepseek2-q8_0", true, {}}},
        // mscale_all_dim 0.707 (≠ 1: DeepSeek-V2's case, where llama.cpp sets mscale = mscale_all_dim)
        {"deepseek2-dense-yarn-f32", {"random-deepseek2-f32", true, yarn(0.0707)}},
        {"deepseek2-dense-yarn1-f32", {"random-deepseek2-f32", true, yarn(0.1)}},
        // Kimi's MLA layer (attn_q, no q LoRA) as a deepseek2 model, since llama.cpp cannot run
        // kimi-linear without recurrent layers; deepseek2 adds RoPE on the rope part.
        {"deepseek2-no-q-lora-f32", {"random-kimi-linear-f32", true, {{"attention.q_lora_rank", u32(0)}}, "deepseek2"}},
        // Kimi's MLA layer alone, RoPE-less as in kimi-linear; llama.cpp cannot run it (no recurrent layer).
        {"kimi-mla-f32", {"random-kimi-linear-f32", true, {}, "", false}},
        {"llama-yarn-f32", {"random-llama-f32", false, yarn(0.0)}},
        {"llama-linear-f32", {"random-llama-f32", false, {{"rope.scaling.type", str("linear")}, {"rope.scaling.factor", f32(4.0)}}}},
    };
    return r;
}

// An integer value of the same stored type as `like`.
gguf::Value same_type(const gguf::Value& like, int64_t x) {
    switch (like.type) {
    case gguf::ValueType::UINT8: case gguf::ValueType::UINT16: case gguf::ValueType::UINT32: case gguf::ValueType::UINT64:
        return gguf::Value::make_uint(like.type, uint64_t(x));
    default: return gguf::Value::make_int(like.type, x);
    }
}

int64_t as_int(const gguf::Value& v) {
    if (auto* u = std::get_if<uint64_t>(&v.v)) return int64_t(*u);
    return std::get<int64_t>(v.v);
}

bool is_moe_tensor(const std::string& rest) {
    for (const char* p : {"ffn_gate_inp.", "exp_probs_b.", "_exps.", "_shexp."})
        if (rest.find(p) != std::string::npos) return true;
    return false;
}

}  // namespace

std::vector<std::string> names() {
    std::vector<std::string> n;
    for (auto& [name, r] : recipes())
        if (r.reference) n.push_back(name);
    return n;
}

void write(const std::string& name, const std::string& out_path) {
    auto it = recipes().find(name);
    if (it == recipes().end()) throw std::invalid_argument("no derived model '" + name + "'");
    const Recipe& r = it->second;
    auto f = gguf::File::open(test_data::shared("models/" + r.source + ".gguf"));
    const std::string arch = f->architecture(), pre = arch + ".", out_pre = (r.arch.empty() ? arch : r.arch) + ".";
    const int n_layer = f->get<int32_t>(".block_count");

    // Layers kept: all, or in dense models those with attention (head_count_kv 0 marks Kimi's KDA layers).
    std::vector<int> keep;
    const gguf::Value* kv_heads = f->find(".attention.head_count_kv");
    for (int il = 0; il < n_layer; il++)
        if (!r.dense || !kv_heads->is_array() || as_int(kv_heads->array()[size_t(il)]) != 0) keep.push_back(il);

    gguf::Writer w;
    for (const auto& [key, value] : f->metadata()) {
        if (r.dense && (key == pre + "expert_count" || key == pre + "expert_used_count")) continue;
        gguf::Value v = value;
        if (r.dense && key == pre + "block_count") v = same_type(value, int64_t(keep.size()));
        if (r.dense && key == pre + "leading_dense_block_count") v = same_type(value, int64_t(keep.size()));
        if (r.dense && key == pre + "attention.head_count_kv" && value.is_array()) {
            std::vector<gguf::Value> a;
            for (int il : keep) a.push_back(value.array()[size_t(il)]);
            v = gguf::Value::make_array(value.elem_type, a);
        }
        if (key == "general.architecture" && !r.arch.empty()) v = str(r.arch);
        w.set(key.rfind(pre, 0) == 0 ? out_pre + key.substr(pre.size()) : key, v);
    }
    for (const auto& [key, value] : r.extra) w.set(out_pre + key, value);

    auto add = [&](const gguf::TensorInfo& t, const std::string& as) {
        w.add_tensor(as, t.type, t.dims, t.data, t.n_bytes);
    };
    add(f->tensor("token_embd.weight"), "token_embd.weight");
    for (size_t i = 0; i < keep.size(); i++) {
        const std::string from = "blk." + std::to_string(keep[i]) + ".", to = "blk." + std::to_string(i) + ".";
        bool has_ffn = false;
        for (const gguf::TensorInfo& t : f->tensors()) {
            if (t.name.rfind(from, 0) != 0) continue;
            std::string rest = t.name.substr(from.size());
            if (r.dense && is_moe_tensor(rest)) continue;
            has_ffn |= rest.rfind("ffn_gate.", 0) == 0;
            add(t, to + rest);
        }
        if (!has_ffn)  // an MoE layer: the first layer's dense FFN takes its place
            for (const char* name : {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"})
                add(f->tensor("blk.0." + std::string(name)), to + name);
    }
    for (const gguf::TensorInfo& t : f->tensors())
        if (t.name.rfind("blk.", 0) != 0 && t.name != "token_embd.weight") add(t, t.name);
    w.write(out_path);
}

std::string path(const std::string& name) {
    static std::mutex mu;
    static std::map<std::string, std::string> written;
    static const std::filesystem::path dir = [] {
        auto d = std::filesystem::temp_directory_path() / ("tinyllm-mla-" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        return d;
    }();
    // Remove the directory when the test process ends.
    static const struct Cleanup {
        ~Cleanup() { std::error_code ec; std::filesystem::remove_all(dir, ec); }
    } cleanup;
    std::lock_guard lock(mu);
    auto& p = written[name];
    if (p.empty()) {
        p = (dir / (name + ".gguf")).string();
        write(name, p);
    }
    return p;
}

}  // namespace mla_models
