// UTF-8 helpers and NFC normalization (UAX #15: decompose, reorder by combining class, compose)
// over the generated tables in unicode_tables.cpp. Hangul syllables are handled algorithmically.
#include "tokenizer/unicode_impl.h"

#include <algorithm>
#include <vector>

namespace tok::unicode {

namespace {

// Hangul syllable arithmetic (Unicode chapter 3.12).
constexpr uint32_t S_BASE = 0xac00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11a7;
constexpr uint32_t L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT;

uint32_t run_value(const CodepointRun* runs, size_t n, uint32_t cp) {
    const CodepointRun* end = runs + n;
    const CodepointRun* it = std::upper_bound(runs, end, cp, [](uint32_t c, const CodepointRun& r) { return c < r.first; });
    if (it == runs) return 0;
    --it;
    return cp <= it->last ? it->value : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        const uint32_t s = cp - S_BASE;
        out.push_back(L_BASE + s / N_COUNT);
        out.push_back(V_BASE + s % N_COUNT / T_COUNT);
        if (s % T_COUNT) out.push_back(T_BASE + s % T_COUNT);
        return;
    }
    const Decomposition* end = DECOMPOSITIONS + N_DECOMPOSITIONS;
    const Decomposition* it = std::lower_bound(DECOMPOSITIONS, end, cp, [](const Decomposition& d, uint32_t c) { return d.cp < c; });
    if (it == end || it->cp != cp) {
        out.push_back(cp);
        return;
    }
    out.insert(out.end(), DECOMPOSITION_DATA + it->offset, DECOMPOSITION_DATA + it->offset + it->length);
}

// The primary composite of (first, second), or 0.
uint32_t compose(uint32_t first, uint32_t second) {
    if (first >= L_BASE && first < L_BASE + L_COUNT && second >= V_BASE && second < V_BASE + V_COUNT)
        return S_BASE + ((first - L_BASE) * V_COUNT + (second - V_BASE)) * T_COUNT;
    if (first >= S_BASE && first < S_BASE + S_COUNT && (first - S_BASE) % T_COUNT == 0 && second > T_BASE &&
        second < T_BASE + T_COUNT)
        return first + (second - T_BASE);
    const Composition* end = COMPOSITIONS + N_COMPOSITIONS;
    const Composition* it = std::lower_bound(COMPOSITIONS, end, std::pair{first, second}, [](const Composition& c, std::pair<uint32_t, uint32_t> k) {
        return c.first < k.first || (c.first == k.first && c.second < k.second);
    });
    return it != end && it->first == first && it->second == second ? it->composite : 0;
}

}  // namespace

void append_utf8(std::string& out, uint32_t cp) {
    if (cp >= INVALID_BASE) {
        out.push_back(char(cp - INVALID_BASE));
    } else if (cp < 0x80) {
        out.push_back(char(cp));
    } else if (cp < 0x800) {
        out.push_back(char(0xc0 | cp >> 6));
        out.push_back(char(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
        out.push_back(char(0xe0 | cp >> 12));
        out.push_back(char(0x80 | (cp >> 6 & 0x3f)));
        out.push_back(char(0x80 | (cp & 0x3f)));
    } else {
        out.push_back(char(0xf0 | cp >> 18));
        out.push_back(char(0x80 | (cp >> 12 & 0x3f)));
        out.push_back(char(0x80 | (cp >> 6 & 0x3f)));
        out.push_back(char(0x80 | (cp & 0x3f)));
    }
}

bool is_utf8_prefix(const char* s, size_t n) {
    if (n == 0 || n > 3) return false;
    const uint8_t b0 = uint8_t(s[0]);
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf;  // allowed range of the second byte (Unicode table 3-7)
    if (b0 >= 0xc2 && b0 <= 0xdf) need = 2;
    else if (b0 >= 0xe0 && b0 <= 0xef) need = 3, lo = b0 == 0xe0 ? 0xa0 : 0x80, hi = b0 == 0xed ? 0x9f : 0xbf;
    else if (b0 >= 0xf0 && b0 <= 0xf4) need = 4, lo = b0 == 0xf0 ? 0x90 : 0x80, hi = b0 == 0xf4 ? 0x8f : 0xbf;
    else return false;
    if (n >= need) return false;
    for (size_t i = 1; i < n; i++) {
        const uint8_t b = uint8_t(s[i]);
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) return false;
    }
    return true;
}

int combining_class(uint32_t cp) {
    if (cp >= INVALID_BASE) return 0;
    return int(run_value(CCC_RUNS, N_CCC_RUNS, cp));
}

bool is_nfc_quick(std::string_view text) {
    for (size_t i = 0; i < text.size();) {
        if (uint8_t(text[i]) < 0x80) {
            i++;
            continue;
        }
        size_t len;
        const uint32_t cp = decode_utf8(text.data() + i, text.size() - i, len);
        if (props(cp) & PROP_NFC_CHECK) return false;
        i += len;
    }
    return true;
}

std::string to_nfc(std::string_view text) {
    if (is_nfc_quick(text)) return std::string(text);

    // 1. Full canonical decomposition.
    std::vector<uint32_t> cps;
    cps.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        size_t len;
        decompose(decode_utf8(text.data() + i, text.size() - i, len), cps);
        i += len;
    }
    // 2. Canonical ordering: stable sort of each run of non-starters by combining class.
    std::vector<int> cls(cps.size());
    for (size_t i = 0; i < cps.size(); i++) cls[i] = combining_class(cps[i]);
    for (size_t i = 0; i < cps.size();) {
        if (cls[i] == 0) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < cps.size() && cls[j] != 0) j++;
        for (size_t a = i + 1; a < j; a++)  // insertion sort: runs are short
            for (size_t b = a; b > i && cls[b - 1] > cls[b]; b--) std::swap(cps[b - 1], cps[b]), std::swap(cls[b - 1], cls[b]);
        i = j;
    }
    // 3. Canonical composition: each character combines with the last starter unless blocked.
    size_t out = 0;
    size_t starter = SIZE_MAX;
    int last_class = 0;
    for (size_t i = 0; i < cps.size(); i++) {
        const uint32_t cp = cps[i];
        const int c = cls[i];
        if (starter != SIZE_MAX && (last_class < c || (last_class == 0 && out == starter + 1))) {
            if (const uint32_t composite = compose(cps[starter], cp)) {
                cps[starter] = composite;
                continue;
            }
        }
        if (c == 0) starter = out;
        last_class = c;
        cps[out++] = cp;
    }
    cps.resize(out);

    std::string result;
    result.reserve(text.size());
    for (uint32_t cp : cps) append_utf8(result, cp);
    return result;
}

}  // namespace tok::unicode
