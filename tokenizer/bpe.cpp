// Byte-level BPE (tokenizer.ggml.model = "gpt2"): GPT-2's byte<->unicode map undone at load so the
// hot path works on raw bytes and token ids; merges by rank with a heap over a linked list of symbols
// per word; a cache of words already merged.
#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"
#include "tokenizer/vocab_impl.h"

#include "gguf/gguf.h"

#include <algorithm>
#include <cctype>

namespace tok {

namespace {

// GPT-2 stores each byte as a printable code point: bytes '!'..'~', 0xa1..0xac, 0xae..0xff as
// themselves, the other 68 as U+0100 onwards in byte order (openai/gpt-2 encoder.py, bytes_to_unicode).
struct ByteDecoder {
    int16_t byte_of[324];  // code point -> byte, -1 when the code point is not a byte stand-in
    ByteDecoder() {
        std::fill(std::begin(byte_of), std::end(byte_of), int16_t(-1));
        int next = 256;
        for (int b = 0; b < 256; b++) {
            const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
            byte_of[printable ? b : next++] = int16_t(b);
        }
    }
    // Code points that are not byte stand-ins are kept as their UTF-8 (such tokens never come out of
    // merges; decoding them as written is the least surprising).
    std::string decode(std::string_view s) const {
        std::string out;
        out.reserve(s.size());
        for (size_t i = 0; i < s.size();) {
            size_t len;
            const uint32_t cp = unicode::decode_utf8(s.data() + i, s.size() - i, len);
            if (cp < 324 && byte_of[cp] >= 0) out.push_back(char(byte_of[cp]));
            else out.append(s.substr(i, len));
            i += len;
        }
        return out;
    }
};

// Open-addressing map (left id, right id) -> (rank, merged id).
class MergeTable {
public:
    struct Merge {
        int32_t rank, result;
    };
    void reserve(size_t n) {
        size_t cap = 16;
        while (cap < n * 2) cap *= 2;
        slots_.assign(cap, Slot{0, {-1, -1}});
        mask_ = cap - 1;
    }
    // Keeps the first (lowest-rank) entry for a pair.
    void insert(int32_t left, int32_t right, Merge m) {
        const uint64_t key = pack(left, right);
        for (size_t i = hash(key);; i = (i + 1) & mask_) {
            if (slots_[i].merge.rank < 0) {
                slots_[i] = {key, m};
                return;
            }
            if (slots_[i].key == key) return;
        }
    }
    const Merge* find(int32_t left, int32_t right) const {
        const uint64_t key = pack(left, right);
        for (size_t i = hash(key);; i = (i + 1) & mask_) {
            if (slots_[i].merge.rank < 0) return nullptr;
            if (slots_[i].key == key) return &slots_[i].merge;
        }
    }

private:
    struct Slot {
        uint64_t key;
        Merge merge;
    };
    static uint64_t pack(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }
    size_t hash(uint64_t key) const { return size_t((key * 0x9e3779b97f4a7c15ull) >> 20) & mask_; }
    std::vector<Slot> slots_;
    size_t mask_ = 0;
};

class BpeTokenizer final : public Vocab {
public:
    explicit BpeTokenizer(const gguf::File& f) {
        std::string pre = f.get_or<std::string>("tokenizer.ggml.pre", "");
        if (pre.empty()) pre = "default";  // as llama.cpp does for files converted before presets existed
        preset_ = find_preset(pre);
        if (!preset_) {
            std::string names;
            for (std::string_view n : preset_names()) names += (names.empty() ? "" : ", ") + std::string(n);
            throw Error("[tokenizer] " + f.path() + ": unknown pre-tokenizer preset '" + pre +
                        "' (tokenizer.ggml.pre; known: " + names + ")");
        }
        load_common(f, Defaults{-1, -1, -1, preset_->add_bos, false});
        add_space_prefix_ = false;  // byte-level BPE keeps spaces as they are (llama.cpp ignores the key here)

        const ByteDecoder bytes;
        const int32_t n = n_vocab();
        texts_.resize(n);
        for (int32_t i = 0; i < n; i++) {
            switch (types_[i]) {
                case NORMAL: texts_[i] = bytes.decode(tokens_[i]); break;
                case CONTROL: case UNKNOWN: case USER_DEFINED: texts_[i] = tokens_[i]; break;
                case BYTE: texts_[i] = byte_token_value(tokens_[i]); break;
                default: break;  // unused / undefined tokens decode to nothing, as in llama.cpp
            }
        }
        by_bytes_.build(&texts_, n);
        for (int32_t i = 0; i < n; i++)
            if (types_[i] == NORMAL) by_bytes_.insert(i);
        std::fill(std::begin(byte_token_), std::end(byte_token_), -1);
        for (int b = 0; b < 256; b++) byte_token_[b] = id_or_synthetic(std::string(1, char(b)));

        if (f.has("tokenizer.ggml.merges")) load_merges(f.get<std::vector<std::string>>("tokenizer.ggml.merges"), bytes);
        else derive_merges();  // tiktoken-style vocabularies without merges: rank = id of the merged token
    }

protected:
    void encode_fragment(std::string_view text, std::vector<int32_t>& out) const override {
        std::string normalized;
        if (preset_->nfc && !unicode::is_nfc_quick(text)) {
            normalized = unicode::to_nfc(text);
            text = normalized;
        }
        thread_local std::vector<Span> words;
        words.clear();
        pre_split(preset_->split, text, words);
        for (const Span& w : words) encode_word(text.substr(w.begin, w.end - w.begin), out);
    }

private:
    static std::string byte_token_value(const std::string& t) {  // "<0x41>" -> "A"
        if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
            const std::string hex = t.substr(3, 2);
            if (std::isxdigit(uint8_t(hex[0])) && std::isxdigit(uint8_t(hex[1]))) return std::string(1, char(std::stoi(hex, nullptr, 16)));
        }
        return t;
    }

    // A token id for these bytes; bytes that are no token get an id past the vocabulary, whose
    // symbols come out as single-byte tokens in the end (what llama.cpp does with them).
    int32_t id_or_synthetic(const std::string& s) {
        if (const int32_t id = by_bytes_.find(s); id >= 0) return id;
        if (auto it = synthetic_ids_.find(s); it != synthetic_ids_.end()) return it->second;
        const int32_t id = n_vocab() + int32_t(synthetic_.size());
        synthetic_.push_back(s);
        synthetic_ids_.emplace(s, id);
        return id;
    }
    std::string_view bytes_of(int32_t id) const { return id < n_vocab() ? texts_[id] : synthetic_[id - n_vocab()]; }

    void load_merges(const std::vector<std::string>& merges, const ByteDecoder& bytes) {
        table_.reserve(merges.size());
        // Merge sides are stored GPT-2-encoded like the tokens: look them up as stored, decode only misses.
        const auto id_of = [&](std::string_view stored) {
            const int32_t id = id_of_.find(stored);
            return id >= 0 && types_[id] == NORMAL ? id : id_or_synthetic(bytes.decode(stored));
        };
        std::string merged;
        for (size_t rank = 0; rank < merges.size(); rank++) {
            const std::string_view m = merges[rank];
            const size_t space = m.find(' ', 1);  // a merge side may itself be a space stand-in, never empty
            if (space == std::string::npos)
                throw Error(where() + "tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" + std::string(m) + "' is not 'left right'");
            merged.assign(m.substr(0, space)).append(m.substr(space + 1));
            table_.insert(id_of(m.substr(0, space)), id_of(m.substr(space + 1)), {int32_t(rank), id_of(merged)});
        }
    }

    void derive_merges() {
        table_.reserve(size_t(n_vocab()) * 2);
        for (int32_t id = 0; id < n_vocab(); id++) {
            if (types_[id] != NORMAL) continue;
            const std::string_view t = texts_[id];
            for (size_t k = 1; k < t.size(); k++) {
                const int32_t a = by_bytes_.find(t.substr(0, k)), b = by_bytes_.find(t.substr(k));
                if (a >= 0 && b >= 0) table_.insert(a, b, {id, id});
            }
        }
    }

    void encode_word(std::string_view word, std::vector<int32_t>& out) const {
        if (word.size() == 1) {
            emit(byte_token_[uint8_t(word[0])], out);
            return;
        }
        if (preset_->ignore_merges)
            if (const int32_t id = by_bytes_.find(word); id >= 0) {
                out.push_back(id);
                return;
            }
        if (cache_.get(word, out)) return;
        const size_t start = out.size();
        for_each_chunk(word, [&](std::string_view chunk) { merge(chunk, out); });
        cache_.put(word, out.data() + start, out.size() - start);
    }

    void emit(int32_t id, std::vector<int32_t>& out) const {
        if (id < n_vocab()) {
            out.push_back(id);
            return;
        }
        for (char c : bytes_of(id))
            if (int32_t b = byte_token_[uint8_t(c)]; b < n_vocab()) out.push_back(b);
    }

    // Repeatedly merges the adjacent pair of lowest rank (leftmost on ties) until no pair merges.
    void merge(std::string_view word, std::vector<int32_t>& out) const {
        struct Symbol {
            int32_t id, prev, next;
        };
        struct Candidate {
            int32_t rank, left, right, left_id, right_id, result;
            bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
        };
        thread_local std::vector<Symbol> sym;
        thread_local std::vector<Candidate> heap;  // a min-heap by (rank, left)
        const int32_t n = int32_t(word.size());
        sym.resize(n);
        for (int32_t i = 0; i < n; i++) sym[i] = {byte_token_[uint8_t(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
        heap.clear();
        const auto consider = [&](int32_t left, int32_t right) {
            if (left < 0 || right < 0) return;
            if (const MergeTable::Merge* m = table_.find(sym[left].id, sym[right].id)) {
                heap.push_back({m->rank, left, right, sym[left].id, sym[right].id, m->result});
                std::push_heap(heap.begin(), heap.end(), std::greater<>{});
            }
        };
        for (int32_t i = 0; i + 1 < n; i++) consider(i, i + 1);
        while (!heap.empty()) {
            std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
            const Candidate c = heap.back();
            heap.pop_back();
            Symbol& l = sym[c.left];
            // Stale when either side has merged since: the pair is gone or holds other tokens now.
            if (l.id < 0 || l.next != c.right || l.id != c.left_id || sym[c.right].id != c.right_id) continue;
            Symbol& r = sym[c.right];
            l.id = c.result;
            l.next = r.next;
            if (r.next >= 0) sym[r.next].prev = c.left;
            r.id = -1;
            consider(l.prev, c.left);
            consider(c.left, l.next);
        }
        for (int32_t i = 0; i >= 0; i = sym[i].next) emit(sym[i].id, out);
    }

    const Preset* preset_ = nullptr;
    TokenIndex by_bytes_;  // normal tokens by their bytes
    std::vector<std::string> synthetic_;
    std::unordered_map<std::string, int32_t> synthetic_ids_;
    int32_t byte_token_[256];
    MergeTable table_;
    mutable WordCache cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_bpe(const gguf::File& file) { return std::make_unique<BpeTokenizer>(file); }

}  // namespace tok
