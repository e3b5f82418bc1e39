// UTF-8 and the few Unicode properties Python's str methods depend on (internal to jinja/):
// code point iteration, str.isspace, str.isprintable, upper/lower case mapping.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace jinja {

// Decodes the code point at s[i] and advances i; an invalid byte decodes as itself (Latin-1) so
// that nothing is ever lost or read past the end.
char32_t utf8_next(std::string_view s, size_t& i);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(std::string_view s);
// Byte offset of code point `index` (clamped to s.size()).
size_t utf8_offset(std::string_view s, size_t index);
inline bool is_ascii(std::string_view s) {
    for (unsigned char c : s)
        if (c >= 0x80) return false;
    return true;
}

bool py_isspace(char32_t cp);      // Python's str.isspace (Unicode White_Space + \x1c-\x1f)
bool py_isprintable(char32_t cp);  // Python's str.isprintable (repr escapes the others)
bool py_isalpha(char32_t cp);
bool py_isdigit(char32_t cp);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title(): words start upper, continue lower
std::string py_capitalize(std::string_view s);  // str.capitalize()

// Python's str.strip family: `chars` empty means whitespace.
enum class Strip { LEFT, RIGHT, BOTH };
std::string_view py_strip(std::string_view s, std::string_view chars, bool chars_given, Strip side);

}  // namespace jinja
