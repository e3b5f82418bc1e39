// Loading GGUF tensors as engine tensors: shapes checked against what the config implies, data left
// in the mmap (never copied or expanded). Every block's load() takes one (llm/blocks.h).
#pragma once

#include "engine/tensor.h"
#include "gguf/gguf.h"

#include <memory>
#include <stdexcept>
#include <string>

namespace llm {

class WeightLoader {
public:
    explicit WeightLoader(std::shared_ptr<const gguf::File> file) : f_(std::move(file)) {}

    // The tensor `name` with the engine shape `expect` (outermost first: a matmul weight is (out, in));
    // throws naming the file and the tensor when it is missing or shaped differently.
    // sparse: left in the file mapping, for a table read a few rows at a time (embeddings) or a matmul
    // weight handed to engine::linear_weight, which packs it straight from the mapping (or, where the
    // device does not pack it, copies it whole then): no copy of the file's bytes made only to be dropped.
    engine::Tensor get(const std::string& name, const engine::Shape& expect, bool sparse = false) const;
    // Like get(), but an absent tensor gives an undefined Tensor.
    engine::Tensor get_optional(const std::string& name, const engine::Shape& expect, bool sparse = false) const;
    // Layer tensor "blk.<il>.<name>".
    engine::Tensor layer(int il, const std::string& name, const engine::Shape& expect) const {
        return get("blk." + std::to_string(il) + "." + name, expect);
    }
    // Layer matmul weight for engine::linear_weight (left in the mapping, see `sparse`).
    engine::Tensor layer_matrix(int il, const std::string& name, const engine::Shape& expect) const {
        return get("blk." + std::to_string(il) + "." + name, expect, /*sparse=*/true);
    }
    engine::Tensor layer_optional(int il, const std::string& name, const engine::Shape& expect) const {
        return get_optional("blk." + std::to_string(il) + "." + name, expect);
    }
    const gguf::File& file() const { return *f_; }

private:
    std::shared_ptr<const gguf::File> f_;
};

}  // namespace llm
