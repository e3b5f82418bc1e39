// The Jinja lexer. Mirrors Jinja 3.1's regex lexer rule for rule (its root, block, variable,
// comment and raw states), so whitespace comes out exactly as Hugging Face's environment makes it.
#include "jinja/lexer_impl.h"

#include "jinja/unicode_impl.h"
#include "jinja/value_impl.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace jinja {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
bool is_octal(char c) { return c >= '0' && c <= '7'; }
bool is_binary(char c) { return c == '0' || c == '1'; }
// Names are ASCII identifiers; bytes of non-ASCII letters are accepted as Jinja accepts Unicode names.
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80); }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Python's str.rstrip() (Unicode whitespace).
std::string_view rstrip(std::string_view s) { return py_strip(s, {}, false, Strip::RIGHT); }

bool all_whitespace(std::string_view s) {
    if (s.empty()) return false;
    for (size_t i = 0; i < s.size();)
        if (!py_isspace(utf8_next(s, i))) return false;
    return true;
}

class Lexer {
public:
    explicit Lexer(std::string_view source) {
        // Newlines normalize to \n (\r\n, \r), and one trailing newline is dropped (keep_trailing_newline off).
        src_.reserve(source.size());
        for (size_t i = 0; i < source.size(); i++) {
            if (source[i] == '\r') {
                src_ += '\n';
                if (i + 1 < source.size() && source[i + 1] == '\n') i++;
            } else {
                src_ += source[i];
            }
        }
        if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    }

    std::vector<Token> run() {
        while (pos_ < src_.size()) {
            size_t tag = find_tag(pos_);
            if (tag == std::string::npos) {
                emit_text(std::string_view(src_).substr(pos_));
                pos_ = src_.size();
                break;
            }
            char kind = src_[tag + 1];
            size_t after = tag + 2;
            char sign = after < src_.size() && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
            size_t raw_end = kind == '%' ? match_raw_begin(tag) : 0;
            std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);
            emit_text(strip_before_tag(text, sign, kind != '{'));
            advance_to(sign ? after + 1 : after);
            if (raw_end) {
                advance_to(raw_end);
                lex_raw();
            } else if (kind == '#') {
                lex_comment();
            } else {
                lex_tag(kind == '%');
            }
        }
        tokens_.push_back({TokenType::END, "", line_});
        return std::move(tokens_);
    }

private:
    std::string src_;
    size_t pos_ = 0;
    int line_ = 1;
    bool line_starting_ = true;  // the last token ended with a newline (lstrip_blocks needs it)
    std::vector<Token> tokens_;

    [[noreturn]] void error(const std::string& msg) const { throw Error(ErrorKind::SYNTAX, msg, line_); }

    size_t find_tag(size_t from) const {
        for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
            if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
        }
        return std::string::npos;
    }

    // Moves to `to`, counting lines and remembering whether the consumed text ended a line.
    void advance_to(size_t to) {
        for (size_t i = pos_; i < to; i++) line_ += src_[i] == '\n';
        if (to > pos_) line_starting_ = src_[to - 1] == '\n';
        pos_ = to;
    }

    void emit_text(std::string_view text) {
        if (!text.empty()) tokens_.push_back({TokenType::TEXT, std::string(text), line_});
    }

    // `{%-` strips all whitespace before the tag; lstrip_blocks strips spaces between the start of
    // the line and a block or comment tag unless it is marked `+`.
    std::string_view strip_before_tag(std::string_view text, char sign, bool is_block_or_comment) const {
        if (sign == '-') return rstrip(text);
        if (sign == '+' || !is_block_or_comment) return text;
        size_t line_start = text.rfind('\n');
        line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
        if ((line_start > 0 || line_starting_) && all_whitespace(text.substr(line_start)))
            return text.substr(0, line_start);
        return text;
    }

    size_t skip_spaces(size_t i) const {
        while (i < src_.size()) {
            size_t next = i;
            if (!py_isspace(utf8_next(src_, next))) break;
            i = next;
        }
        return i;
    }

    bool starts_with(size_t i, std::string_view s) const { return std::string_view(src_).substr(i, s.size()) == s; }

    // The end of a block tag at i (`+%}`, `-%}` + whitespace, `%}` + one newline), or 0.
    size_t match_block_end(size_t i) const {
        if (starts_with(i, "+%}")) return i + 3;
        if (starts_with(i, "-%}")) return skip_spaces(i + 3);
        if (starts_with(i, "%}")) return i + 2 + (i + 2 < src_.size() && src_[i + 2] == '\n');
        return 0;
    }

    // `{% raw %}` at `tag`: returns the end of the opening tag, or 0. (No trim_blocks here, as in Jinja.)
    size_t match_raw_begin(size_t tag) const {
        size_t i = tag + 2;
        if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) i++;
        i = skip_spaces(i);
        if (!starts_with(i, "raw")) return 0;
        i = skip_spaces(i + 3);
        if (starts_with(i, "-%}")) return skip_spaces(i + 3);
        if (starts_with(i, "%}")) return i + 2;
        return 0;
    }

    void lex_raw() {
        for (size_t tag = find_tag(pos_); tag != std::string::npos; tag = find_tag(tag + 1)) {
            if (src_[tag + 1] != '%') continue;
            size_t i = tag + 2;
            char sign = i < src_.size() && (src_[i] == '-' || src_[i] == '+') ? src_[i] : 0;
            i = skip_spaces(i + (sign ? 1 : 0));
            if (!starts_with(i, "endraw")) continue;
            size_t end = match_block_end(skip_spaces(i + 6));
            if (!end) continue;
            emit_text(strip_before_tag(std::string_view(src_).substr(pos_, tag - pos_), sign, true));
            advance_to(end);
            return;
        }
        error("Missing end of raw directive");
    }

    void lex_comment() {
        size_t close = src_.find("#}", pos_);
        if (close == std::string::npos) error("Missing end of comment tag");
        char sign = close > pos_ && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
        size_t end = close + 2;
        if (sign == '-') end = skip_spaces(end);
        else if (!sign && end < src_.size() && src_[end] == '\n') end++;  // trim_blocks
        advance_to(end);
    }

    void lex_tag(bool block) {
        tokens_.push_back({block ? TokenType::BLOCK_BEGIN : TokenType::VARIABLE_BEGIN, "", line_});
        std::string balance;  // closing brackets still expected
        while (true) {
            if (pos_ >= src_.size()) error(block ? "unexpected end of template, expected 'end of statement block'"
                                                 : "unexpected end of template, expected 'end of print statement'");
            if (balance.empty()) {
                size_t end = block ? match_block_end(pos_)
                             : starts_with(pos_, "-}}") ? skip_spaces(pos_ + 3)
                             : starts_with(pos_, "}}")  ? pos_ + 2
                                                        : 0;
                if (end) {
                    tokens_.push_back({block ? TokenType::BLOCK_END : TokenType::VARIABLE_END, "", line_});
                    advance_to(end);
                    return;
                }
            }
            size_t next = pos_;
            if (py_isspace(utf8_next(src_, next))) {
                advance_to(skip_spaces(pos_));
                continue;
            }
            char c = src_[pos_];
            if (is_digit(c)) lex_number();
            else if (is_name_start(c)) lex_name();
            else if (c == '\'' || c == '"') lex_string();
            else lex_operator(balance);
        }
    }

    void lex_name() {
        size_t end = pos_;
        while (end < src_.size() && is_name_char(src_[end])) end++;
        tokens_.push_back({TokenType::NAME, src_.substr(pos_, end - pos_), line_});
        advance_to(end);
    }

    size_t digits(size_t i, bool (*ok)(char)) const {  // digits with single `_` separators
        size_t start = i;
        while (i < src_.size() && (ok(src_[i]) || (src_[i] == '_' && i > start && i + 1 < src_.size() && ok(src_[i + 1]))))
            i++;
        return i;
    }

    void lex_number() {
        size_t start = pos_;
        char prefix = start + 1 < src_.size() && src_[start] == '0' ? static_cast<char>(src_[start + 1] | 0x20) : 0;
        if (prefix == 'b' || prefix == 'o' || prefix == 'x') {  // 0b101, 0o17, 0xff
            int base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
            size_t end = digits(start + 2, base == 2 ? is_binary : base == 8 ? is_octal : is_hex);
            if (end > start + 2) {
                push_integer(start + 2, end, base);
                return;
            }
        }
        bool after_dot = start > 0 && src_[start - 1] == '.';  // `x.0.1` is item 0, then item 1
        size_t end = digits(start, is_digit);
        bool is_float = false;
        if (!after_dot) {
            size_t i = end;
            if (i + 1 < src_.size() && src_[i] == '.' && is_digit(src_[i + 1])) {
                i = digits(i + 1, is_digit);
                is_float = true;
            }
            if (i < src_.size() && (src_[i] | 0x20) == 'e') {
                size_t j = i + 1;
                if (j < src_.size() && (src_[j] == '+' || src_[j] == '-')) j++;
                if (j < src_.size() && is_digit(src_[j])) {
                    i = digits(j, is_digit);
                    is_float = true;
                }
            }
            if (is_float) end = i;
        }
        if (!is_float) {
            push_integer(start, end, 10);
            return;
        }
        std::string text = without_underscores(start, end);
        Token tok{TokenType::FLOAT, text, line_};
        tok.float_value = std::strtod(text.c_str(), nullptr);
        tokens_.push_back(std::move(tok));
        advance_to(end);
    }

    std::string without_underscores(size_t start, size_t end) const {
        std::string text;
        for (size_t i = start; i < end; i++)
            if (src_[i] != '_') text += src_[i];
        return text;
    }

    void push_integer(size_t digits_start, size_t end, int base) {
        std::string text = without_underscores(digits_start, end);
        Token tok{TokenType::INTEGER, text, line_};
        errno = 0;
        tok.int_value = std::strtoll(text.c_str(), nullptr, base);
        if (errno == ERANGE) error("integer literal too large: " + text);
        tokens_.push_back(std::move(tok));
        advance_to(end);
    }

    void lex_string() {
        char quote = src_[pos_];
        std::string value;
        size_t i = pos_ + 1;
        while (true) {
            if (i >= src_.size()) error("unexpected end of string");
            char c = src_[i];
            if (c == quote) break;
            if (c != '\\') {
                value += c;
                i++;
                continue;
            }
            if (i + 1 >= src_.size()) error("unexpected end of string");
            i = unescape(i + 1, value);
        }
        tokens_.push_back({TokenType::STRING, std::move(value), line_});
        advance_to(i + 1);
    }

    // Python's unicode-escape for the escape whose letter is at i; returns the index after it.
    size_t unescape(size_t i, std::string& out) {
        char c = src_[i];
        auto hex = [&](size_t start, int n) -> char32_t {
            char32_t cp = 0;
            for (int k = 0; k < n; k++) {
                char h = start + k < src_.size() ? src_[start + k] : 0;
                if (!std::isxdigit(static_cast<unsigned char>(h))) error("truncated \\x/\\u/\\U escape in string literal");
                cp = cp * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (h | 0x20) - 'a' + 10);
            }
            if (cp > 0x10FFFF) error("illegal Unicode character in string literal");
            return cp;
        };
        switch (c) {
        case '\n': return i + 1;  // line continuation
        case '\\': out += '\\'; return i + 1;
        case '\'': out += '\''; return i + 1;
        case '"': out += '"'; return i + 1;
        case 'a': out += '\a'; return i + 1;
        case 'b': out += '\b'; return i + 1;
        case 'f': out += '\f'; return i + 1;
        case 'n': out += '\n'; return i + 1;
        case 'r': out += '\r'; return i + 1;
        case 't': out += '\t'; return i + 1;
        case 'v': out += '\v'; return i + 1;
        case 'x': utf8_append(out, hex(i + 1, 2)); return i + 3;
        case 'u': utf8_append(out, hex(i + 1, 4)); return i + 5;
        case 'U': utf8_append(out, hex(i + 1, 8)); return i + 9;
        default: break;
        }
        if (c >= '0' && c <= '7') {
            char32_t cp = 0;
            size_t k = i;
            for (; k < i + 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; k++) cp = cp * 8 + (src_[k] - '0');
            utf8_append(out, cp);
            return k;
        }
        out += '\\';  // unknown escapes stay as written
        return i;
    }

    void lex_operator(std::string& balance) {
        static const char* const OPERATORS[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[",
                                                "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
        for (const char* op : OPERATORS) {
            if (!starts_with(pos_, op)) continue;
            std::string s = op;
            if (s == "(" || s == "[" || s == "{") {
                balance.push_back(s == "(" ? ')' : s == "[" ? ']' : '}');
            } else if (s == ")" || s == "]" || s == "}") {
                if (balance.empty()) error("unexpected '" + s + "'");
                if (balance.back() != s[0]) error("unexpected '" + s + "', expected '" + balance.back() + "'");
                balance.pop_back();
            }
            tokens_.push_back({TokenType::OPERATOR, s, line_});
            advance_to(pos_ + s.size());
            return;
        }
        size_t next = pos_;
        std::string ch;
        utf8_append(ch, utf8_next(src_, next));
        error("unexpected char '" + ch + "'");
    }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace jinja
