// UTF-8 iteration and the Unicode properties behind Python's str methods. Simple case mappings come
// from glibc's built-in C.UTF-8 locale (identical to Python's); the one-to-many ones from a table.
#include "jinja/unicode_impl.h"

#include <clocale>
#include <cwctype>
#include <locale.h>

namespace jinja {

char32_t utf8_next(std::string_view s, size_t& i) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char c = byte(i);
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n <= 0 || i + n >= s.size()) {
        i++;
        return c;
    }
    char32_t cp = c & (0x3F >> n);
    for (int k = 1; k <= n; k++) {
        if ((byte(i + k) & 0xC0) != 0x80) {
            i++;
            return c;
        }
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    i += n + 1;
    return cp;
}

void utf8_append(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

size_t utf8_length(std::string_view s) {
    if (is_ascii(s)) return s.size();
    size_t n = 0;
    for (size_t i = 0; i < s.size(); n++) utf8_next(s, i);
    return n;
}

size_t utf8_offset(std::string_view s, size_t index) {
    size_t i = 0;
    for (size_t k = 0; k < index && i < s.size(); k++) utf8_next(s, i);
    return i;
}

bool py_isspace(char32_t cp) {
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool py_isprintable(char32_t cp) {
    // Python 3.11 (Unicode 14): categories Cc, Cf, Cs, Co, Zl, Zp and Zs except the space are not
    // printable. Unassigned code points (Cn) are not listed: treated as printable.
    static const char32_t NON_PRINTABLE[][2] = {
        {0x0, 0x1f},       {0x7f, 0xa0},       {0xad, 0xad},       {0x600, 0x605},     {0x61c, 0x61c},
        {0x6dd, 0x6dd},    {0x70f, 0x70f},     {0x890, 0x891},     {0x8e2, 0x8e2},     {0x1680, 0x1680},
        {0x180e, 0x180e},  {0x2000, 0x200f},   {0x2028, 0x202f},   {0x205f, 0x2064},   {0x2066, 0x206f},
        {0x3000, 0x3000},  {0xd800, 0xf8ff},   {0xfeff, 0xfeff},   {0xfff9, 0xfffb},   {0x110bd, 0x110bd},
        {0x110cd, 0x110cd}, {0x13430, 0x13438}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a}, {0xe0001, 0xe0001},
        {0xe0020, 0xe007f}, {0xf0000, 0xffffd}, {0x100000, 0x10fffd},
    };
    if (cp >= 0x20 && cp < 0x7F) return true;
    for (const auto& r : NON_PRINTABLE)
        if (cp >= r[0] && cp <= r[1]) return false;
    return true;
}

namespace {

locale_t utf8_locale() {
    static locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
    return loc;
}

template <class F>
std::string map_code_points(std::string_view s, F f) {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();)
        for (char32_t c : f(utf8_next(s, i))) utf8_append(out, c);
    return out;
}

}  // namespace

bool py_isalpha(char32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    locale_t loc = utf8_locale();
    return loc && iswalpha_l(static_cast<wint_t>(cp), loc);
}

bool py_isdigit(char32_t cp) { return cp >= '0' && cp <= '9'; }

// Python's one-to-many upper-case mappings (Unicode 14 SpecialCasing.txt, unconditional ones, as
// Python 3.11 applies them): the simple mappings of the C library cannot express these.
struct SpecialUpper {
    char32_t cp;
    const char* upper;
};
const SpecialUpper SPECIAL_UPPER[] = {
    {0xDF, "SS"}, {0x149, "\u02BCN"}, {0x1F0, "J\u030C"}, {0x390, "\u0399\u0308\u0301"},
    {0x3B0, "\u03A5\u0308\u0301"}, {0x587, "\u0535\u0552"}, {0x1E96, "H\u0331"}, {0x1E97, "T\u0308"},
    {0x1E98, "W\u030A"}, {0x1E99, "Y\u030A"}, {0x1E9A, "A\u02BE"}, {0x1F50, "\u03A5\u0313"},
    {0x1F52, "\u03A5\u0313\u0300"}, {0x1F54, "\u03A5\u0313\u0301"}, {0x1F56, "\u03A5\u0313\u0342"},
    {0x1F80, "\u1F08\u0399"}, {0x1F81, "\u1F09\u0399"}, {0x1F82, "\u1F0A\u0399"}, {0x1F83, "\u1F0B\u0399"},
    {0x1F84, "\u1F0C\u0399"}, {0x1F85, "\u1F0D\u0399"}, {0x1F86, "\u1F0E\u0399"}, {0x1F87, "\u1F0F\u0399"},
    {0x1F88, "\u1F08\u0399"}, {0x1F89, "\u1F09\u0399"}, {0x1F8A, "\u1F0A\u0399"}, {0x1F8B, "\u1F0B\u0399"},
    {0x1F8C, "\u1F0C\u0399"}, {0x1F8D, "\u1F0D\u0399"}, {0x1F8E, "\u1F0E\u0399"}, {0x1F8F, "\u1F0F\u0399"},
    {0x1F90, "\u1F28\u0399"}, {0x1F91, "\u1F29\u0399"}, {0x1F92, "\u1F2A\u0399"}, {0x1F93, "\u1F2B\u0399"},
    {0x1F94, "\u1F2C\u0399"}, {0x1F95, "\u1F2D\u0399"}, {0x1F96, "\u1F2E\u0399"}, {0x1F97, "\u1F2F\u0399"},
    {0x1F98, "\u1F28\u0399"}, {0x1F99, "\u1F29\u0399"}, {0x1F9A, "\u1F2A\u0399"}, {0x1F9B, "\u1F2B\u0399"},
    {0x1F9C, "\u1F2C\u0399"}, {0x1F9D, "\u1F2D\u0399"}, {0x1F9E, "\u1F2E\u0399"}, {0x1F9F, "\u1F2F\u0399"},
    {0x1FA0, "\u1F68\u0399"}, {0x1FA1, "\u1F69\u0399"}, {0x1FA2, "\u1F6A\u0399"}, {0x1FA3, "\u1F6B\u0399"},
    {0x1FA4, "\u1F6C\u0399"}, {0x1FA5, "\u1F6D\u0399"}, {0x1FA6, "\u1F6E\u0399"}, {0x1FA7, "\u1F6F\u0399"},
    {0x1FA8, "\u1F68\u0399"}, {0x1FA9, "\u1F69\u0399"}, {0x1FAA, "\u1F6A\u0399"}, {0x1FAB, "\u1F6B\u0399"},
    {0x1FAC, "\u1F6C\u0399"}, {0x1FAD, "\u1F6D\u0399"}, {0x1FAE, "\u1F6E\u0399"}, {0x1FAF, "\u1F6F\u0399"},
    {0x1FB2, "\u1FBA\u0399"}, {0x1FB3, "\u0391\u0399"}, {0x1FB4, "\u0386\u0399"}, {0x1FB6, "\u0391\u0342"},
    {0x1FB7, "\u0391\u0342\u0399"}, {0x1FBC, "\u0391\u0399"}, {0x1FC2, "\u1FCA\u0399"},
    {0x1FC3, "\u0397\u0399"}, {0x1FC4, "\u0389\u0399"}, {0x1FC6, "\u0397\u0342"},
    {0x1FC7, "\u0397\u0342\u0399"}, {0x1FCC, "\u0397\u0399"}, {0x1FD2, "\u0399\u0308\u0300"},
    {0x1FD3, "\u0399\u0308\u0301"}, {0x1FD6, "\u0399\u0342"}, {0x1FD7, "\u0399\u0308\u0342"},
    {0x1FE2, "\u03A5\u0308\u0300"}, {0x1FE3, "\u03A5\u0308\u0301"}, {0x1FE4, "\u03A1\u0313"},
    {0x1FE6, "\u03A5\u0342"}, {0x1FE7, "\u03A5\u0308\u0342"}, {0x1FF2, "\u1FFA\u0399"},
    {0x1FF3, "\u03A9\u0399"}, {0x1FF4, "\u038F\u0399"}, {0x1FF6, "\u03A9\u0342"},
    {0x1FF7, "\u03A9\u0342\u0399"}, {0x1FFC, "\u03A9\u0399"}, {0xFB00, "FF"}, {0xFB01, "FI"}, {0xFB02, "FL"},
    {0xFB03, "FFI"}, {0xFB04, "FFL"}, {0xFB05, "ST"}, {0xFB06, "ST"}, {0xFB13, "\u0544\u0546"},
    {0xFB14, "\u0544\u0535"}, {0xFB15, "\u0544\u053B"}, {0xFB16, "\u054E\u0546"}, {0xFB17, "\u0544\u053D"},
};

std::string py_upper(std::string_view s) {
    locale_t loc = utf8_locale();
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        char32_t c = utf8_next(s, i);
        if (c < 0x80) {
            out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
            continue;
        }
        const SpecialUpper* special = nullptr;
        for (const SpecialUpper& x : SPECIAL_UPPER)
            if (x.cp == c) special = &x;
        if (special) out += special->upper;
        else utf8_append(out, loc ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), loc)) : c);
    }
    return out;
}

std::string py_lower(std::string_view s) {
    locale_t loc = utf8_locale();
    return map_code_points(s, [&](char32_t c) -> std::u32string {
        if (c < 0x80) return {c >= 'A' && c <= 'Z' ? c + 32 : c};
        if (c == 0x130) return U"i\u0307";  // the one one-to-many lower-case mapping: İ -> i + combining dot
        return {loc ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc)) : c};
    });
}

std::string py_title(std::string_view s) {
    std::string out;
    bool prev_cased = false;
    for (size_t i = 0; i < s.size();) {
        size_t start = i;
        char32_t cp = utf8_next(s, i);
        std::string_view ch = s.substr(start, i - start);
        bool cased = py_isalpha(cp);
        out += cased ? (prev_cased ? py_lower(ch) : py_upper(ch)) : std::string(ch);
        prev_cased = cased;
    }
    return out;
}

std::string py_capitalize(std::string_view s) {
    if (s.empty()) return {};
    size_t first = 0;
    utf8_next(s, first);
    return py_upper(s.substr(0, first)) + py_lower(s.substr(first));
}

std::string_view py_strip(std::string_view s, std::string_view chars, bool chars_given, Strip side) {
    auto strippable = [&](char32_t cp) {
        if (!chars_given) return py_isspace(cp);
        for (size_t i = 0; i < chars.size();)
            if (utf8_next(chars, i) == cp) return true;
        return false;
    };
    size_t begin = 0, end = s.size();
    if (side != Strip::RIGHT) {
        while (begin < end) {
            size_t next = begin;
            if (!strippable(utf8_next(s, next))) break;
            begin = next;
        }
    }
    if (side != Strip::LEFT) {
        while (end > begin) {
            size_t start = end - 1;  // back up to the lead byte of the last code point
            while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) start--;
            size_t probe = start;
            if (!strippable(utf8_next(s, probe)) || probe != end) break;
            end = start;
        }
    }
    return s.substr(begin, end - begin);
}

}  // namespace jinja
