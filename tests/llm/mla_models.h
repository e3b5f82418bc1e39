// Test models derived from ../shared/models that isolate multi-head latent attention: the deepseek2 file
// with dense FFNs in place of its MoE layers, kimi-linear's MLA layer alone (as a deepseek2 model), and
// variants with linear / YaRN RoPE scaling. Written with gguf::Writer into a temporary directory; their
// llama.cpp reference logits are recorded in tests/llm/mla_refs/ (see mla_refs_test.cpp).
#pragma once

#include <string>
#include <vector>

namespace mla_models {

// The derived models llama.cpp runs: their references are tests/llm/mla_refs/<name>.json. ("kimi-mla-f32",
// kimi-linear with only its MLA layer, is derived too, but llama.cpp cannot run it.)
std::vector<std::string> names();

// Writes the derived model `name` to `path`. Deterministic: the same bytes each time.
void write(const std::string& name, const std::string& path);

// The model written once per test process into a temporary directory; returns its path.
std::string path(const std::string& name);

}  // namespace mla_models
