// The grammar matcher: a set of parse stacks (llama.cpp's design) advanced one code point at a time,
// with UTF-8 sequences that tokens split carried between them, and the allowed-token mask of a state
// found by walking the vocabulary trie with the stacks (cached by state).
#include "llm/grammar.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <string>
#include <unordered_set>

namespace llm {

namespace {

bool is_end_of_sequence(const GrammarElement* pos) { return pos->op == GrammarOp::END || pos->op == GrammarOp::ALT; }
bool is_char(const GrammarElement* pos) {
    return pos->op == GrammarOp::CHAR || pos->op == GrammarOp::CHAR_NOT || pos->op == GrammarOp::CHAR_ANY;
}

// Does the character set at `pos` take `c`? Returns the element after the set.
std::pair<bool, const GrammarElement*> match_char(const GrammarElement* pos, uint32_t c) {
    bool found = false;
    const bool positive = pos->op != GrammarOp::CHAR_NOT;
    do {
        if (pos[1].op == GrammarOp::CHAR_RNG_UPPER) {
            found = found || (pos->value <= c && c <= pos[1].value);
            pos += 2;
        } else if (pos->op == GrammarOp::CHAR_ANY) {
            found = true;
            pos += 1;
        } else {
            found = found || pos->value == c;
            pos += 1;
        }
    } while (pos->op == GrammarOp::CHAR_ALT);
    return {found == positive, pos};
}

// Could the set at `pos` take some code point that starts with the incomplete sequence `partial`?
bool match_partial_char(const GrammarElement* pos, PartialUtf8 partial) {
    const bool positive = pos->op != GrammarOp::CHAR_NOT;
    if (partial.n_remain < 0 || (partial.n_remain == 1 && partial.value < 2)) return false;  // overlong 2-byte
    uint32_t lo = partial.value << (partial.n_remain * 6);
    uint32_t hi = lo | ((1u << (partial.n_remain * 6)) - 1);
    if (lo == 0) lo = partial.n_remain == 2 ? 1u << 11 : partial.n_remain == 3 ? 1u << 16 : lo;  // no overlong forms
    do {
        if (pos[1].op == GrammarOp::CHAR_RNG_UPPER) {
            if (pos->value <= hi && lo <= pos[1].value) return positive;
            pos += 2;
        } else if (pos->op == GrammarOp::CHAR_ANY) {
            return true;
        } else {
            if (lo <= pos->value && pos->value <= hi) return positive;
            pos += 1;
        }
    } while (pos->op == GrammarOp::CHAR_ALT);
    return !positive;
}

// One byte of UTF-8 into `p`; returns true with `cp` set when it completes a code point. Overlong
// forms, surrogates and values past U+10FFFF are invalid (n_remain -1), as soon as their first two
// bytes show it.
bool feed_utf8(PartialUtf8& p, uint8_t b, uint32_t& cp) {
    if (p.n_remain == 0) {
        if (b < 0x80) return cp = b, true;
        if ((b & 0xE0) == 0xC0) p = {uint32_t(b & 0x1F), (b & 0x1F) < 2 ? -1 : 1, 2};
        else if ((b & 0xF0) == 0xE0) p = {uint32_t(b & 0x0F), 2, 3};
        else if ((b & 0xF8) == 0xF0) p = {uint32_t(b & 0x07), 3, 4};
        else p.n_remain = -1;
        return false;
    }
    if ((b & 0xC0) != 0x80) {
        p.n_remain = -1;
        return false;
    }
    p.value = (p.value << 6) | (b & 0x3F);
    p.n_remain--;
    if (p.len - p.n_remain == 2) {  // the first two bytes bound the code point
        const bool bad = p.len == 3 ? p.value < 0x20 || (p.value >= 0x360 && p.value <= 0x37F)
                                    : p.len == 4 && (p.value < 0x10 || p.value > 0x10F);
        if (bad) {
            p.n_remain = -1;
            return false;
        }
    }
    if (p.n_remain == 0) {
        cp = p.value;
        p.value = 0;
        p.len = 0;
        return true;
    }
    return false;
}

}  // namespace

// Expanding a stack until its top is a terminal (or it is empty: the grammar may end there).
struct GrammarExpand {
    const std::vector<std::vector<const GrammarElement*>>& alternatives;
    std::vector<const GrammarElement*>& work;
    // Empty alternatives under a repetition (`(("a" | | "d")?){6,27}`) reach the same work stack along
    // exponentially many paths. Past MEMO_AFTER expansions into one `out`, a stack already expanded
    // into it is skipped (its stacks are there already): polynomial for such grammars, free for the rest.
    GrammarExpand(const std::vector<std::vector<const GrammarElement*>>& alternatives_, std::vector<const GrammarElement*>& work_)
        : alternatives(alternatives_), work(work_) {}

    static constexpr size_t MEMO_AFTER = 4096;
    size_t calls = 0;
    std::unordered_set<std::string> seen;
    // Past INDEX_AFTER stacks in `out`, its duplicate check goes through a hash set of its stacks instead of
    // a linear scan: `word (","* word){63}` with an empty `word` puts a letter in any of 64 places, each
    // expanding through the rest, and the scans made every mask quadratic in them (found by fuzz_grammar).
    static constexpr size_t INDEX_AFTER = 64;
    const GrammarStacks* indexed = nullptr;  // the `out` whose stacks `in_out` holds
    std::unordered_set<std::string> in_out;

    // The budget that keeps every step bounded, whatever the grammar: a state holds at most MAX_STACKS
    // stacks (real grammars hold tens; 256 tools behind one opener hold 256), and an expansion passes
    // at most MAX_DEPTH rules that match nothing in a row (each is a native stack frame here:
    // `(w (","* w){900}){100}` with an optional `w` overflowed the thread's stack). Exceeding either is
    // a GrammarError, at parse time when the start state does (check_grammar_budget).
    static constexpr size_t MAX_STACKS = 1024, MAX_DEPTH = 2048;
    size_t depth = 0;
    // And the work of one mask: at most this many expansions (bench_grammar's JSON schema over 130k–150k
    // token vocabularies takes up to ~0.8M, most masks far fewer). `((.|."ab")?){230}` takes any character in any of 230 slots, so
    // each byte a mask tries cost thousands of expansions; over a large vocabulary's trie a mask never
    // ended. Exceeding it is a GrammarError, after well under a second.
    static constexpr size_t MASK_WORK = size_t(1) << 24;
    size_t* work_left = nullptr;  // the current mask's, when computing one

    static std::string key_of(const GrammarElement* const* stack, size_t n) {
        return std::string(reinterpret_cast<const char*>(stack), n * sizeof(*stack));
    }

    static void check_room(const GrammarStacks& out) {
        if (out.size() >= MAX_STACKS)
            throw GrammarError("[grammar] more than " + std::to_string(MAX_STACKS) +
                               " parse stacks at once: the grammar is too ambiguous (a repeated group that can match nothing?)");
    }

    static void add(GrammarStacks& out, const std::vector<const GrammarElement*>& stack) {
        for (size_t i = 0; i < out.size(); i++) {  // the sets are small: a linear duplicate check
            uint32_t b = out.begin_of(i);
            if (out.ends[i] - b == stack.size() && std::equal(stack.begin(), stack.end(), out.data.begin() + b)) return;
        }
        check_room(out);
        out.data.insert(out.data.end(), stack.begin(), stack.end());
        out.ends.push_back(uint32_t(out.data.size()));
    }

    void add_work(GrammarStacks& out) {
        if (out.size() < INDEX_AFTER) return add(out, work);
        if (indexed != &out || in_out.size() != out.size()) {  // first large add into this `out`: index it
            in_out.clear();
            for (size_t i = 0; i < out.size(); i++)
                in_out.insert(key_of(out.data.data() + out.begin_of(i), out.ends[i] - out.begin_of(i)));
            indexed = &out;
        }
        if (!in_out.insert(key_of(work.data(), work.size())).second) return;
        check_room(out);  // a duplicate never counts against the budget
        out.data.insert(out.data.end(), work.begin(), work.end());
        out.ends.push_back(uint32_t(out.data.size()));
    }

    void expand(GrammarStacks& out) {
        if (++calls > MEMO_AFTER &&
            !seen.emplace(reinterpret_cast<const char*>(work.data()), work.size() * sizeof(work[0])).second)
            return;
        if (depth >= MAX_DEPTH)
            throw GrammarError("[grammar] more than " + std::to_string(MAX_DEPTH) + " rules that can match nothing in a row");
        if (work_left && (*work_left)-- == 0)
            throw GrammarError("[grammar] the grammar is too ambiguous: the tokens allowed at one step take more than " +
                               std::to_string(MASK_WORK) + " parse steps (a repeated group that can match nothing?)");
        struct Nested {
            size_t& d;
            explicit Nested(size_t& d_) : d(++d_) {}
            ~Nested() { --d; }
        } nested(depth);
        if (work.empty()) return add_work(out);
        const GrammarElement* pos = work.back();
        if (pos->op != GrammarOp::RULE_REF) return add_work(out);
        work.pop_back();
        const GrammarElement* after = pos + 1;
        const bool push_after = !is_end_of_sequence(after);
        if (push_after) work.push_back(after);
        for (const GrammarElement* alt : alternatives[pos->value]) {
            if (is_end_of_sequence(alt)) {
                expand(out);
            } else {
                work.push_back(alt);
                expand(out);
                work.pop_back();
            }
        }
        if (push_after) work.pop_back();
        work.push_back(pos);
    }

    // The stacks of `from` whose top set takes `c`, in order.
    static void taking(const GrammarStacks& from, uint32_t c, std::vector<uint32_t>& out) {
        out.clear();
        for (size_t i = 0; i < from.size(); i++)
            if (const GrammarElement* top = from.top(i); top && is_char(top) && match_char(top, c).first) out.push_back(uint32_t(i));
    }

    // Every stack of `from` whose top set takes `c`, advanced past it and expanded, into `out`.
    void advance(const GrammarStacks& from, uint32_t c, GrammarStacks& out) {
        taking(from, c, taken);
        advance(from, taken, out);
    }
    std::vector<uint32_t> taken;
    // The stacks `which` of `from` (their top sets took a character), advanced and expanded, into `out`:
    // what follows a set does not depend on the character it took.
    void advance(const GrammarStacks& from, const std::vector<uint32_t>& which, GrammarStacks& out) {
        calls = 0;  // a new `out`: what was expanded into another one does not count
        seen.clear();
        indexed = nullptr;
        for (uint32_t i : which) {
            const GrammarElement* next = match_char(from.top(i), 0).second;
            work.assign(from.data.begin() + from.begin_of(i), from.data.begin() + from.ends[i] - 1);
            if (!is_end_of_sequence(next)) work.push_back(next);
            expand(out);
        }
    }
};

namespace {

// rule id -> the start of each of its alternatives
std::vector<std::vector<const GrammarElement*>> alternatives_of(const Grammar& grammar) {
    std::vector<std::vector<const GrammarElement*>> alternatives(grammar.rules.size());
    for (size_t r = 0; r < grammar.rules.size(); r++) {
        const auto& rule = grammar.rules[r];
        alternatives[r].push_back(rule.data());
        for (size_t i = 0; i < rule.size(); i++)
            if (rule[i].op == GrammarOp::ALT) alternatives[r].push_back(&rule[i + 1]);
    }
    return alternatives;
}

// The start state: the root's alternatives expanded.
void expand_start(const Grammar& grammar, const std::vector<std::vector<const GrammarElement*>>& alternatives,
                  std::vector<const GrammarElement*>& work, GrammarStacks& out) {
    GrammarExpand ex{alternatives, work};
    for (const GrammarElement* alt : alternatives[grammar.root]) {
        ex.work.clear();
        if (!is_end_of_sequence(alt)) ex.work.push_back(alt);
        ex.expand(out);
    }
}

}  // namespace

void check_grammar_budget(const Grammar& grammar) {
    std::vector<const GrammarElement*> work;
    GrammarStacks start;
    expand_start(grammar, alternatives_of(grammar), work, start);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, const GrammarVocab& vocab)
    : grammar_(std::move(grammar)), vocab_(vocab) {
    token_ids_ = resolve_grammar_tokens(*grammar_, vocab_.tokenizer());
    alternatives_ = alternatives_of(*grammar_);
    expand_start(*grammar_, alternatives_, work_, stacks_);
}

bool GrammarMatcher::can_end() const {
    if (partial_.n_remain != 0) return false;
    for (size_t i = 0; i < stacks_.size(); i++)
        if (!stacks_.top(i)) return true;
    return false;
}

bool GrammarMatcher::finished() const { return can_end() && stacks_.size() == 1; }

bool GrammarMatcher::advance_bytes(const GrammarStacks& from, PartialUtf8 partial, std::string_view bytes, GrammarStacks& out,
                                   PartialUtf8& out_partial) const {
    std::vector<const GrammarElement*> work;
    GrammarExpand ex{alternatives_, work};
    GrammarStacks cur = from, next;
    for (unsigned char b : bytes) {
        uint32_t cp = 0;
        if (feed_utf8(partial, b, cp)) {
            next.clear();
            ex.advance(cur, cp, next);
            std::swap(cur, next);
            if (cur.empty()) return false;
        } else if (partial.n_remain < 0) {
            return false;
        }
    }
    if (partial.n_remain > 0) {  // a code point the next token completes: some stack must be able to take it
        bool any = false;
        for (size_t i = 0; i < cur.size() && !any; i++)
            any = cur.top(i) && is_char(cur.top(i)) && match_partial_char(cur.top(i), partial);
        if (!any) return false;
    }
    out = std::move(cur);
    out_partial = partial;
    return true;
}

// Stacks whose top is a token reference that takes `id`, advanced past it.
bool GrammarMatcher::advance_token_refs(const GrammarStacks& from, int32_t id, GrammarStacks& out) const {
    std::vector<const GrammarElement*> work;
    GrammarExpand ex{alternatives_, work};
    const bool ordinary = vocab_.in_trie(id);
    for (size_t i = 0; i < from.size(); i++) {
        const GrammarElement* top = from.top(i);
        if (!top) continue;
        bool ok = (top->op == GrammarOp::TOKEN && token_ids_[top->value] == id) ||
                  (top->op == GrammarOp::TOKEN_NOT && token_ids_[top->value] != id && ordinary);
        if (!ok) continue;
        ex.work.assign(from.data.begin() + from.begin_of(i), from.data.begin() + from.ends[i] - 1);
        if (!is_end_of_sequence(top + 1)) ex.work.push_back(top + 1);
        ex.expand(out);
    }
    return !out.empty();
}

bool GrammarMatcher::accept_token(int32_t id) {
    if (id < 0 || id >= vocab_.n_vocab()) return false;
    if (vocab_.tokenizer().is_end(id) && std::find(token_ids_.begin(), token_ids_.end(), id) == token_ids_.end()) {
        if (!can_end()) return false;
        stacks_.clear();  // ended: only the empty stack is left
        stacks_.ends.push_back(0);
        current_ = nullptr;
        return true;
    }
    GrammarStacks out;
    PartialUtf8 out_partial = partial_;
    bool ok = false;
    if (partial_.n_remain == 0) ok = advance_token_refs(stacks_, id, out);
    if (vocab_.in_trie(id)) {
        GrammarStacks by_text;
        PartialUtf8 p;
        if (advance_bytes(stacks_, partial_, vocab_.text(id), by_text, p)) {
            if (ok && p.n_remain != 0) ok = false, out.clear();  // a token ref path and a split character cannot mix
            for (size_t i = 0; i < by_text.size(); i++) {
                std::vector<const GrammarElement*> s(by_text.data.begin() + by_text.begin_of(i), by_text.data.begin() + by_text.ends[i]);
                GrammarExpand::add(out, s);
            }
            out_partial = p;
            ok = true;
        }
    }
    if (!ok) return false;
    stacks_ = std::move(out);
    partial_ = out_partial;
    current_ = nullptr;
    return true;
}

bool GrammarMatcher::mask_known() {
    if (current_) return true;
    auto it = cache_.find(state_key());
    if (it != cache_.end()) current_ = &it->second;
    return current_ != nullptr;
}

bool GrammarMatcher::allows(int32_t id) {
    if (current_) return id >= 0 && id < vocab_.n_vocab() && ((*current_)[size_t(id) >> 6] >> (id & 63) & 1);
    GrammarStacks saved = stacks_;
    const PartialUtf8 saved_partial = partial_;
    bool ok = accept_token(id);
    if (ok && partial_.n_remain > 0) ok = can_complete(stacks_, partial_, 0);  // as the mask decides
    stacks_ = std::move(saved);
    partial_ = saved_partial;
    current_ = nullptr;
    return ok;
}

bool GrammarMatcher::accept_text(std::string_view bytes) {
    GrammarStacks out;
    PartialUtf8 p;
    if (!advance_bytes(stacks_, partial_, bytes, out, p)) return false;
    stacks_ = std::move(out);
    partial_ = p;
    current_ = nullptr;
    return true;
}

std::string GrammarMatcher::state_key() const {
    std::string key;
    key.reserve(stacks_.data.size() * sizeof(void*) + stacks_.ends.size() * 4 + 8);
    key.append(reinterpret_cast<const char*>(&partial_), sizeof partial_);
    key.append(reinterpret_cast<const char*>(stacks_.ends.data()), stacks_.ends.size() * sizeof(uint32_t));
    key.append(reinterpret_cast<const char*>(stacks_.data.data()), stacks_.data.size() * sizeof(void*));
    return key;
}

const std::vector<uint64_t>& GrammarMatcher::allowed() {
    if (current_) return *current_;
    std::string key = state_key();
    auto it = cache_.find(key);
    if (it == cache_.end()) {
        if (cache_.size() >= 4096) cache_.clear();  // bounded: a grammar with endless distinct states recomputes
        std::vector<uint64_t> mask((size_t(vocab_.n_vocab()) + 63) / 64, 0);
        compute_mask(mask);
        it = cache_.emplace(std::move(key), std::move(mask)).first;
    }
    current_ = &it->second;
    return *current_;
}

void GrammarMatcher::compute_mask(std::vector<uint64_t>& mask) {
    auto set = [&](int32_t id) { mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63); };
    if (can_end())
        for (int32_t id : vocab_.end_tokens()) set(id);
    if (partial_.n_remain == 0) {
        for (size_t i = 0; i < stacks_.size(); i++) {
            const GrammarElement* top = stacks_.top(i);
            if (!top) continue;
            if (top->op == GrammarOp::TOKEN) set(token_ids_[top->value]);
            if (top->op == GrammarOp::TOKEN_NOT)
                for (int32_t id = 0; id < vocab_.n_vocab(); id++)
                    if (vocab_.in_trie(id) && id != token_ids_[top->value]) set(id);
        }
    }
    // the ordinary tokens: a depth-first walk of the trie that advances the stacks byte by byte and
    // prunes every subtree no stack can continue into
    const size_t levels = vocab_.max_len() + 2;
    if (level_.size() < levels) level_.resize(levels);
    level_of_.assign(levels, 0);
    partial_at_.assign(levels, PartialUtf8{});
    level_[0] = stacks_;
    partial_at_[0] = partial_;
    if (same_.size() < levels) same_.resize(levels);
    same_[0].n = 0;
    work_left_ = GrammarExpand::MASK_WORK;
    visit(0, 0, mask);
}

bool GrammarMatcher::can_complete(const GrammarStacks& from, PartialUtf8 partial, uint32_t node) {
    const GrammarVocab::Node& n = vocab_.nodes()[node];
    for (uint32_t c = 0; c < n.n_children; c++) {
        const GrammarVocab::Child& child = vocab_.children()[n.first_child + c];
        PartialUtf8 p = partial;
        uint32_t cp = 0;
        if (feed_utf8(p, child.byte, cp)) {
            // a stack whose set takes the character goes on past it: advanced, it expands to at least one
            for (size_t i = 0; i < from.size(); i++)
                if (const GrammarElement* top = from.top(i); top && is_char(top) && match_char(top, cp).first) return true;
        } else if (p.n_remain > 0) {
            // the character may go on inside this token, or in the next one after a token ending here
            if (can_complete(from, p, child.node)) return true;
            if (vocab_.nodes()[child.node].n_tokens > 0 && can_complete(from, p, 0)) return true;
        }
    }
    return false;
}

void GrammarMatcher::visit(uint32_t node, size_t depth, std::vector<uint64_t>& mask) {
    const GrammarVocab::Node& n = vocab_.nodes()[node];
    GrammarExpand ex{alternatives_, work_};
    ex.work_left = &work_left_;
    // Characters that the same stacks take advance alike (a string's character class, a `.`, takes most
    // of them): the last few such sets of stacks and their results, kept with the stack set they came
    // from (for the bytes inside a code point, a parent's), until it changes.
    auto& same = same_[level_of_[depth]];
    for (uint32_t c = 0; c < n.n_children; c++) {
        const GrammarVocab::Child& child = vocab_.children()[n.first_child + c];
        PartialUtf8 p = partial_at_[depth];
        uint32_t cp = 0;
        const GrammarStacks& from = level_[level_of_[depth]];
        size_t at = level_of_[depth];  // a byte inside a code point keeps its parent's stacks
        if (feed_utf8(p, child.byte, cp)) {
            at = depth + 1;  // stack sets live at the depth that completed them (level_ is pre-sized)
            GrammarExpand::taking(from, cp, which_);
            if (which_.empty()) continue;
            size_t k = 0;
            while (k < same.n && same.entries[k].which != which_) k++;
            if (k == same.n) {
                k = same.n < SameStacks::N ? same.n++ : same.next++ % SameStacks::N;
                same.entries[k].which = which_;
                same.entries[k].out.clear();
                ex.advance(from, which_, same.entries[k].out);
            }
            level_[at] = same.entries[k].out;
            same_[at].n = 0;
            if (level_[at].empty()) continue;
        } else {
            if (p.n_remain < 0) continue;
            bool any = false;
            for (size_t i = 0; i < from.size() && !any; i++)
                any = from.top(i) && is_char(from.top(i)) && match_partial_char(from.top(i), p);
            if (!any) continue;
        }
        level_of_[depth + 1] = at;
        partial_at_[depth + 1] = p;
        const GrammarVocab::Node& cn = vocab_.nodes()[child.node];
        // a token that ends inside a character is allowed only if some token can finish that character
        // in a way the grammar takes: otherwise the generation would reach a dead end
        const bool ends_ok = p.n_remain == 0 || (cn.n_tokens > 0 && can_complete(level_[at], p, 0));
        for (uint32_t t = 0; t < cn.n_tokens && ends_ok; t++) {
            int32_t id = vocab_.node_tokens()[cn.first_token + t];
            mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63);
        }
        if (cn.n_children > 0) visit(child.node, depth + 1, mask);
    }
}

}  // namespace llm
