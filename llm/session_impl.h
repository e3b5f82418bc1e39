// Between the two sessions: the single-sequence one (generate.cpp) lends its model to the one that
// runs several sequences at once (batched_session.cpp).
#pragma once

#include "llm/model.h"
#include "llm/session.h"

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace llm {

// What generate() refuses in every session: an empty prompt or an id outside the vocabulary
// (std::invalid_argument), a prompt longer than the context (std::length_error).
inline void check_prompt(const std::vector<int32_t>& prompt, const ModelInfo& info) {
    if (prompt.empty()) throw std::invalid_argument("[generate] the prompt is empty");
    if (int64_t(prompt.size()) > info.n_ctx)
        throw std::length_error("[generate] the prompt has " + std::to_string(prompt.size()) + " tokens, more than the context of " +
                                std::to_string(info.n_ctx));
    for (int32_t id : prompt)
        if (id < 0 || id >= info.n_vocab) throw std::invalid_argument("[generate] token id " + std::to_string(id) + " is outside the vocabulary");
}

// Generates through a BatchRunner over `model` (owned by `single`, which keeps serving embed()).
std::unique_ptr<Session> open_batched_session(std::unique_ptr<Session> single, const Model& model, const SessionOptions& options);

}  // namespace llm
