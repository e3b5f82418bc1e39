// What both vocabulary kinds share: token metadata read from GGUF, the special-token splitter that
// runs before any model, decoding to bytes, and the end-of-generation set.
#pragma once

#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gguf { class File; }

namespace tok {

// tokenizer.ggml.token_type values.
enum TokenType : uint8_t { UNDEFINED = 0, NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6 };

// Token id by text, for texts owned by a vector<string> indexed by id (open addressing: one probe
// usually touches one slot and one string).
class TokenIndex {
public:
    void build(const std::vector<std::string>* texts, size_t expected) {
        texts_ = texts;
        size_t cap = 16;
        while (cap < expected * 2) cap *= 2;
        slots_.assign(cap, Slot{0, -1});
        mask_ = cap - 1;
    }
    // The id already indexed under the text of `id`, or -1 after indexing it.
    int32_t insert(int32_t id) {
        const std::string_view key = (*texts_)[id];
        const uint32_t h = hash(key);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].id < 0) {
                slots_[i] = {h, id};
                return -1;
            }
            if (slots_[i].hash == h && (*texts_)[slots_[i].id] == key) return slots_[i].id;
        }
    }
    int32_t find(std::string_view key) const {
        if (slots_.empty()) return -1;
        const uint32_t h = hash(key);
        for (size_t i = h & mask_;; i = (i + 1) & mask_) {
            if (slots_[i].id < 0) return -1;
            if (slots_[i].hash == h && (*texts_)[slots_[i].id] == key) return slots_[i].id;
        }
    }

private:
    struct Slot {
        uint32_t hash;
        int32_t id;
    };
    static uint32_t hash(std::string_view s) {  // FNV-1a, folded
        uint64_t h = 0xcbf29ce484222325ull;
        for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
        return uint32_t(h ^ (h >> 32));
    }
    const std::vector<std::string>* texts_ = nullptr;
    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// Calls f(chunk) for the chunks of `word` (the word itself when it is short enough): at most
// MAX_WORD_BYTES each (tokenizer.h), cut at UTF-8 character boundaries.
template <class F>
void for_each_chunk(std::string_view word, F&& f) {
    while (word.size() > MAX_WORD_BYTES) {
        size_t cut = MAX_WORD_BYTES;
        while (cut > MAX_WORD_BYTES - 4 && (static_cast<uint8_t>(word[cut]) & 0xc0) == 0x80) cut--;  // not inside a character
        CancelScope::check(cut);
        f(word.substr(0, cut));
        word.remove_prefix(cut);
    }
    CancelScope::check(word.size());
    f(word);
}

// Words already encoded, shared by all threads encoding with one tokenizer.
class WordCache {
public:
    static constexpr size_t MAX_WORD = 256;  // longer words are rare and would make the cache large

    bool get(std::string_view word, std::vector<int32_t>& out) {
        if (word.size() > MAX_WORD) return false;
        std::lock_guard lock(mu_);
        auto it = map_.find(word);
        if (it == map_.end()) return false;
        out.insert(out.end(), it->second.begin(), it->second.end());
        return true;
    }
    void put(std::string_view word, const int32_t* ids, size_t n) {
        if (word.size() > MAX_WORD) return;
        std::lock_guard lock(mu_);
        if (map_.size() >= MAX_WORDS) map_.clear();  // a long text of unique words: start over
        map_.emplace(std::string(word), std::vector<int32_t>(ids, ids + n));
    }

private:
    static constexpr size_t MAX_WORDS = 1 << 16;
    std::mutex mu_;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map_;
};

// A piece of the input after special tokens are split out: either a token or raw text [begin, end).
struct Fragment {
    int32_t token;  // -1 for raw text
    size_t begin, end;
};

// Finds special tokens written literally in text, as llama.cpp's tokenizer_st_partition does: tokens
// are taken longest first (then lowest id), each leftmost-first over the text not yet taken.
// Control and unknown tokens count only with parse_special; user-defined tokens always.
class SpecialSplitter {
public:
    void add(int32_t id, std::string_view text, bool only_with_parse_special);
    void split(std::string_view text, bool parse_special, std::vector<Fragment>& out) const;
    bool empty() const { return nodes_.size() <= 1; }

private:
    struct Node {
        int32_t token = -1;
        bool only_with_parse_special = false;
        uint32_t depth = 0;
    };
    std::vector<Node> nodes_{Node{}};
    std::unordered_map<uint64_t, uint32_t> edges_;  // (node << 8 | byte) -> child
    bool first_byte_[256] = {};
};

// The common half of a tokenizer: everything except turning one raw text fragment into ids.
class Vocab : public Tokenizer {
public:
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const override;
    std::vector<TextSpan> control_spans(std::string_view text) const override;
    std::vector<int32_t> encode_literal(std::string_view text, bool add_special, const std::vector<TextSpan>& literal) const override;
    std::string piece(int32_t id) const override;
    std::string token_text(int32_t id, bool first) const override;
    int32_t n_vocab() const override { return int32_t(tokens_.size()); }
    int32_t bos() const override { return bos_; }
    int32_t eos() const override { return eos_; }
    bool add_bos() const override { return add_bos_; }
    bool is_end(int32_t id) const override;
    bool is_special(int32_t id) const override;
    bool is_control(int32_t id) const override { return id >= 0 && id < n_vocab() && types_[id] == CONTROL; }

protected:
    // Reads tokens, types, scores, special ids and flags. Defaults differ per vocabulary kind.
    struct Defaults {
        int32_t bos = -1, eos = -1, unk = -1;
        bool add_bos = false, add_space_prefix = false;
    };
    void load_common(const gguf::File& file, const Defaults& defaults);
    // Appends the ids of one raw text fragment (no special tokens in it).
    virtual void encode_fragment(std::string_view text, std::vector<int32_t>& out) const = 0;
    std::vector<int32_t> encode_fragments(std::string_view text, bool add_special, const std::vector<Fragment>& fragments) const;
    bool is_markup(int32_t id) const { return types_[size_t(id)] == CONTROL || types_[size_t(id)] == UNKNOWN; }  // only templates write it
    std::string where() const { return "[tokenizer] " + path_ + ": "; }

    std::string path_;
    std::vector<std::string> tokens_;  // as stored in the file
    TokenIndex id_of_;                 // stored text -> id
    std::vector<uint8_t> types_;       // TokenType
    std::vector<float> scores_;
    std::vector<std::string> texts_;   // the bytes each token decodes to (before first-token rules)
    int32_t bos_ = -1, eos_ = -1, unk_ = -1;
    bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false;
    std::vector<bool> is_end_;
    SpecialSplitter specials_;
};

std::unique_ptr<Tokenizer> make_bpe(const gguf::File& file);  // make_spm: tokenizer.h

}  // namespace tok
