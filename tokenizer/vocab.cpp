// Vocabulary metadata from GGUF, special-token splitting, decoding, the end-of-generation set, and
// Tokenizer::from_gguf choosing the model by tokenizer.ggml.model.
#include "tokenizer/vocab_impl.h"

#include "gguf/gguf.h"

#include <algorithm>
#include <unordered_set>

namespace tok {

// --- special tokens ---------------------------------------------------------------------------------

void SpecialSplitter::add(int32_t id, std::string_view text, bool only_with_parse_special) {
    if (text.empty()) return;
    uint32_t node = 0;
    for (unsigned char c : text) {
        const uint64_t key = uint64_t(node) << 8 | c;
        auto it = edges_.find(key);
        if (it == edges_.end()) {
            nodes_.push_back(Node{-1, false, nodes_[node].depth + 1});
            it = edges_.emplace(key, uint32_t(nodes_.size() - 1)).first;
        }
        node = it->second;
    }
    nodes_[node].token = id;
    nodes_[node].only_with_parse_special = only_with_parse_special;
    first_byte_[uint8_t(text[0])] = true;
}

void SpecialSplitter::split(std::string_view text, bool parse_special, std::vector<Fragment>& out) const {
    struct Occurrence {
        uint32_t pos, len;
        int32_t token;
    };
    std::vector<Occurrence> found;
    for (size_t pos = 0; pos < text.size(); pos++) {
        if (!first_byte_[uint8_t(text[pos])]) continue;
        uint32_t node = 0;
        for (size_t i = pos; i < text.size(); i++) {
            auto it = edges_.find(uint64_t(node) << 8 | uint8_t(text[i]));
            if (it == edges_.end()) break;
            node = it->second;
            const Node& n = nodes_[node];
            if (n.token >= 0 && (parse_special || !n.only_with_parse_special))
                found.push_back({uint32_t(pos), n.depth, n.token});
        }
    }
    if (found.empty()) {
        if (!text.empty()) out.push_back({-1, 0, text.size()});
        return;
    }
    // Longest tokens claim their occurrences first; an occurrence overlapping a claimed one is skipped.
    std::sort(found.begin(), found.end(), [](const Occurrence& a, const Occurrence& b) {
        if (a.len != b.len) return a.len > b.len;
        if (a.token != b.token) return a.token < b.token;
        return a.pos < b.pos;
    });
    std::vector<bool> taken(text.size(), false);
    std::vector<Occurrence> chosen;
    for (const Occurrence& o : found) {
        if (std::any_of(taken.begin() + o.pos, taken.begin() + o.pos + o.len, [](bool t) { return t; })) continue;
        std::fill(taken.begin() + o.pos, taken.begin() + o.pos + o.len, true);
        chosen.push_back(o);
    }
    std::sort(chosen.begin(), chosen.end(), [](const Occurrence& a, const Occurrence& b) { return a.pos < b.pos; });
    size_t at = 0;
    for (const Occurrence& o : chosen) {
        if (o.pos > at) out.push_back({-1, at, o.pos});
        out.push_back({o.token, o.pos, size_t(o.pos) + o.len});
        at = o.pos + o.len;
    }
    if (at < text.size()) out.push_back({-1, at, text.size()});
}

// --- metadata ---------------------------------------------------------------------------------------

namespace {

// Token texts llama.cpp treats as end of generation (llama-vocab.cpp), beside EOS/EOT/EOM.
const char* const END_TEXTS[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>",
    "[e~[",
    // fill-in-the-middle pad / repository / file-separator tokens also end generation
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
    "<REPO>", "<reponame>", "<|file_sep|>",
};

int32_t optional_id(const gguf::File& f, const char* key, int32_t fallback, size_t n_vocab) {
    if (!f.has(key)) return fallback < int64_t(n_vocab) ? fallback : -1;
    const int64_t id = f.get<int64_t>(key);
    return id >= 0 && id < int64_t(n_vocab) ? int32_t(id) : -1;  // out of range: llama.cpp ignores it too
}

}  // namespace

void Vocab::load_common(const gguf::File& f, const Defaults& d) {
    path_ = f.path();
    tokens_ = f.get<std::vector<std::string>>("tokenizer.ggml.tokens");
    const size_t n = tokens_.size();
    if (n == 0) throw Error(where() + "tokenizer.ggml.tokens is empty");
    if (n >= size_t(INT32_MAX)) throw Error(where() + "too many tokens");
    types_.assign(n, NORMAL);
    if (f.has("tokenizer.ggml.token_type")) {
        auto types = f.get<std::vector<int32_t>>("tokenizer.ggml.token_type");
        if (types.size() < n) throw Error(where() + "tokenizer.ggml.token_type has fewer entries than tokens");
        for (size_t i = 0; i < n; i++) types_[i] = types[i] >= NORMAL && types[i] <= BYTE ? uint8_t(types[i]) : uint8_t(UNDEFINED);
    }
    scores_.assign(n, 0.0f);
    if (f.has("tokenizer.ggml.scores")) {
        auto scores = f.get<std::vector<float>>("tokenizer.ggml.scores");
        if (scores.size() < n) throw Error(where() + "tokenizer.ggml.scores has fewer entries than tokens");
        std::copy(scores.begin(), scores.begin() + n, scores_.begin());
    }
    id_of_.build(&tokens_, n);
    for (size_t i = 0; i < n; i++) {
        if (tokens_[i].empty()) tokens_[i] = "[EMPTY_" + std::to_string(i) + "]";  // as llama.cpp names them
        if (const int32_t other = id_of_.insert(int32_t(i)); other >= 0)
            throw Error(where() + "duplicate token '" + tokens_[i] + "' (ids " + std::to_string(other) + " and " +
                        std::to_string(i) + ")");
    }

    bos_ = optional_id(f, "tokenizer.ggml.bos_token_id", d.bos, n);
    eos_ = optional_id(f, "tokenizer.ggml.eos_token_id", d.eos, n);
    unk_ = optional_id(f, "tokenizer.ggml.unknown_token_id", d.unk, n);
    add_bos_ = f.get_or<bool>("tokenizer.ggml.add_bos_token", d.add_bos);
    add_eos_ = f.get_or<bool>("tokenizer.ggml.add_eos_token", false);
    add_space_prefix_ = f.get_or<bool>("tokenizer.ggml.add_space_prefix", d.add_space_prefix);
    if (add_bos_ && bos_ < 0) {  // a preset's default quietly gives way; the file saying so is an error
        if (f.has("tokenizer.ggml.add_bos_token")) throw Error(where() + "add_bos_token is set but the vocabulary has no BOS token");
        add_bos_ = false;
    }
    if (add_eos_ && eos_ < 0) throw Error(where() + "add_eos_token is set but the vocabulary has no EOS token");

    // End of generation: EOS/EOT/EOM ids, and control tokens with a well-known end text. llama.cpp
    // also promotes such texts from other token types; we do that only for the unmistakable <|...|>
    // form, since e.g. Qwen's "</s>" is ordinary text (its tokenizer.json does not split it out).
    is_end_.assign(n, false);
    for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
        if (int32_t id = optional_id(f, key, -1, n); id >= 0) is_end_[id] = true;
    if (eos_ >= 0) is_end_[eos_] = true;
    const std::unordered_set<std::string_view> end_texts(std::begin(END_TEXTS), std::end(END_TEXTS));
    for (size_t i = 0; i < n; i++) {
        if (!end_texts.count(tokens_[i])) continue;
        const bool looks_special = tokens_[i].rfind("<|", 0) == 0 || tokens_[i].rfind("<\xef\xbd\x9c", 0) == 0;
        if (types_[i] == NORMAL && looks_special) types_[i] = CONTROL;
        if (types_[i] == CONTROL) is_end_[i] = true;
    }
    // gpt-oss (o200k_harmony): with <|return|> and <|call|> present, <|end|> only ends a message.
    const auto id_of = [&](std::string_view t) { return id_of_.find(t); };
    const int32_t end = id_of("<|end|>");
    if (end >= 0 && ((id_of("<|return|>") >= 0 && id_of("<|call|>") >= 0) || (id_of("<|calls|>") >= 0 && id_of("<|flush|>") >= 0)))
        is_end_[end] = false, types_[end] = USER_DEFINED;
    for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})  // always rendered (gpt-oss)
        if (int32_t id = id_of(t); id >= 0) types_[id] = USER_DEFINED;

    for (size_t i = 0; i < n; i++) {
        if (types_[i] == CONTROL || types_[i] == UNKNOWN) specials_.add(int32_t(i), tokens_[i], true);
        else if (types_[i] == USER_DEFINED) specials_.add(int32_t(i), tokens_[i], false);
    }
}

// --- encode / decode --------------------------------------------------------------------------------

std::vector<int32_t> Vocab::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<Fragment> fragments;
    specials_.split(text, parse_special, fragments);
    return encode_fragments(text, add_special, fragments);
}

std::vector<TextSpan> Vocab::control_spans(std::string_view text) const {
    std::vector<Fragment> fragments;
    specials_.split(text, true, fragments);
    std::vector<TextSpan> spans;
    for (const Fragment& fr : fragments)
        if (fr.token >= 0 && is_markup(fr.token)) spans.push_back({fr.begin, fr.end});
    return spans;
}

std::vector<int32_t> Vocab::encode_literal(std::string_view text, bool add_special, const std::vector<TextSpan>& literal) const {
    std::vector<Fragment> fragments, merged;
    specials_.split(text, true, fragments);
    size_t next = 0;  // literal spans are sorted: the first that may still overlap
    for (const Fragment& fr : fragments) {
        while (next < literal.size() && literal[next].end <= fr.begin) next++;
        const bool in_literal = next < literal.size() && literal[next].begin < fr.end;
        if (fr.token >= 0 && !(in_literal && is_markup(fr.token))) {
            merged.push_back(fr);
        } else if (!merged.empty() && merged.back().token < 0 && merged.back().end == fr.begin) {
            merged.back().end = fr.end;  // a demoted token joins the text around it
        } else {
            merged.push_back({-1, fr.begin, fr.end});
        }
    }
    return encode_fragments(text, add_special, merged);
}

std::vector<int32_t> Vocab::encode_fragments(std::string_view text, bool add_special, const std::vector<Fragment>& fragments) const {
    std::vector<int32_t> out;
    if (add_special && add_bos_) out.push_back(bos_);
    for (const Fragment& fr : fragments) {
        CancelScope::check(fr.end - fr.begin);  // also when every word is a cache hit
        if (fr.token >= 0) out.push_back(fr.token);
        else encode_fragment(text.substr(fr.begin, fr.end - fr.begin), out);
    }
    if (add_special && add_eos_) out.push_back(eos_);
    return out;
}

std::string Vocab::piece(int32_t id) const {
    if (id < 0 || id >= n_vocab())
        throw Error("[tokenizer] token id " + std::to_string(id) + " is out of range (n_vocab " + std::to_string(n_vocab()) + ")");
    return tokens_[id];
}

std::string Vocab::token_text(int32_t id, bool first) const {
    if (id < 0 || id >= n_vocab())
        throw Error("[tokenizer] token id " + std::to_string(id) + " is out of range (n_vocab " + std::to_string(n_vocab()) + ")");
    const std::string& t = texts_[id];
    if (first && add_space_prefix_ && !t.empty() && t[0] == ' ') return t.substr(1);
    return t;
}

bool Vocab::is_end(int32_t id) const { return id >= 0 && id < n_vocab() && is_end_[id]; }

bool Vocab::is_special(int32_t id) const {
    if (id < 0 || id >= n_vocab()) return false;
    return types_[id] == CONTROL || types_[id] == UNKNOWN || types_[id] == USER_DEFINED;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
    std::string out;
    for (size_t i = 0; i < ids.size(); i++) out += token_text(ids[i], i == 0);
    return out;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
    const std::string model = file.get_or<std::string>("tokenizer.ggml.model", "");
    if (model == "gpt2") return make_bpe(file);
    if (model == "llama") return make_spm(file);
    if (model.empty()) throw Error("[tokenizer] " + file.path() + ": the file has no tokenizer (tokenizer.ggml.model missing)");
    throw Error("[tokenizer] " + file.path() + ": unsupported tokenizer model '" + model + "' (supported: gpt2, llama)");
}

}  // namespace tok
