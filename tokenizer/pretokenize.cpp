// The pre-tokenizer scanners. Each `match_*` answers "where does the regex's leftmost-first match
// starting at code point p end?" (p when nothing matches), following the regex's alternation order
// and backtracking exactly; the driver turns matches and unmatched gaps into words, per stage.
// Regexes: HF tokenizer.json / tiktoken of each model family, as collected in llama.cpp's
// llama-vocab.cpp. \s is Unicode White_Space, \p{..} the general categories of unicode_tables.cpp.
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace tok {

namespace {

using namespace unicode;

// Character classes, one bit each. ANY marks a real character (lookahead past the end sees 0).
enum : uint16_t {
    ANY = 1 << 0,
    L = 1 << 1,      // \p{L}
    N = 1 << 2,      // \p{N}
    M = 1 << 3,      // \p{M}
    P = 1 << 4,      // \p{P}
    S = 1 << 5,      // \p{S}
    WS = 1 << 6,     // \s (White_Space)
    UPPER = 1 << 7,  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    LOWER = 1 << 8,  // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    HAN = 1 << 9,    // \p{Han}
    CRLF = 1 << 10,  // [\r\n]
};

constexpr std::array<uint16_t, 30> CATEGORY_CLASS = [] {
    std::array<uint16_t, 30> t{};
    for (int c : {Lu, Lt}) t[c] = L | UPPER;
    t[Ll] = L | LOWER;
    for (int c : {Lm, Lo}) t[c] = L | UPPER | LOWER;
    for (int c : {Mn, Mc, Me}) t[c] = M | UPPER | LOWER;
    for (int c : {Nd, Nl, No}) t[c] = N;
    for (int c : {Pc, Pd, Ps, Pe, Pi, Pf, Po}) t[c] = P;
    for (int c : {Sm, Sc, Sk, So}) t[c] = S;
    return t;
}();

constexpr uint32_t END = 0xffffffff;

// The code points of the text being split and their classes; [lo, hi) is the piece a stage works on,
// so lookahead stops at its end as it would for a regex applied to that piece alone.
struct Text {
    std::vector<uint32_t> cp;
    std::vector<uint16_t> cls;
    std::vector<uint32_t> offset;  // byte offset of each code point, plus the end
    size_t hi = 0;

    uint16_t at(size_t i) const { return i < hi ? cls[i] : 0; }
    uint32_t c(size_t i) const { return i < hi ? cp[i] : END; }
    bool is(size_t i, uint16_t mask) const { return at(i) & mask; }
    size_t run(size_t i, uint16_t mask) const {
        while (is(i, mask)) i++;
        return i;
    }
};

uint32_t fold_case(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c == 0x17f) return 's';  // LATIN SMALL LETTER LONG S case-folds to 's'
    return c;
}

// 's|'t|'re|'ve|'m|'ll|'d at i (optionally case-insensitive): the match length, or 0.
size_t contraction(const Text& t, size_t i, bool ignore_case) {
    if (t.c(i) != '\'') return 0;
    const auto f = [&](size_t k) { return ignore_case ? fold_case(t.c(k)) : t.c(k); };
    const uint32_t a = f(i + 1), b = f(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

// \s*[\r\n]+ (when `newlines`), then \s+(?!\S), then \s+ (when `any_run`).
size_t match_whitespace(const Text& t, size_t p, bool newlines, bool any_run = true) {
    const size_t r = t.run(p, WS);
    if (r == p) return p;
    if (newlines)  // \s* backtracks to the last newline of the run
        for (size_t i = r; i > p; i--)
            if (t.is(i - 1, CRLF)) return i;
    if (r == t.hi) return r;          // (?!\S) holds at the end
    if (r - p >= 2) return r - 1;     // leave one space for the next word
    return any_run ? r : p;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const Text& t, size_t p, bool any_run = true) {
    if (size_t k = contraction(t, p, false)) return p + k;
    const size_t s = t.c(p) == ' ' ? p + 1 : p;
    const uint16_t m = t.at(s);
    if (m & L) return t.run(s, L);
    if (m & N) return t.run(s, N);
    if ((m & ANY) && !(m & (WS | L | N))) {
        size_t e = s;
        while ((t.at(e) & ANY) && !t.is(e, WS | L | N)) e++;
        return e;
    }
    return match_whitespace(t, p, false, any_run);
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?WORD+|\p{N}{1,digits}| ?OTHER+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// with WORD = \p{L} (llama3, qwen2) or [\p{L}\p{M}] (qwen35), OTHER = [^\s\p{L}\p{N}] minus WORD.
size_t match_llama3(const Text& t, size_t p, size_t digits, uint16_t word) {
    if (size_t k = contraction(t, p, true)) return p + k;
    const uint16_t m = t.at(p);
    if (!(m & (CRLF | L | N)) && t.is(p + 1, word)) return t.run(p + 1, word);
    if (m & word) return t.run(p, word);
    if (m & N) return std::min(t.run(p, N), p + digits);
    const auto other = [&](size_t i) { return (t.at(i) & ANY) && !t.is(i, WS | N | word); };
    const size_t s = t.c(p) == ' ' && other(p + 1) ? p + 1 : p;
    if (other(s)) {
        size_t e = s;
        while (other(e)) e++;
        return t.run(e, CRLF);
    }
    return match_whitespace(t, p, true);
}

// [^\r\n\p{L}\p{N}]?UPPER*LOWER+|[^\r\n\p{L}\p{N}]?UPPER+LOWER* (case-split words, tiktoken style);
// kimi-k2 takes Han characters out of both classes. Returns p when neither alternative matches.
size_t match_cased_word(const Text& t, size_t p, bool no_han) {
    const uint16_t han = no_han ? HAN : 0;
    const auto upper = [&](size_t i) { return (t.at(i) & (UPPER | han)) == UPPER; };
    const auto lower = [&](size_t i) { return (t.at(i) & (LOWER | han)) == LOWER; };
    // UPPER*LOWER+ from s: greedy UPPER*, then backtrack until LOWER+ can start.
    const auto upper_then_lower = [&](size_t s) -> size_t {
        size_t u = s;
        while (upper(u)) u++;
        if (lower(u)) {
            while (lower(u)) u++;
            return u;
        }
        for (size_t j = u; j > s; j--)
            if (lower(j - 1)) return j;  // LOWER+ is that one character: the next is neither class
        return 0;
    };
    const auto upper_plus_lower = [&](size_t s) -> size_t {
        size_t u = s;
        while (upper(u)) u++;
        if (u == s) return 0;
        while (lower(u)) u++;
        return u;
    };
    const bool prefix = (t.at(p) & ANY) && !t.is(p, CRLF | L | N);
    if (size_t e = prefix ? upper_then_lower(p + 1) : 0) return e;
    if (size_t e = upper_then_lower(p)) return e;
    if (size_t e = prefix ? upper_plus_lower(p + 1) : 0) return e;
    if (size_t e = upper_plus_lower(p)) return e;
    return p;
}

// gpt-4o (o200k), tekken, kimi-k2: cased words (+ contraction), digits, ` ?[^\s\p{L}\p{N}]+TAIL*`,
// whitespace. TAIL is [\r\n/] for gpt-4o and tekken, [\r\n] for kimi-k2.
size_t match_cased(const Text& t, size_t p, PreSplit split) {
    const bool kimi = split == PreSplit::KIMI_K2, tekken = split == PreSplit::TEKKEN;
    if (kimi && t.is(p, HAN)) return t.run(p, HAN);
    if (size_t e = match_cased_word(t, p, kimi); e != p) return tekken ? e : e + contraction(t, e, true);
    if (t.is(p, N)) return std::min(t.run(p, N), p + (tekken ? 1 : 3));
    const auto other = [&](size_t i) { return (t.at(i) & ANY) && !t.is(i, WS | L | N); };
    const size_t s = t.c(p) == ' ' && other(p + 1) ? p + 1 : p;
    if (other(s)) {
        size_t e = s;
        while (other(e)) e++;
        while (t.is(e, CRLF) || (!kimi && t.c(e) == '/')) e++;
        return e;
    }
    return match_whitespace(t, p, true);
}

bool is_ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x2f) || (c >= 0x3a && c <= 0x40) || (c >= 0x5b && c <= 0x60) || (c >= 0x7b && c <= 0x7e);
}
bool is_ascii_alpha(uint32_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

// deepseek-v3 third stage:
// [!-/:-@[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t match_deepseek3_words(const Text& t, size_t p) {
    if (is_ascii_punct(t.c(p)) && is_ascii_alpha(t.c(p + 1))) {
        size_t e = p + 1;
        while (is_ascii_alpha(t.c(e))) e++;
        return e;
    }
    const uint16_t m = t.at(p);
    if (!(m & (CRLF | L | P | S)) && t.is(p + 1, L | M)) return t.run(p + 1, L | M);
    if (m & (L | M)) return t.run(p, L | M);
    const size_t s = t.c(p) == ' ' && t.is(p + 1, P | S) ? p + 1 : p;
    if (t.is(s, P | S)) return t.run(t.run(s, P | S), CRLF);
    return match_whitespace(t, p, true);
}

bool is_cjk_or_kana(uint32_t c) {  // [一-龥぀-ゟ゠-ヿ]
    return (c >= 0x4e00 && c <= 0x9fa5) || (c >= 0x3040 && c <= 0x309f) || (c >= 0x30a0 && c <= 0x30ff);
}

// llama.cpp's default first stage: [\p{P}\$\+<=>\^~\|]+
bool is_default_punct(const Text& t, size_t i) {
    const uint32_t c = t.c(i);
    return t.is(i, P) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' || c == '|';
}

using Matcher = size_t (*)(const Text&, size_t);

// One regex applied to each piece (HF Split with behavior "isolated"): matches and the gaps between
// them become pieces of their own.
void apply_stage(Text& t, Matcher match, const std::vector<Span>& in, std::vector<Span>& out) {
    out.clear();
    for (const Span& piece : in) {
        t.hi = piece.end;
        size_t gap = piece.begin;
        for (size_t p = piece.begin; p < piece.end;) {
            const size_t e = match(t, p);
            if (e == p) {
                p++;
                continue;
            }
            if (gap < p) out.push_back({uint32_t(gap), uint32_t(p)});
            out.push_back({uint32_t(p), uint32_t(e)});
            p = gap = e;
        }
        if (gap < piece.end) out.push_back({uint32_t(gap), piece.end});
    }
}

const std::vector<Matcher>& stages(PreSplit split) {
    static const std::vector<Matcher> DEFAULT_STAGES = {
        [](const Text& t, size_t p) {
            size_t e = p;
            while (is_default_punct(t, e)) e++;
            return e;
        },
        [](const Text& t, size_t p) { return match_gpt2(t, p, false); },
        [](const Text& t, size_t p) { return t.run(p, N); },
        [](const Text& t, size_t p) {
            const auto digit = [&](size_t i) { return t.c(i) >= '0' && t.c(i) <= '9'; };
            return digit(p) && digit(p + 1) && digit(p + 2) ? p + 3 : p;
        },
    };
    static const std::vector<Matcher> GPT2_STAGES = {[](const Text& t, size_t p) { return match_gpt2(t, p); }};
    static const std::vector<Matcher> LLAMA3_STAGES = {[](const Text& t, size_t p) { return match_llama3(t, p, 3, L); }};
    static const std::vector<Matcher> QWEN2_STAGES = {[](const Text& t, size_t p) { return match_llama3(t, p, 1, L); }};
    static const std::vector<Matcher> QWEN35_STAGES = {[](const Text& t, size_t p) { return match_llama3(t, p, 1, L | M); }};
    static const std::vector<Matcher> TEKKEN_STAGES = {[](const Text& t, size_t p) { return match_cased(t, p, PreSplit::TEKKEN); }};
    static const std::vector<Matcher> GPT4O_STAGES = {[](const Text& t, size_t p) { return match_cased(t, p, PreSplit::GPT4O); }};
    static const std::vector<Matcher> KIMI_K2_STAGES = {[](const Text& t, size_t p) { return match_cased(t, p, PreSplit::KIMI_K2); }};
    static const std::vector<Matcher> DEEPSEEK3_STAGES = {
        [](const Text& t, size_t p) { return std::min(t.run(p, N), p + 3); },
        [](const Text& t, size_t p) {
            size_t e = p;
            while (is_cjk_or_kana(t.c(e))) e++;
            return e;
        },
        match_deepseek3_words,
    };
    switch (split) {
        case PreSplit::DEFAULT: return DEFAULT_STAGES;
        case PreSplit::GPT2: return GPT2_STAGES;
        case PreSplit::LLAMA3: return LLAMA3_STAGES;
        case PreSplit::QWEN2: return QWEN2_STAGES;
        case PreSplit::QWEN35: return QWEN35_STAGES;
        case PreSplit::TEKKEN: return TEKKEN_STAGES;
        case PreSplit::GPT4O: return GPT4O_STAGES;
        case PreSplit::KIMI_K2: return KIMI_K2_STAGES;
        case PreSplit::DEEPSEEK3: return DEEPSEEK3_STAGES;
    }
    return GPT2_STAGES;
}

// name, split, nfc, ignore_merges, add_bos. Aliases are names llama.cpp maps to the same regex and
// flags. Qwen 3.5's tokenizer.json normalizes to NFC like Qwen 2/3's (llama.cpp skips NFC for both).
const Preset PRESETS[] = {
    {"default", PreSplit::DEFAULT, false, false, false},
    {"llama3", PreSplit::LLAMA3, false, true, true},
    {"llama-v3", PreSplit::LLAMA3, false, true, true},
    {"llama-bpe", PreSplit::LLAMA3, false, true, true},
    {"qwen2", PreSplit::QWEN2, true, false, false},
    {"deepseek-r1-qwen", PreSplit::QWEN2, true, false, false},
    {"qwen35", PreSplit::QWEN35, true, false, false},
    {"olmo", PreSplit::GPT2, false, false, false},
    {"gpt-2", PreSplit::GPT2, false, false, false},
    {"kimi-k2", PreSplit::KIMI_K2, false, false, false},
    {"tekken", PreSplit::TEKKEN, false, true, true},
    {"glm4", PreSplit::LLAMA3, false, false, false},
    {"chatglm-bpe", PreSplit::LLAMA3, false, false, false},
    {"gpt-4o", PreSplit::GPT4O, false, false, false},
    {"llama4", PreSplit::GPT4O, false, false, false},
    {"deepseek-v3", PreSplit::DEEPSEEK3, false, false, false},
};

}  // namespace

const Preset* find_preset(std::string_view name) {
    for (const Preset& p : PRESETS)
        if (name == p.name) return &p;
    return nullptr;
}

std::vector<std::string_view> preset_names() {
    std::vector<std::string_view> names;
    for (const Preset& p : PRESETS) names.push_back(p.name);
    return names;
}

void pre_split(PreSplit split, std::string_view text, std::vector<Span>& words) {
    if (text.empty()) return;
    thread_local Text t;  // reused buffers: splitting runs once per text fragment
    t.cp.clear(), t.cls.clear(), t.offset.clear();
    for (size_t i = 0, checked = 0; i < text.size();) {
        if (i - checked >= CancelScope::CHECK_BYTES) CancelScope::check(i - checked), checked = i;
        size_t len;
        const uint32_t c = decode_utf8(text.data() + i, text.size() - i, len);
        const uint8_t pr = props(c);
        uint16_t cls = ANY | CATEGORY_CLASS[pr & PROP_CATEGORY];
        if (pr & PROP_WHITESPACE) cls |= WS;
        if (pr & PROP_HAN) cls |= HAN;
        if (c == '\r' || c == '\n') cls |= CRLF;
        t.cp.push_back(c);
        t.cls.push_back(cls);
        t.offset.push_back(uint32_t(i));
        i += len;
    }
    t.offset.push_back(uint32_t(text.size()));

    thread_local std::vector<Span> pieces, next;
    pieces.assign(1, Span{0, uint32_t(t.cp.size())});
    for (Matcher m : stages(split)) {
        CancelScope::check(text.size());
        apply_stage(t, m, pieces, next);
        pieces.swap(next);
    }
    for (const Span& s : pieces) words.push_back({t.offset[s.begin], t.offset[s.end]});
}

}  // namespace tok
