// Unicode facts the tokenizer needs: per-code-point properties from generated tables
// (unicode_tables.cpp), UTF-8 decoding that never fails, and NFC normalization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tok::unicode {

// General category; the order matches scripts/gen_unicode_tables.py.
enum Category : uint8_t {
    Cn, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe,
    Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co,
};

extern const char UCD_VERSION[];  // of the generated tables: "15.0.0"

// The two-stage property table props() reads (generated): a block index per PROPS_BLOCK code points,
// then the blocks' bytes (the category in the low bits, then the PROP_ flags).
extern const uint16_t PROPS_STAGE1[];
extern const uint8_t PROPS_BLOCKS[];
constexpr uint32_t PROPS_BLOCK = 128;
constexpr uint8_t PROP_CATEGORY = 0x1f, PROP_WHITESPACE = 0x20, PROP_HAN = 0x40, PROP_NFC_CHECK = 0x80;

// A byte that does not start a valid UTF-8 sequence decodes to INVALID_BASE + byte: it keeps its
// place and its value (text round-trips byte for byte) and has no properties (category Cn).
constexpr uint32_t INVALID_BASE = 0x110000;

inline uint8_t props(uint32_t cp) {
    if (cp >= INVALID_BASE) return Cn;
    return PROPS_BLOCKS[PROPS_STAGE1[cp / PROPS_BLOCK] * PROPS_BLOCK + cp % PROPS_BLOCK];
}
inline Category category(uint32_t cp) { return Category(props(cp) & PROP_CATEGORY); }

// Decodes the code point at s[0] (n > 0 bytes available) and sets `len` to its byte length.
// Overlong forms, surrogates, values past U+10FFFF and truncated sequences are invalid.
inline uint32_t decode_utf8(const char* s, size_t n, size_t& len) {
    const auto b = [&](size_t i) { return uint8_t(s[i]); };
    const uint8_t b0 = b(0);
    len = 1;
    if (b0 < 0x80) return b0;
    const auto cont = [&](size_t i, uint8_t lo = 0x80, uint8_t hi = 0xbf) { return i < n && b(i) >= lo && b(i) <= hi; };
    if (b0 >= 0xc2 && b0 <= 0xdf && cont(1)) {
        len = 2;
        return (b0 & 0x1fu) << 6 | (b(1) & 0x3fu);
    }
    if (b0 >= 0xe0 && b0 <= 0xef) {
        const uint8_t lo = b0 == 0xe0 ? 0xa0 : 0x80, hi = b0 == 0xed ? 0x9f : 0xbf;
        if (cont(1, lo, hi) && cont(2)) {
            len = 3;
            return (b0 & 0x0fu) << 12 | (b(1) & 0x3fu) << 6 | (b(2) & 0x3fu);
        }
    }
    if (b0 >= 0xf0 && b0 <= 0xf4) {
        const uint8_t lo = b0 == 0xf0 ? 0x90 : 0x80, hi = b0 == 0xf4 ? 0x8f : 0xbf;
        if (cont(1, lo, hi) && cont(2) && cont(3)) {
            len = 4;
            return (b0 & 0x07u) << 18 | (b(1) & 0x3fu) << 12 | (b(2) & 0x3fu) << 6 | (b(3) & 0x3fu);
        }
    }
    return INVALID_BASE + b0;
}

// Appends the UTF-8 form of `cp` (an INVALID_BASE value appends its original byte).
void append_utf8(std::string& out, uint32_t cp);

// True when s[0..n) is the start of a valid multi-byte sequence that more bytes could complete.
bool is_utf8_prefix(const char* s, size_t n);

int combining_class(uint32_t cp);

// Canonical composition (NFC, UAX #15). Invalid bytes pass through unchanged.
bool is_nfc_quick(std::string_view text);  // true: certainly NFC already
std::string to_nfc(std::string_view text);

}  // namespace tok::unicode
