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
    // sparse: read a few rows at a time (embedding tables), so left in the file mapping.
    engine::Tensor get(const std::string& name, const engine::Shape& expect, bool sparse = false) const;
    // Like get(), but an absent tensor gives an undefined Tensor.
    engine::Tensor get_optional(const std::string& name, const engine::Shape& expect, bool sparse = false) const;
    // Layer tensor "blk.<il>.<name>".
    engine::Tensor layer(int il, const std::string& name, const engine::Shape& expect) const {
        return get("blk." + std::to_string(il) + "." + name, expect);
    }
    engine::Tensor layer_optional(int il, const std::string& name, const engine::Shape& expect) const {
        return get_optional("blk." + std::to_string(il) + "." + name, expect);
    }
    const gguf::File& file() const { return *f_; }

private:
    std::shared_ptr<const gguf::File> f_;
};

}  // namespace llm
