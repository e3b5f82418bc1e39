// One generation's choice of each next token, shared by the sessions: forced ids or the sampler, the
// grammar (masking only when the unconstrained choice is refused), the step record on_token hears, and
// the rules that end a generation (cancellation, the grammar, the callback, an end token, max_tokens).
#pragma once

#include "llm/grammar.h"
#include "llm/sampler.h"

#include <memory>
#include <span>
#include <vector>

namespace llm {

class TokenPicker {
public:
    // `vocab` is needed only when opt.grammar has a grammar.
    TokenPicker(const GenerateOptions& opt, const tok::Tokenizer& tokenizer, const GrammarVocab* vocab);

    // Chooses the token after `logits`, appends it to r.ids and calls on_token. True when the generation
    // goes on (the token needs a forward pass), false when it ended here (r.finish says why; LENGTH at
    // max_tokens or the end of the forced ids). Cancellation ends it before a token is chosen.
    bool next(std::span<const float> logits, GenerateResult& r);

private:
    const GenerateOptions& opt_;
    const tok::Tokenizer& tokenizer_;
    Sampler sampler_;
    std::unique_ptr<GrammarConstraint> grammar_;
    int n_steps_ = 0;
    std::vector<float> masked_;  // (n_vocab) logits with the grammar's mask applied
};

}  // namespace llm
