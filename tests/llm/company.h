// How far a sequence's logits in a batch may stray from its lone run's (tests/llm/batch_test.cpp,
// batched_session_test.cpp), relative to the step's top logit (at least 1). The batch's matmuls, prefill
// attention and delta-rule chunks sum in another order than a lone token's; measured (AMD EPYC Zen 5):
// ≤ 4e-5 on stories260K, ≤ 8.2e-4 on the random f16/f32 models; since the few-token F16/BF16/F32 rows sum
// in four chains, up to 1.55e-3 (random-qwen35-f16 prompt 0, AMD EPYC Zen 4; the others ≤ 7e-4). Where a
// model's weights are quantized, its matmuls quantize the activations to 8 bits: such a difference usually
// vanishes in the rounding (0 on most prompts) but can move one activation by a quantization step
// instead, and the random models amplify it: up to 2.8e-2 (deepseek2-q8_0), 4.4e-2 (qwen3next-q8_0),
// 7.3e-3 (gpt-oss-mxfp4). A q8_0 or q4_0 KV cache quantizes the keys and values the same way: up to
// 5.9e-3 (glm4moe-f32, q4_0; Xeon Sapphire Rapids).
#pragma once

#include "gguf/gguf.h"

#include <string>

namespace test_data {

inline float batch_logit_tolerance(const std::string& model_path, gguf::Type kv = gguf::Type::F16) {
    auto file = gguf::File::open(model_path);
    for (const gguf::TensorInfo& t : file->tensors())
        if (t.name.rfind("blk.", 0) == 0 && t.type != gguf::Type::F32 && t.type != gguf::Type::F16 && t.type != gguf::Type::BF16)
            return 5e-2f;
    return kv == gguf::Type::F16 || kv == gguf::Type::F32 ? 2e-3f : 1e-2f;
}

}  // namespace test_data
