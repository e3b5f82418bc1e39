// Golden comparison helpers: one session per model, teacher-forced logits per step, greedy prefix.
#include "golden.h"

#include "common/test_data.h"
#include "engine/tensor.h"
#include "gguf/blocks.h"
#include "llm/session.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

namespace golden {

namespace {

std::string file_type_of(const std::string& stem) {
    // "random-qwen3-f32" -> "f32"; "quant-q4_k_m" -> "q4_k_m"; "stories260K-q8_0" -> "q8_0"
    if (stem.rfind("quant-", 0) == 0) return stem.substr(6);
    return stem.substr(stem.rfind('-') + 1);
}

std::string model_name_of(const std::string& stem) {
    if (stem.rfind("quant-", 0) == 0) return stem;
    return stem.substr(0, stem.rfind('-'));
}

nlohmann::json read_json(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return nlohmann::json::parse(in);
}

}  // namespace

nlohmann::json load(const std::string& stem) { return read_json(test_data::shared("golden/llamacpp/" + stem + ".json")); }

Tolerance tolerance(const std::string& stem, bool ggml_like) {
    nlohmann::json t = read_json(test_data::shared("golden/llamacpp/tolerances.json"));
    std::string name = model_name_of(stem), type = file_type_of(stem), cls;
    for (auto& [c, members] : t["classes"].items())
        for (auto& m : members)
            if (m == name) cls = c;
    if (cls.empty()) throw std::runtime_error("no tolerance class for " + stem);
    const nlohmann::json& row = t[ggml_like ? "ggml_like_activations" : "f32_activations"][cls];
    Tolerance tol;
    if (!row.contains(type) || row[type].is_null()) {
        tol.checkable = false;
        return tol;
    }
    tol.tau = row[type].get<double>();
    tol.outliers = row.value("outliers", 0);
    tol.outlier_cap = row.value("outlier_cap", 0.0);
    return tol;
}

bool ggml_like_activations(const std::string& stem) {
    std::string type = file_type_of(stem);
    if (type == "f32") return true;
    // y = w · x with w = e_1 exactly representable and x[1] = 0.3 (not an F16 value, nor a multiple of
    // x's Q8_0 block scale 1/127): a rounded activation moves y by ~1e-4 relative or more.
    std::vector<float> x(32, 0.0f);
    x[0] = 1.0f, x[1] = 0.3f;
    engine::Tensor w;
    if (type == "f16") {
        std::vector<uint16_t> h(32, gguf::f32_to_f16(0.0f));
        h[1] = gguf::f32_to_f16(1.0f);
        w = engine::Tensor::from_data(h.data(), h.size() * 2, {1, 32}, engine::f16);
    } else if (type == "q8_0") {
        gguf::block_q8_0 b{};
        b.d = gguf::f32_to_f16(1.0f);
        b.qs[1] = 1;
        w = engine::Tensor::from_data(&b, sizeof b, {1, 32}, engine::DType::from_gguf(gguf::Type::Q8_0));
    } else {
        return false;
    }
    float y = engine::linear(engine::Tensor::from_vector(x, {1, 32}), w).item<float>();
    return std::fabs(y - 0.3f) > 1e-5f;
}

std::string CaseReport::describe() const {
    std::ostringstream o;
    o << "prompt '" << prompt << "': prompt ids " << (prompt_ids_ok ? "ok" : "DIFFER") << ", no-special ids "
      << (prompt_ids_no_special_ok ? "ok" : "DIFFER") << "; logits " << (logits_ok ? "ok" : "FAIL") << " (worst "
      << worst_sigma << " sigma, " << steps_over_tau << " steps over tau); greedy " << greedy_matched << "/"
      << greedy_checked;
    return o.str();
}

std::vector<CaseReport> run(const std::string& stem, const Tolerance& tol, bool kv_f16, bool use_hp) {
    return run_file(test_data::shared("models/" + stem + ".gguf"), load(stem), tol, kv_f16, use_hp);
}

std::vector<CaseReport> run_file(const std::string& model_path, const nlohmann::json& g, const Tolerance& tol, bool kv_f16, bool use_hp) {
    llm::SessionOptions so;
    so.model_path = model_path;
    so.n_ctx = 512;
    so.kv_type = kv_f16 ? gguf::Type::F16 : gguf::Type::F32;
    auto session = llm::open_session(so);
    const tok::Tokenizer& tk = session->tokenizer();
    std::vector<CaseReport> reports;
    for (const auto& c : g["cases"]) {
        CaseReport r;
        r.prompt = c["prompt"].get<std::string>();
        auto prompt_ids = c["prompt_ids"].get<std::vector<int32_t>>();
        auto gen = c["generated_ids"].get<std::vector<int32_t>>();
        r.prompt_ids_ok = tk.encode(r.prompt, true, true) == prompt_ids;
        r.prompt_ids_no_special_ok = tk.encode(r.prompt, false, false) == c["prompt_ids_no_special"].get<std::vector<int32_t>>();

        // Teacher forcing: the logits of step i follow the prompt and gen[0..i-1].
        const auto& steps = c["steps"];
        llm::GenerateOptions go;
        go.forced = gen;
        go.max_tokens = static_cast<int>(gen.size());
        go.stop_at_end = false;
        size_t step = 0;
        go.on_token = [&](const llm::TokenStep& s) {
            const auto& st = steps[step++];
            double sigma = st["logit_std"].get<double>(), err = 0.0;
            for (const auto& pair : st[use_hp ? "top_logits_hp" : "top_logits"])
                err = std::max(err, std::fabs(double(s.logits[pair[0].get<int>()]) - pair[1].get<double>()));
            r.step_err_sigma.push_back(err / sigma);
            return true;
        };
        session->reset();
        session->generate(prompt_ids, go);
        int over_cap = 0;
        for (double e : r.step_err_sigma) {
            r.worst_sigma = std::max(r.worst_sigma, e);
            if (e > tol.tau) r.steps_over_tau++;
            if (e > tol.tau && (tol.outliers == 0 || e > tol.outlier_cap)) over_cap++;
        }
        r.logits_ok = r.step_err_sigma.size() == gen.size() && r.steps_over_tau <= tol.outliers && over_cap == 0;

        // Free-running greedy: must match up to the first step whose top-2 gap is within the tolerance,
        // or whose teacher-forced logits are an allowed outlier (an MoE expert flip: its argmax may differ).
        // generated_ids come from llama.cpp's flash-attention run; against the high-precision logits
        // the prefix also ends where that reference's own top-1 differs from them (llama.cpp's two
        // runs disagree there, e.g. an expert choice flipped by F16 rounding).
        size_t n_check = gen.size();
        for (size_t i = 0; i < steps.size(); i++) {
            double gap = steps[i]["gap12"].get<double>(), sigma = steps[i]["logit_std"].get<double>();
            bool outlier = i < r.step_err_sigma.size() && r.step_err_sigma[i] > tol.tau;
            bool hp_disagrees = use_hp && steps[i]["top_logits_hp"][0][0].get<int32_t>() != gen[i];
            if (gap < std::max(1e-3, 2 * tol.tau * sigma) || outlier || hp_disagrees) {
                n_check = i;
                break;
            }
        }
        llm::GenerateOptions greedy;
        greedy.max_tokens = static_cast<int>(n_check);
        greedy.stop_at_end = false;
        session->reset();
        auto out = session->generate(prompt_ids, greedy).ids;
        r.greedy_checked = static_cast<int>(n_check);
        while (r.greedy_matched < r.greedy_checked && out[r.greedy_matched] == gen[r.greedy_matched]) r.greedy_matched++;
        reports.push_back(r);
    }
    return reports;
}

}  // namespace golden
