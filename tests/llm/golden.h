// Comparison of tinyllm against llama.cpp's golden outputs (../shared/golden/llamacpp/README.md):
// exact prompt ids, teacher-forced logits within tau·sigma, and the greedy prefix before near-ties.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace golden {

struct Tolerance {
    double tau = 0.0;         // in units of the step's logit_std
    int outliers = 0;         // steps per case allowed over tau
    double outlier_cap = 0.0; // ... each still at most this many sigma
    bool checkable = true;    // false: the goldens say logits are not comparable this way
};

// The golden file of a model in ../shared/models ("random-qwen3-f32" -> .../random-qwen3-f32.json).
nlohmann::json load(const std::string& model_stem);

// The documented tolerance for `model_stem` (class and file type from its name). `ggml_like` selects
// the row for implementations that quantize activations like ggml (Q8_0 blocks before Q8_0 weights).
Tolerance tolerance(const std::string& model_stem, bool ggml_like);

// Whether our matmuls treat activations as ggml does for the weights of `model_stem`'s file type: F32
// stays F32; F16 and Q8_0 weights see activations rounded to F16 / Q8_0 blocks first. Measured by
// multiplying a value those formats cannot hold, so it follows whichever kernels engine::linear uses.
bool ggml_like_activations(const std::string& model_stem);

struct CaseReport {
    std::string prompt;
    bool prompt_ids_ok = false;
    bool prompt_ids_no_special_ok = false;
    std::vector<double> step_err_sigma;  // teacher-forced error per step, in sigma
    int steps_over_tau = 0;
    double worst_sigma = 0.0;
    bool logits_ok = false;
    int greedy_checked = 0;   // steps in the greedy prefix that must match
    int greedy_matched = 0;   // of those, how many matched
    std::string describe() const;
};

// Runs every case of the golden file through tinyllm (KV cache as given) and compares.
std::vector<CaseReport> run(const std::string& model_stem, const Tolerance& tol, bool kv_f16, bool use_hp_reference);
// The same for any model file and golden in that schema (test models derived from ../shared ones).
std::vector<CaseReport> run_file(const std::string& model_path, const nlohmann::json& golden, const Tolerance& tol, bool kv_f16,
                                 bool use_hp_reference);

}  // namespace golden
