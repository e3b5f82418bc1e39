// GBNF (llama.cpp's grammar format, grammars/README.md there) parsed into Grammar rules. Repetitions
// become generated rules (x* -> r ::= x r | ε), and left recursion is refused because the matcher
// could not expand it.
#include "llm/grammar.h"

#include <algorithm>
#include <functional>
#include <map>

namespace llm {

namespace {

using Elements = std::vector<GrammarElement>;
constexpr uint32_t UNBOUNDED = UINT32_MAX;
// Bounds that keep the parser's and the matcher's recursion far from the stack's end on hostile input.
constexpr int MAX_NESTING = 100;
constexpr size_t MAX_RULES = 20000;

class Parser {
public:
    explicit Parser(std::string_view text) : src_(text) {}

    std::shared_ptr<const Grammar> parse() {
        skip_space(true);
        while (pos_ < src_.size()) {
            parse_rule();
            skip_space(true);
        }
        for (size_t i = 0; i < g_.rules.size(); i++)
            if (!defined_[i]) throw error_at(ref_pos_[i], "undefined rule '" + g_.rule_names[i] + "'");
        auto root = ids_.find("root");
        if (root == ids_.end()) throw GrammarError("[grammar] no 'root' rule: the grammar starts at root ::= ...");
        g_.root = root->second;
        check_left_recursion();
        check_grammar_budget(g_);
        return std::make_shared<const Grammar>(std::move(g_));
    }

private:
    GrammarError error_at(size_t at, const std::string& what) const {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < at && i < src_.size(); i++) {
            if (src_[i] == '\n') line++, col = 1;
            else col++;
        }
        return GrammarError("[grammar] line " + std::to_string(line) + " column " + std::to_string(col) + ": " + what);
    }
    GrammarError error(const std::string& what) const { return error_at(pos_, what); }
    bool at_end() const { return pos_ >= src_.size(); }
    char peek(size_t ahead = 0) const { return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0'; }
    static bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

    // Spaces and comments; newlines only where `newlines` (inside groups, after ::= and |).
    void skip_space(bool newlines) {
        while (!at_end()) {
            char c = peek();
            if (c == ' ' || c == '\t') pos_++;
            else if (c == '#') while (!at_end() && peek() != '\n') pos_++;
            else if (newlines && (c == '\n' || c == '\r')) pos_++;
            else break;
        }
    }
    // A top-level newline followed by a line that starts with '|' continues the alternatives.
    bool continues_on_next_line() {
        size_t save = pos_;
        skip_space(true);
        if (peek() == '|') return true;
        pos_ = save;
        return false;
    }

    uint32_t symbol(const std::string& name, size_t at) {
        auto [it, added] = ids_.emplace(name, uint32_t(g_.rules.size()));
        if (added) {
            if (g_.rules.size() >= MAX_RULES) throw error_at(at, "more than " + std::to_string(MAX_RULES) + " rules (repetitions count)");
            g_.rules.emplace_back();
            g_.rule_names.push_back(name);
            defined_.push_back(false);
            ref_pos_.push_back(at);
        }
        return it->second;
    }
    uint32_t generated(const std::string& base) { return symbol(base + "_" + std::to_string(g_.rules.size()), pos_); }
    void define(uint32_t id, Elements elements) {
        elements.push_back({GrammarOp::END, 0});
        g_.rules[id] = std::move(elements);
        defined_[id] = true;
    }

    std::string name() {
        size_t start = pos_;
        while (!at_end() && is_word(peek())) pos_++;
        if (start == pos_) throw error("expected a rule name");
        return std::string(src_.substr(start, pos_ - start));
    }

    uint32_t hex(int digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; i++) {
            char c = peek();
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0) throw error("expected " + std::to_string(digits) + " hex digits");
            v = v * 16 + uint32_t(d);
            pos_++;
        }
        return v;
    }

    // One code point of a literal or class, escapes decoded.
    uint32_t code_point() {
        if (at_end()) throw error("unexpected end of grammar");
        unsigned char c = static_cast<unsigned char>(peek());
        if (c == '\\') {
            pos_++;
            char e = peek();
            pos_++;
            switch (e) {
                case 'x': return hex(2);
                case 'u': return hex(4);
                case 'U': return hex(8);
                case 't': return '\t';
                case 'r': return '\r';
                case 'n': return '\n';
                case '\\': case '"': case '[': case ']': case '-': case '^': case '.': case '/': case '|': return uint32_t(e);
                default: throw error_at(pos_ - 2, std::string("unknown escape '\\") + e + "'");
            }
        }
        // UTF-8 in the grammar source
        int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
        if (n < 0) throw error("invalid UTF-8 in the grammar");
        uint32_t v = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
        pos_++;
        for (int i = 0; i < n; i++) {
            unsigned char cc = static_cast<unsigned char>(peek());
            if ((cc & 0xC0) != 0x80) throw error("invalid UTF-8 in the grammar");
            v = (v << 6) | (cc & 0x3F);
            pos_++;
        }
        return v;
    }

    uint32_t integer() {
        size_t start = pos_;
        uint64_t v = 0;
        while (std::isdigit(static_cast<unsigned char>(peek()))) {
            v = v * 10 + uint64_t(peek() - '0');
            if (v > 100000) throw error_at(start, "repetition count too large (at most 100000)");
            pos_++;
        }
        if (start == pos_) throw error("expected a number");
        return uint32_t(v);
    }

    // Repeats the symbol out[from..] between lo and hi (UNBOUNDED) times, with generated rules.
    void repeat(Elements& out, size_t from, uint32_t lo, uint32_t hi, const std::string& rule) {
        if (hi != UNBOUNDED && lo > hi) throw error("repetition {m,n} with m > n");
        Elements item(out.begin() + long(from), out.end());
        out.resize(from);
        for (uint32_t i = 0; i < lo; i++) out.insert(out.end(), item.begin(), item.end());
        if (hi == UNBOUNDED) {  // r ::= item r |
            uint32_t r = generated(rule);
            Elements body = item;
            body.push_back({GrammarOp::RULE_REF, r});
            body.push_back({GrammarOp::ALT, 0});
            define(r, body);
            out.push_back({GrammarOp::RULE_REF, r});
        } else if (hi > lo) {  // r1 ::= item r0 | ... nested, (hi - lo) optional copies
            uint32_t last = UINT32_MAX;
            for (uint32_t i = 0; i < hi - lo; i++) {
                uint32_t r = generated(rule);
                Elements body = item;
                if (last != UINT32_MAX) body.push_back({GrammarOp::RULE_REF, last});
                body.push_back({GrammarOp::ALT, 0});
                define(r, body);
                last = r;
            }
            out.push_back({GrammarOp::RULE_REF, last});
        }
    }

    void parse_sequence(Elements& out, const std::string& rule, bool nested) {
        size_t last_symbol = out.size();
        bool have_symbol = false;
        while (!at_end()) {
            char c = peek();
            size_t start = out.size();
            if (c == '"') {
                pos_++;
                while (!at_end() && peek() != '"') out.push_back({GrammarOp::CHAR, code_point()});
                if (at_end()) throw error("unterminated string literal");
                pos_++;
            } else if (c == '[') {
                size_t open = pos_++;
                GrammarOp first = GrammarOp::CHAR;
                if (peek() == '^') pos_++, first = GrammarOp::CHAR_NOT;
                bool any = false;
                while (!at_end() && peek() != ']') {
                    if (peek() == '\n') throw error_at(open, "unterminated character class");
                    uint32_t lo = code_point();
                    out.push_back({any ? GrammarOp::CHAR_ALT : first, lo});
                    any = true;
                    if (peek() == '-' && peek(1) != ']' && peek(1) != '\n' && pos_ + 1 < src_.size()) {
                        pos_++;
                        uint32_t hi = code_point();
                        if (hi < lo) throw error("character range with its end below its start");
                        out.push_back({GrammarOp::CHAR_RNG_UPPER, hi});
                    }
                }
                if (at_end()) throw error_at(open, "unterminated character class");
                if (!any) throw error_at(open, "empty character class");
                pos_++;
            } else if (c == '.') {
                pos_++;
                out.push_back({GrammarOp::CHAR_ANY, 0});
            } else if (c == '<' || (c == '!' && peek(1) == '<')) {
                bool negated = c == '!';
                size_t open = pos_;
                pos_ += negated ? 1 : 0;
                size_t close = src_.find('>', pos_);
                if (close == std::string_view::npos) throw error_at(open, "unterminated token reference");
                std::string_view inner = src_.substr(pos_ + 1, close - pos_ - 1);
                std::string token = inner.size() > 2 && inner.front() == '[' && inner.back() == ']'
                                        ? std::string(inner)
                                        : std::string(src_.substr(pos_, close - pos_ + 1));
                if (token == "[]" || token == "<>") throw error_at(open, "empty token reference");
                auto it = std::find(g_.tokens.begin(), g_.tokens.end(), token);
                uint32_t index = uint32_t(it - g_.tokens.begin());
                if (it == g_.tokens.end()) g_.tokens.push_back(token);
                out.push_back({negated ? GrammarOp::TOKEN_NOT : GrammarOp::TOKEN, index});
                pos_ = close + 1;
            } else if (is_word(c)) {
                size_t at = pos_;
                std::string ref = name();
                skip_space(nested);
                if (peek() == ':' && peek(1) == ':' && peek(2) == '=') throw error_at(at, "expected a newline before the rule '" + ref + "'");
                out.push_back({GrammarOp::RULE_REF, symbol(ref, at)});
                last_symbol = start, have_symbol = true;
                continue;
            } else if (c == '(') {
                if (++depth_ > MAX_NESTING) throw error("groups nested deeper than " + std::to_string(MAX_NESTING));
                pos_++;
                skip_space(true);
                uint32_t sub = generated(rule);
                Elements body;
                parse_alternatives(body, rule, true);
                define(sub, body);
                if (peek() != ')') throw error("expected ')'");
                pos_++;
                depth_--;
                out.push_back({GrammarOp::RULE_REF, sub});
            } else if (c == '*' || c == '+' || c == '?' || c == '{') {
                if (!have_symbol) throw error(std::string("'") + c + "' with nothing before it to repeat");
                uint32_t lo = 0, hi = UNBOUNDED;
                pos_++;
                if (c == '+') lo = 1;
                else if (c == '?') hi = 1;
                else if (c == '{') {
                    skip_space(false);
                    lo = integer();
                    skip_space(false);
                    hi = lo;
                    if (peek() == ',') {
                        pos_++;
                        skip_space(false);
                        hi = std::isdigit(static_cast<unsigned char>(peek())) ? integer() : UNBOUNDED;
                        skip_space(false);
                    }
                    if (peek() != '}') throw error("expected '}' closing a repetition");
                    pos_++;
                }
                repeat(out, last_symbol, lo, hi, rule);
                have_symbol = false;  // x** is an error, as in llama.cpp
                skip_space(nested);
                continue;
            } else {
                break;
            }
            last_symbol = start, have_symbol = true;
            skip_space(nested);
        }
    }

    void parse_alternatives(Elements& out, const std::string& rule, bool nested) {
        parse_sequence(out, rule, nested);
        while (peek() == '|' || (!nested && continues_on_next_line())) {
            pos_++;
            skip_space(true);
            out.push_back({GrammarOp::ALT, 0});
            parse_sequence(out, rule, nested);
        }
    }

    void parse_rule() {
        size_t at = pos_;
        std::string rule = name();
        skip_space(false);
        if (!(peek() == ':' && peek(1) == ':' && peek(2) == '=')) throw error("expected '::=' after the rule name '" + rule + "'");
        pos_ += 3;
        skip_space(true);
        uint32_t id = symbol(rule, at);
        if (defined_[id]) throw error_at(at, "rule '" + rule + "' is defined twice");
        defined_[id] = true;  // before its body, which may refer to it
        Elements body;
        parse_alternatives(body, rule, false);
        define(id, body);
        skip_space(false);
        if (!at_end() && peek() != '\n' && peek() != '\r') throw error(std::string("unexpected '") + peek() + "'");
    }

    // A rule that can reach itself without consuming a character would expand forever.
    void check_left_recursion() {
        const size_t n = g_.rules.size();
        std::vector<bool> nullable(n, false);
        for (bool changed = true; changed;) {  // fixpoint: a rule with an alternative of nullable refs
            changed = false;
            for (size_t r = 0; r < n; r++) {
                if (nullable[r]) continue;
                bool alt_ok = true;
                for (const GrammarElement& e : g_.rules[r]) {
                    if (e.op == GrammarOp::END || e.op == GrammarOp::ALT) {
                        if (alt_ok) { nullable[r] = changed = true; break; }
                        alt_ok = true;
                    } else if (e.op != GrammarOp::RULE_REF || !nullable[e.value]) {
                        if (e.op != GrammarOp::CHAR_ALT && e.op != GrammarOp::CHAR_RNG_UPPER) alt_ok = false;
                    }
                }
            }
        }
        // edges r -> s: s is referenced where everything before it in the alternative is nullable
        std::vector<std::vector<uint32_t>> left(n);
        for (size_t r = 0; r < n; r++) {
            bool prefix_nullable = true;
            for (const GrammarElement& e : g_.rules[r]) {
                if (e.op == GrammarOp::END || e.op == GrammarOp::ALT) prefix_nullable = true;
                else if (!prefix_nullable) continue;
                else if (e.op == GrammarOp::RULE_REF) {
                    left[r].push_back(e.value);
                    prefix_nullable = nullable[e.value];
                } else if (e.op != GrammarOp::CHAR_ALT && e.op != GrammarOp::CHAR_RNG_UPPER) prefix_nullable = false;
            }
        }
        if (const int64_t r = node_on_cycle(left); r >= 0)
            throw GrammarError("[grammar] rule '" + g_.rule_names[size_t(r)] + "' is left-recursive (it can refer to itself before matching any character)");
    }

    std::string_view src_;
    size_t pos_ = 0;
    int depth_ = 0;
    Grammar g_;
    std::map<std::string, uint32_t> ids_;
    std::vector<bool> defined_;
    std::vector<size_t> ref_pos_;  // where each rule was first named, for "undefined rule"
};

}  // namespace

std::shared_ptr<const Grammar> parse_gbnf(std::string_view text) { return Parser(text).parse(); }

int64_t node_on_cycle(const std::vector<std::vector<uint32_t>>& edges) {
    std::vector<int> color(edges.size(), 0);  // 0 new, 1 on the path, 2 done
    int64_t found = -1;
    std::function<void(uint32_t)> dfs = [&](uint32_t r) {
        color[r] = 1;
        for (uint32_t s : edges[r]) {
            if (found >= 0) return;
            if (color[s] == 1) found = s;
            else if (color[s] == 0) dfs(s);
        }
        color[r] = 2;
    };
    for (uint32_t r = 0; r < edges.size() && found < 0; r++)
        if (color[r] == 0) dfs(r);
    return found;
}

std::string gbnf_literal(std::string_view text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        if (c == '"' || c == '\\') out += '\\', out += char(c);
        else if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c == 0x7F) {
            static const char* HEX = "0123456789ABCDEF";
            out += "\\x", out += HEX[c >> 4], out += HEX[c & 15];
        } else out += char(c);
    }
    return out + "\"";
}

std::vector<int32_t> resolve_grammar_tokens(const Grammar& grammar, const tok::Tokenizer& tokenizer) {
    std::vector<int32_t> ids;
    for (const std::string& t : grammar.tokens) {
        if (t.front() == '[') {
            long id = -1;
            try { id = std::stol(t.substr(1, t.size() - 2)); } catch (const std::exception&) {}
            if (id < 0 || id >= tokenizer.n_vocab())
                throw GrammarError("[grammar] token <" + t + "> is not an id of this vocabulary (" + std::to_string(tokenizer.n_vocab()) + " tokens)");
            ids.push_back(int32_t(id));
            continue;
        }
        std::vector<int32_t> enc = tokenizer.encode(t, false, true);
        if (enc.size() != 1) throw GrammarError("[grammar] token " + t + " is not one token of this vocabulary");
        ids.push_back(enc[0]);
    }
    return ids;
}

}  // namespace llm
