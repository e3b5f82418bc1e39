// The LLVM IR every CPU kernel module starts with: intrinsic declarations and our math helpers
// (exp2, log2, sin, bf16 rounding) written as plain IR so the vectorizer can widen them.
#pragma once

#include <string>

namespace engine {

const std::string& llvm_prelude();
std::string hex_float(double v);   // an LLVM `float` literal (exactly the f32 value)
std::string hex_double(double v);  // an LLVM `double` literal

}  // namespace engine
