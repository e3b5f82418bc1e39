// The vocabulary's bytes as a trie for the grammar's mask walk, and GrammarConstraint: the grammar
// as the sampler applies it (masking logits, advancing, waiting for a lazy trigger).
#include "llm/grammar.h"

#include <algorithm>
#include <limits>
#include <map>

namespace llm {

GrammarVocab::GrammarVocab(const tok::Tokenizer& tokenizer) : tokenizer_(tokenizer), n_vocab_(tokenizer.n_vocab()) {
    texts_.resize(size_t(n_vocab_));
    in_trie_.assign(size_t(n_vocab_), false);
    std::vector<int32_t> order;
    for (int32_t id = 0; id < n_vocab_; id++) {
        if (tokenizer.is_end(id)) end_tokens_.push_back(id);
        if (tokenizer.is_special(id)) continue;  // only a grammar that names them takes special tokens
        texts_[size_t(id)] = tokenizer.token_text(id, false);
        if (texts_[size_t(id)].empty()) continue;
        in_trie_[size_t(id)] = true;
        order.push_back(id);
        max_len_ = std::max(max_len_, texts_[size_t(id)].size());
    }
    // Sorted texts give each node's children contiguously: build the trie level by level from them.
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return texts_[size_t(a)] < texts_[size_t(b)]; });
    struct Build {
        std::map<uint8_t, uint32_t> children;
        std::vector<int32_t> tokens;
    };
    std::vector<Build> build(1);
    for (int32_t id : order) {
        uint32_t node = 0;
        for (unsigned char b : texts_[size_t(id)]) {
            auto it = build[node].children.find(b);
            if (it == build[node].children.end()) {
                uint32_t next = uint32_t(build.size());
                build[node].children.emplace(b, next);
                build.emplace_back();
                node = next;
            } else {
                node = it->second;
            }
        }
        build[node].tokens.push_back(id);
    }
    nodes_.resize(build.size());
    for (size_t i = 0; i < build.size(); i++) {
        nodes_[i].first_child = uint32_t(children_.size());
        nodes_[i].n_children = uint32_t(build[i].children.size());
        for (auto [byte, node] : build[i].children) children_.push_back({byte, node});
        nodes_[i].first_token = uint32_t(node_tokens_.size());
        nodes_[i].n_tokens = uint32_t(build[i].tokens.size());
        node_tokens_.insert(node_tokens_.end(), build[i].tokens.begin(), build[i].tokens.end());
    }
}

GrammarConstraint::GrammarConstraint(const GrammarSpec& spec, const GrammarVocab& vocab)
    : spec_(spec), vocab_(vocab), matcher_(spec.grammar, vocab), active_(!spec.lazy()) {}

bool GrammarConstraint::apply(std::vector<float>& logits) {
    if (!active_) return true;
    const std::vector<uint64_t>& mask = matcher_.allowed();
    bool any = false;
    const float NEG = -std::numeric_limits<float>::infinity();
    for (size_t w = 0; w < mask.size(); w++) {
        uint64_t bits = mask[w];
        if (bits == ~uint64_t(0)) {
            any = true;
            continue;
        }
        size_t end = std::min(logits.size(), (w + 1) * 64);
        for (size_t i = w * 64; i < end; i++)
            if (!(bits >> (i & 63) & 1)) logits[i] = NEG;
        any = any || bits != 0;
    }
    return any;
}

bool GrammarConstraint::accept(int32_t id) {
    if (active_) return matcher_.accept_token(id);
    if (std::find(spec_.trigger_tokens.begin(), spec_.trigger_tokens.end(), id) != spec_.trigger_tokens.end()) {
        active_ = true;
        // a grammar that starts with the trigger token takes it; one that starts after it constrains what follows
        matcher_.accept_token(id);
        return true;
    }
    if (id < 0 || id >= vocab_.n_vocab() || !vocab_.in_trie(id) || past_start_) return true;
    seen_ += vocab_.text(id);
    if (spec_.trigger_at_start) {
        const size_t blank = seen_.find_first_not_of(" \t\r\n");
        if (blank == std::string::npos) return true;
        const std::string_view rest = std::string_view(seen_).substr(blank);
        bool maybe = false;
        for (const std::string& word : spec_.trigger_words) {
            if (rest.starts_with(word)) {
                active_ = true;
                return matcher_.accept_text(rest);
            }
            maybe = maybe || std::string_view(word).starts_with(rest);
        }
        if (!maybe) past_start_ = true, seen_.clear();
        return true;
    }
    size_t best = std::string::npos;
    for (const std::string& word : spec_.trigger_words) best = std::min(best, seen_.find(word));
    if (best == std::string::npos) {
        size_t keep = 0;  // only a tail that may still start a trigger word needs keeping
        for (const std::string& word : spec_.trigger_words) keep = std::max(keep, word.size());
        if (seen_.size() > keep) seen_.erase(0, seen_.size() - keep);
        return true;
    }
    active_ = true;  // constrain from the trigger word on: the grammar starts with it
    return matcher_.accept_text(std::string_view(seen_).substr(best));
}

}  // namespace llm
