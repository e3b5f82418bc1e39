// UTF-8 iteration and the Unicode properties behind Python's str methods. Case mapping comes from
// glibc's built-in C.UTF-8 locale, whose simple mappings equal Python's; Python's few one-to-many
// upper-case mappings (ß -> SS, ...) are not reproduced.
#include "llm/jinja_unicode.h"

#include <clocale>
#include <cwctype>
#include <locale.h>

namespace llm::jinja {

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
    for (size_t i = 0; i < s.size();) utf8_append(out, f(utf8_next(s, i)));
    return out;
}

}  // namespace

bool py_isalpha(char32_t cp) {
    if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    locale_t loc = utf8_locale();
    return loc && iswalpha_l(static_cast<wint_t>(cp), loc);
}

bool py_isdigit(char32_t cp) { return cp >= '0' && cp <= '9'; }

std::string py_upper(std::string_view s) {
    locale_t loc = utf8_locale();
    return map_code_points(s, [&](char32_t c) -> char32_t {
        if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
        return loc ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), loc)) : c;
    });
}

std::string py_lower(std::string_view s) {
    locale_t loc = utf8_locale();
    return map_code_points(s, [&](char32_t c) -> char32_t {
        if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
        return loc ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc)) : c;
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

}  // namespace llm::jinja
