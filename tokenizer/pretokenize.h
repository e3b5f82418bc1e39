// Pre-tokenizer presets of byte-level BPE vocabularies (tokenizer.ggml.pre): each splits text into
// words exactly as its published regex would, by a hand-written scanner over Unicode properties.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tok {

enum class PreSplit {
    DEFAULT,     // llama.cpp's fallback: four regexes applied in sequence
    GPT2,        // 's|'t|... ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    LLAMA3,      // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|...
    QWEN2,       // LLAMA3 with single digits
    QWEN35,      // QWEN2 with marks inside words: [\p{L}\p{M}]+
    TEKKEN,      // case-split words (upper* lower+ | upper+ lower*), single digits, [\r\n/]* tails
    GPT4O,       // TEKKEN with contractions after words and \p{N}{1,3}
    KIMI_K2,     // \p{Han}+ first, then GPT4O over everything else
    DEEPSEEK3,   // \p{N}{1,3}, then CJK/kana runs, then a punctuation-aware word regex, in sequence
};

struct Preset {
    const char* name;      // tokenizer.ggml.pre
    PreSplit split;
    bool nfc;              // normalize to NFC before splitting (Qwen's tokenizer.json has an NFC normalizer)
    bool ignore_merges;    // a word that is itself a token is emitted whole (HF BPE ignore_merges)
    bool add_bos;          // default of add_bos_token when the file does not say
};

// nullptr for an unknown name.
const Preset* find_preset(std::string_view name);
std::vector<std::string_view> preset_names();

// A word: bytes [begin, end) of the text.
struct Span {
    uint32_t begin, end;
};

// Splits `text` into words (in order, covering all of it) and appends them to `words`.
void pre_split(PreSplit split, std::string_view text, std::vector<Span>& words);

}  // namespace tok
