#include "llm/token_picker.h"

namespace llm {

TokenPicker::TokenPicker(const GenerateOptions& opt, const tok::Tokenizer& tokenizer, const GrammarVocab* vocab)
    : opt_(opt), tokenizer_(tokenizer), sampler_(opt.sampling),
      n_steps_(opt.forced.empty() ? opt.max_tokens : std::min<int>(opt.max_tokens, int(opt.forced.size()))) {
    if (opt.grammar.grammar) grammar_ = std::make_unique<GrammarConstraint>(opt.grammar, *vocab);
}

bool TokenPicker::next(std::span<const float> logits, GenerateResult& r) {
    const int step = int(r.ids.size());
    if (step >= n_steps_) return false;
    if (opt_.cancel && opt_.cancel->load()) {
        r.finish = FinishReason::CANCELLED;
        return false;
    }
    int32_t id = -1;
    if (!opt_.forced.empty()) {
        id = opt_.forced[size_t(step)];
    } else if (grammar_ && grammar_->active()) {
        if (!grammar_->mask_known()) {  // the unconstrained choice, when the grammar takes it
            const int32_t first = sampler_.sample(logits);
            if (grammar_->allows(first)) id = first;
        }
        if (id < 0) {
            masked_.assign(logits.begin(), logits.end());
            if (!grammar_->apply(masked_)) {  // nothing can continue the grammar
                r.finish = FinishReason::STOP;
                return false;
            }
            id = sampler_.sample(masked_);
        }
    } else {
        id = sampler_.sample(logits);
    }
    sampler_.accept(id);
    // a lazy grammar whose trigger is followed by text it rejects ends the generation
    const bool grammar_ok = !grammar_ || grammar_->accept(id);
    TokenStep s = describe_step(logits, id, opt_.n_top_logprobs, opt_.n_top_logits, opt_.logprobs);
    s.logits = logits.data();
    r.ids.push_back(id);
    if (opt_.on_token && !opt_.on_token(s)) {
        r.finish = FinishReason::CALLBACK;
        return false;
    }
    if (!grammar_ok || (opt_.stop_at_end && opt_.forced.empty() && tokenizer_.is_end(id))) {
        r.finish = FinishReason::STOP;
        return false;
    }
    return step + 1 < n_steps_;  // the last token needs no forward pass
}

}  // namespace llm
