// Between the two sessions: the single-sequence one (generate.cpp) lends its model to the one that
// runs several sequences at once (batched_session.cpp).
#pragma once

#include "llm/model.h"
#include "llm/session.h"

#include <memory>

namespace llm {

// Generates through a BatchRunner over `model` (owned by `single`, which keeps serving embed()).
std::unique_ptr<Session> open_batched_session(std::unique_ptr<Session> single, const Model& model, const SessionOptions& options);

}  // namespace llm
