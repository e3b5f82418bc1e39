// WeightLoader: GGUF tensor infos -> engine tensors over the mapped file.
#include "llm/weights.h"

namespace llm {

namespace {

// GGUF lists dims innermost first; the engine is row-major with the outermost first.
engine::Shape engine_shape(const gguf::TensorInfo& t) {
    engine::Shape s;
    for (auto it = t.dims.rbegin(); it != t.dims.rend(); ++it) s.push_back(*it);
    return s;
}

}  // namespace

engine::Tensor WeightLoader::get_optional(const std::string& name, const engine::Shape& expect, bool sparse) const {
    const gguf::TensorInfo* t = f_->find_tensor(name);
    if (!t) return {};
    engine::Shape shape = engine_shape(*t);
    // GGUF may keep trailing unit dims (ssm_a as (1, 4, 1, 1)): compare without leading ones.
    while (shape.size() > expect.size() && shape.front().value() == 1) shape.erase(shape.begin());
    bool ok = shape.size() == expect.size();
    for (size_t i = 0; ok && i < shape.size(); i++) ok = shape[i].value() == expect[i].value();
    if (!ok)
        throw std::runtime_error("[model] " + f_->path() + ": tensor '" + name + "' has shape " + engine::shape_str(shape) +
                                 ", expected " + engine::shape_str(expect));
    return engine::Tensor::external(t->data, shape, engine::DType::from_gguf(t->type), f_, sparse);
}

engine::Tensor WeightLoader::get(const std::string& name, const engine::Shape& expect, bool sparse) const {
    engine::Tensor t = get_optional(name, expect, sparse);
    if (!t.defined()) throw std::runtime_error("[model] " + f_->path() + ": missing tensor '" + name + "'");
    return t;
}

}  // namespace llm
