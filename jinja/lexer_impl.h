// The Jinja lexer (internal to jinja/): template source -> tokens, with Jinja 3.1's whitespace rules as
// Hugging Face configures them (trim_blocks, lstrip_blocks, `-`/`+` markers, one trailing newline
// dropped). Text comes out already stripped, comments and raw blocks resolved.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace jinja {

enum class TokenType : uint8_t {
    TEXT,            // template data between tags
    VARIABLE_BEGIN,  // {{
    VARIABLE_END,    // }}
    BLOCK_BEGIN,     // {%
    BLOCK_END,       // %}
    NAME,
    STRING,  // text holds the unescaped value
    INTEGER,
    FLOAT,
    OPERATOR,  // text holds the operator: + - * / // % ** ~ == != < > <= >= = ( ) [ ] { } . : | , ;
    END,
};

struct Token {
    TokenType type;
    std::string text;
    int line = 1;
    int64_t int_value = 0;
    double float_value = 0.0;
};

// Throws Error(SYNTAX) with the line on malformed input (unterminated tag, comment or string, ...).
std::vector<Token> tokenize(std::string_view source);

}  // namespace jinja
