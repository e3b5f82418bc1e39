// Test models derived from ../shared/models that isolate multi-head latent attention: the deepseek2 file
// with dense FFNs in place of its MoE layers, kimi-linear's MLA layer alone (as a deepseek2 model), and
// variants with linear / YaRN RoPE scaling. Written with gguf::Writer into a temporary directory; their
// llama.cpp reference logits are recorded in tests/llm/data/mla_refs.json (see mla_refs_test.cpp).
#pragma once

#include <string>
#include <vector>

namespace mla_models {

// Every derived model: its name (also the key in mla_refs.json) and how it is made.
std::vector<std::string> names();

// Writes the derived model `name` (one of names()) to `path`. Deterministic: the same bytes each time.
void write(const std::string& name, const std::string& path);

// The model written once per test process into a temporary directory; returns its path.
std::string path(const std::string& name);

}  // namespace mla_models
