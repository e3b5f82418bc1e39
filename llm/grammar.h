// Grammar-constrained sampling: GBNF grammars (llama.cpp's format) parsed into rules, JSON Schema
// converted to GBNF, a stack-based matcher over code points, and per-state token masks computed over a
// trie of the vocabulary's bytes (cached per matcher state, so a repeated state costs one lookup).
#pragma once

#include "llm/session.h"
#include "tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace llm {

// A grammar or schema that cannot be used. The message starts with "[grammar] " or "[json_schema] "
// and names the line:column, rule or keyword.
struct GrammarError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class GrammarOp : uint8_t {
    END,             // end of a rule
    ALT,             // start of the next alternative
    RULE_REF,        // value: rule id
    CHAR,            // value: code point; starts a character set
    CHAR_NOT,        // value: code point; starts a negated set
    CHAR_RNG_UPPER,  // value: upper bound of the range the previous CHAR / CHAR_ALT starts
    CHAR_ALT,        // value: another code point of the set
    CHAR_ANY,        // any code point
    TOKEN,           // value: index into Grammar::tokens; exactly that (special) token
    TOKEN_NOT,       // value: index into Grammar::tokens; any one token except it
};

struct GrammarElement {
    GrammarOp op;
    uint32_t value;
};

struct Grammar {
    std::vector<std::vector<GrammarElement>> rules;  // alternatives separated by ALT, closed by END
    std::vector<std::string> rule_names;
    std::vector<std::string> tokens;  // token references as written: "<|im_end|>" or "[123]" (an id)
    uint32_t root = 0;
};

// Parses GBNF text (rules, alternation, groups, * + ? {m,n}, character classes with ranges and
// negation, escapes, comments, `.`, tokens <...> / <[id]> / !<...>). The start rule is `root`. The
// start state must be within the matcher's budget (check_grammar_budget).
std::shared_ptr<const Grammar> parse_gbnf(std::string_view text);
// Throws GrammarError when the grammar's start state exceeds the matcher's budget (too many parse
// stacks, too many rules that match nothing in a row); a later state that does throws from the matcher.
void check_grammar_budget(const Grammar& grammar);

// A JSON Schema as GBNF text whose root produces one compact JSON value the schema accepts. Throws
// GrammarError naming any keyword it does not support.
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);
// GBNF rules for several schemas at once (tool-call grammars): rule `name` produces a value of its
// schema; the shared JSON rules (json-value, json-string, ...) are written once.
std::string json_schema_rules(const std::vector<std::pair<std::string, nlohmann::ordered_json>>& schemas);
// A GBNF string literal for `text` (quotes and escapes included).
std::string gbnf_literal(std::string_view text);
// A node of the directed graph (node i -> each of edges[i]) that lies on a cycle, or -1 when there is
// none: the left-recursion checks of the GBNF parser and of the JSON Schema converter.
int64_t node_on_cycle(const std::vector<std::vector<uint32_t>>& edges);

// The token ids of a grammar's token references under `tokenizer`; throws GrammarError for a name
// that is not one token.
std::vector<int32_t> resolve_grammar_tokens(const Grammar& grammar, const tok::Tokenizer& tokenizer);

// The vocabulary as the grammar sees it: every token's bytes (SentencePiece pieces and byte
// fallback decoded) in a byte trie. Special tokens are left out: only a grammar that names them
// accepts them. Built once per tokenizer.
class GrammarVocab {
public:
    explicit GrammarVocab(const tok::Tokenizer& tokenizer);
    const tok::Tokenizer& tokenizer() const { return tokenizer_; }
    int32_t n_vocab() const { return n_vocab_; }
    const std::string& text(int32_t id) const { return texts_[size_t(id)]; }
    bool in_trie(int32_t id) const { return in_trie_[size_t(id)]; }
    size_t max_len() const { return max_len_; }  // the longest token text, in bytes

    struct Node {
        uint32_t first_child = 0, n_children = 0;  // into children_
        uint32_t first_token = 0, n_tokens = 0;    // tokens whose bytes end here, into node_tokens_
    };
    struct Child {
        uint8_t byte;
        uint32_t node;
    };
    const std::vector<Node>& nodes() const { return nodes_; }
    const std::vector<Child>& children() const { return children_; }
    const std::vector<int32_t>& node_tokens() const { return node_tokens_; }
    const std::vector<int32_t>& end_tokens() const { return end_tokens_; }

private:
    const tok::Tokenizer& tokenizer_;
    int32_t n_vocab_;
    std::vector<std::string> texts_;
    std::vector<bool> in_trie_;
    size_t max_len_ = 0;
    std::vector<Node> nodes_;  // nodes_[0] is the root (the empty prefix)
    std::vector<Child> children_;
    std::vector<int32_t> node_tokens_;
    std::vector<int32_t> end_tokens_;  // end-of-generation ids: allowed where the grammar may end
};

// A set of parse stacks, stored flat: stack i is data[ends[i-1] .. ends[i]) (top last).
struct GrammarStacks {
    std::vector<const GrammarElement*> data;
    std::vector<uint32_t> ends;
    size_t size() const { return ends.size(); }
    bool empty() const { return ends.empty(); }
    void clear() { data.clear(), ends.clear(); }
    uint32_t begin_of(size_t i) const { return i == 0 ? 0 : ends[i - 1]; }
    const GrammarElement* top(size_t i) const { return ends[i] == begin_of(i) ? nullptr : data[ends[i] - 1]; }
};

// An incomplete UTF-8 sequence carried across tokens: value so far, continuation bytes missing
// (-1: invalid) and the sequence's length.
struct PartialUtf8 {
    uint32_t value = 0;
    int n_remain = 0;
    int len = 0;  // bytes of the whole sequence
};

// Where a grammar stands after the text so far, and which tokens may come next.
class GrammarMatcher {
public:
    GrammarMatcher(std::shared_ptr<const Grammar> grammar, const GrammarVocab& vocab);
    // Advances with `id`; false (state unchanged) when the grammar rejects it.
    bool accept_token(int32_t id);
    bool accept_text(std::string_view bytes);  // false (state unchanged) when rejected
    bool can_end() const;                      // the text so far is a complete sentence
    bool finished() const;                     // ... and nothing may follow it
    // Bit i set: token i may come next (n_vocab bits). Valid until the next call.
    const std::vector<uint64_t>& allowed();
    bool mask_known();           // allowed() of this state is cached (costs a lookup only)
    bool allows(int32_t id);     // may `id` come next? (one token's bytes: microseconds)
    size_t n_cached_states() const { return cache_.size(); }

private:
    bool advance_bytes(const GrammarStacks& from, PartialUtf8 partial, std::string_view bytes, GrammarStacks& out,
                       PartialUtf8& out_partial) const;
    bool advance_token_refs(const GrammarStacks& from, int32_t id, GrammarStacks& out) const;
    void compute_mask(std::vector<uint64_t>& mask);
    void visit(uint32_t node, size_t depth, std::vector<uint64_t>& mask);
    bool can_complete(const GrammarStacks& from, PartialUtf8 partial, uint32_t node);
    std::string state_key() const;

    std::shared_ptr<const Grammar> grammar_;
    const GrammarVocab& vocab_;
    std::vector<std::vector<const GrammarElement*>> alternatives_;  // rule id -> start of each alternative
    std::vector<int32_t> token_ids_;                               // Grammar::tokens resolved
    GrammarStacks stacks_;
    PartialUtf8 partial_;
    std::unordered_map<std::string, std::vector<uint64_t>> cache_;  // state -> allowed tokens
    const std::vector<uint64_t>* current_ = nullptr;
    // trie walk scratch: stack sets per depth and the UTF-8 state there
    std::vector<GrammarStacks> level_;
    std::vector<size_t> level_of_;
    std::vector<const GrammarElement*> work_;
    std::vector<PartialUtf8> partial_at_;
    struct SameStacks {  // per level_: stacks of it that took a character, and what they advanced to
        static constexpr size_t N = 8;
        struct Entry {
            std::vector<uint32_t> which;
            GrammarStacks out;
        } entries[N];
        size_t n = 0, next = 0;
    };
    std::vector<SameStacks> same_;
    std::vector<uint32_t> which_;
    size_t work_left_ = 0;  // expansions left for the mask being computed
    friend struct GrammarExpand;
};

// The grammar as the sampler applies it, lazy triggers included.
class GrammarConstraint {
public:
    GrammarConstraint(const GrammarSpec& spec, const GrammarVocab& vocab);
    bool active() const { return active_; }
    // Sets disallowed logits to -inf; false when no token at all is allowed (the generation must end).
    bool apply(std::vector<float>& logits);
    // Records the chosen token; false when the grammar cannot take it (the generation must end).
    bool accept(int32_t id);
    bool finished() const { return active_ && matcher_.finished(); }
    // llama.cpp's shortcut: while a state's mask is unknown, the unconstrained sampler's choice may be
    // checked alone; keeping it when allowed samples from the same distribution as masking first.
    bool mask_known() { return matcher_.mask_known(); }
    bool allows(int32_t id) { return matcher_.allows(id); }

private:
    GrammarSpec spec_;
    const GrammarVocab& vocab_;
    GrammarMatcher matcher_;
    bool active_;
    std::string seen_;  // lazy: generated text while waiting for a trigger word
    bool past_start_ = false;  // trigger_at_start: the reply began otherwise, no trigger can come
};

}  // namespace llm
