// tinyllm info [MODEL.gguf] [--json]: what a user wants to know before loading a model, read from
// the GGUF header alone (no tensor data is touched). One JSON description feeds both outputs.
#include "cli/cli.h"
#include "devices/present.h"
#include "gguf/gguf.h"
#include "llm/config.h"
#include "llm/session.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>

namespace cli {

namespace {

using nlohmann::json;

const char* const HELP = R"(usage: tinyllm info [MODEL.gguf] [--json]

Describes a GGUF model from its header, without loading it: architecture, file size, parameter
count, tensor types, context length, embedding width, layers, heads / KV heads, experts, tokenizer,
vocabulary size and whether it has a chat template; for hybrid (recurrent) models, the state a
sequence carries and the memory its checkpoints may take. MODEL defaults to the built-in stories260K.
For a split model give the first part (<name>-00001-of-0000N.gguf); all parts are read.

options:
  --json      print the same as one JSON object (absent values are null)
  --devices   list the compute devices this machine has instead (CPU, AMD GPUs, USB-attached GPUs);
              --device takes the names shown without parentheses
  -h, --help  show this help
)";

// llama.cpp's llama_ftype, stored as general.file_type: what the file was quantized "mostly" to.
const char* file_type_name(uint64_t t) {
    static const std::map<uint64_t, const char*> names = {
        {0, "F32"},      {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},     {7, "Q8_0"},     {8, "Q5_0"},
        {9, "Q5_1"},     {10, "Q2_K"},    {11, "Q3_K_S"},  {12, "Q3_K_M"},  {13, "Q3_K_L"},  {14, "Q4_K_S"},
        {15, "Q4_K_M"},  {16, "Q5_K_S"},  {17, "Q5_K_M"},  {18, "Q6_K"},    {19, "IQ2_XXS"}, {20, "IQ2_XS"},
        {21, "Q2_K_S"},  {22, "IQ3_XS"},  {23, "IQ3_XXS"}, {24, "IQ1_S"},   {25, "IQ4_NL"},  {26, "IQ3_S"},
        {27, "IQ3_M"},   {28, "IQ2_S"},   {29, "IQ2_M"},   {30, "IQ4_XS"},  {31, "IQ1_M"},   {32, "BF16"},
        {36, "TQ1_0"},   {37, "TQ2_0"},   {38, "MXFP4_MOE"}, {39, "NVFP4"}, {40, "Q1_0"},
    };
    auto it = names.find(t);
    return it == names.end() ? nullptr : it->second;
}

json to_json(const gguf::Value& v) {
    if (v.is_array()) {
        json a = json::array();
        for (const gguf::Value& item : v.array()) a.push_back(to_json(item));
        return a;
    }
    return std::visit([](const auto& x) -> json {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::vector<gguf::Value>>) return nullptr;
        else return x;
    }, v.v);
}

// An architecture key (".block_count" -> "<arch>.block_count") as JSON, null when absent.
json meta(const gguf::File& f, std::string_view key) {
    const gguf::Value* v = f.find(key);
    return v ? to_json(*v) : json(nullptr);
}

json describe(const gguf::File& f) {
    json d;
    d["path"] = f.path();
    d["file_size"] = f.file_size();
    d["parts"] = f.n_parts();
    d["gguf_version"] = f.version();
    d["architecture"] = f.architecture().empty() ? json(nullptr) : json(f.architecture());
    d["name"] = meta(f, "general.name");
    const gguf::Value* ft = f.find("general.file_type");
    const auto* ft_num = ft ? std::get_if<uint64_t>(&ft->v) : nullptr;
    const char* ft_name = ft_num ? file_type_name(*ft_num) : nullptr;
    d["file_type"] = ft_name ? json(ft_name) : ft ? to_json(*ft) : json(nullptr);

    uint64_t params = 0;
    std::map<std::string, std::pair<uint64_t, uint64_t>> types;  // name -> (tensors, bytes)
    for (const gguf::TensorInfo& t : f.tensors()) {
        params += static_cast<uint64_t>(t.n_elements());
        auto& [count, bytes] = types[std::string(gguf::type_name(t.type))];
        count++;
        bytes += t.n_bytes;
    }
    d["parameters"] = params;
    d["tensor_count"] = f.tensors().size();
    d["tensor_types"] = json::object();
    for (const auto& [name, cb] : types) d["tensor_types"][name] = {{"tensors", cb.first}, {"bytes", cb.second}};

    for (const char* key : {"context_length", "embedding_length", "block_count", "feed_forward_length",
                            "attention.head_count", "attention.head_count_kv", "expert_count",
                            "expert_used_count", "expert_shared_count"}) {
        std::string name = key;
        if (name.rfind("attention.", 0) == 0) name = name.substr(10);
        d[name] = meta(f, "." + std::string(key));  // null without an architecture
    }

    d["tokenizer_model"] = meta(f, "tokenizer.ggml.model");
    d["tokenizer_pre"] = meta(f, "tokenizer.ggml.pre");
    const gguf::Value* tokens = f.find("tokenizer.ggml.tokens");
    d["vocab_size"] = tokens && tokens->is_array() ? json(tokens->array().size()) : meta(f, ".vocab_size");
    d["chat_template"] = f.has("tokenizer.chat_template");
    // Hybrid models carry recurrent state per sequence, plus the session's checkpoints of it.
    d["recurrent_state_bytes"] = nullptr;
    try {
        int64_t bytes = llm::recurrent_state_bytes(llm::read_config(f));
        if (bytes > 0) d["recurrent_state_bytes"] = bytes, d["state_checkpoints"] = llm::SessionOptions{}.n_checkpoints;
    } catch (const std::exception&) {  // not a model we run: nothing to say about its state
    }
    return d;
}

std::string human_bytes(uint64_t n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double x = static_cast<double>(n);
    int u = 0;
    while (x >= 1024 && u < 4) x /= 1024, u++;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", x, units[u]);
    return buf;
}

std::string human_count(uint64_t n) {
    const char* units[] = {"", " K", " M", " B", " T"};
    double x = static_cast<double>(n);
    int u = 0;
    while (x >= 1000 && u < 4) x /= 1000, u++;
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.2f%s", x, units[u]);
    return buf;
}

// A scalar as itself, an array (per-layer values) as "a b c (per layer)", null as "-".
std::string text(const json& v) {
    if (v.is_null()) return "-";
    if (v.is_string()) return v.get<std::string>();
    if (v.is_array()) {
        std::string s;
        for (const json& x : v) s += (s.empty() ? "" : " ") + text(x);
        return s + " (per layer)";
    }
    return v.dump();
}

void print_text(const json& d) {
    auto row = [](const char* label, const std::string& value) { std::printf("%-15s %s\n", label, value.c_str()); };
    row("file", d["path"].get<std::string>());
    uint64_t size = d["file_size"];
    size_t parts = d["parts"];
    row("size", std::to_string(size) + " bytes (" + human_bytes(size) + "), " + std::to_string(parts) +
                    (parts == 1 ? " part" : " parts") + ", GGUF v" + d["gguf_version"].dump());
    row("architecture", text(d["architecture"]));
    row("name", text(d["name"]));
    row("file type", text(d["file_type"]));
    uint64_t params = d["parameters"];
    row("parameters", human_count(params) + " (" + std::to_string(params) + ")");
    std::vector<std::pair<uint64_t, std::string>> by_bytes;
    for (const auto& [name, t] : d["tensor_types"].items())
        by_bytes.emplace_back(t["bytes"].get<uint64_t>(),
                              name + " " + t["tensors"].dump() + " (" + human_bytes(t["bytes"].get<uint64_t>()) + ")");
    std::sort(by_bytes.rbegin(), by_bytes.rend());
    std::string hist;
    for (const auto& [bytes, s] : by_bytes) hist += (hist.empty() ? "" : ", ") + s;
    row("tensors", d["tensor_count"].dump() + (hist.empty() ? "" : ": " + hist));
    row("context length", text(d["context_length"]));
    row("embedding", text(d["embedding_length"]));
    row("layers", text(d["block_count"]));
    row("feed forward", text(d["feed_forward_length"]));
    row("heads", text(d["head_count"]));
    row("KV heads", text(d["head_count_kv"]));
    std::string experts = text(d["expert_count"]), detail;
    if (!d["expert_used_count"].is_null()) detail = text(d["expert_used_count"]) + " used";
    if (!d["expert_shared_count"].is_null()) detail += (detail.empty() ? "" : ", ") + text(d["expert_shared_count"]) + " shared";
    row("experts", detail.empty() ? experts : experts + " (" + detail + ")");
    row("tokenizer", text(d["tokenizer_model"]) + ", pre-tokenizer " + text(d["tokenizer_pre"]) + ", " +
                         text(d["vocab_size"]) + " tokens");
    row("chat template", d["chat_template"].get<bool>() ? "yes" : "no");
    if (!d["recurrent_state_bytes"].is_null()) {
        uint64_t bytes = d["recurrent_state_bytes"], n = d["state_checkpoints"];
        row("recurrent", human_bytes(bytes) + " of state per sequence, plus up to " + std::to_string(n) +
                             " checkpoints of it at turn boundaries (" + human_bytes(n * bytes) + ")");
    }
}

}  // namespace

int cmd_info(const std::vector<std::string>& argv) {
    Args args(argv, "info");
    if (args.flag("--help") || args.flag("-h")) {
        std::fputs(HELP, stdout);
        return 0;
    }
    if (args.flag("--devices")) {
        // --device takes the names shown bare; a name in parentheses is a backend it cannot use (yet)
        for (const auto& d : devices::list_present()) {
            const std::string name = accepts_device(d.name) ? d.name : "(" + d.name + ")";
            std::printf("%-10s %s\n", name.c_str(), d.description.c_str());
            for (const std::string& line : d.details) std::printf("%-10s   %s\n", "", line.c_str());
        }
        return 0;
    }
    bool as_json = args.flag("--json");
    auto pos = args.positionals();
    if (pos.size() > 1) args.usage_error("expects at most one model file");
    auto f = gguf::File::open(pos.empty() ? builtin_model_path() : resolve_model(pos[0]));
    json d = describe(*f);
    // Names and strings come from the file: invalid UTF-8 is replaced, not an error.
    if (as_json) std::printf("%s\n", d.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    else print_text(d);
    return 0;
}

}  // namespace cli
