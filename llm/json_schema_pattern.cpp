// The regex subset JSON Schema `pattern`s use (literals, escapes, classes, groups, |, * + ? {m,n},
// ^ $ anchors) turned into a GBNF expression over the JSON-encoded characters of a string value.
#include "llm/json_schema_impl.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace llm::schema {

namespace {

// Characters a JSON string may hold raw; '"', '\' and controls must be escaped.
bool raw_ok(uint32_t c) { return c >= 0x20 && c != '"' && c != '\\' && c != 0x7F && !(c >= 0xD800 && c <= 0xDFFF); }

std::string class_char(uint32_t c) {
    char buf[16];
    if (c < 0x20 || c == '"' || c == '\\' || c == ']' || c == '[' || c == '-' || c == '^' || c == 0x7F) {
        std::snprintf(buf, sizeof buf, "\\x%02X", c);
        return buf;
    }
    std::string s;
    if (c < 0x80) s += char(c);
    else {
        std::snprintf(buf, sizeof buf, c <= 0xFFFF ? "\\u%04X" : "\\U%08X", c);
        s = buf;
    }
    return s;
}

// The JSON-encoded form of one character as a GBNF literal.
std::string literal_char(uint32_t c) {
    if (raw_ok(c)) {
        std::string utf8;
        if (c < 0x80) utf8 += char(c);
        else if (c < 0x800) utf8 += char(0xC0 | (c >> 6)), utf8 += char(0x80 | (c & 0x3F));
        else if (c < 0x10000) utf8 += char(0xE0 | (c >> 12)), utf8 += char(0x80 | ((c >> 6) & 0x3F)), utf8 += char(0x80 | (c & 0x3F));
        else utf8 += char(0xF0 | (c >> 18)), utf8 += char(0x80 | ((c >> 12) & 0x3F)), utf8 += char(0x80 | ((c >> 6) & 0x3F)), utf8 += char(0x80 | (c & 0x3F));
        return gbnf_literal(utf8);
    }
    switch (c) {
        case '"': return gbnf_literal("\\\"");
        case '\\': return gbnf_literal("\\\\");
        case '\n': return gbnf_literal("\\n");
        case '\t': return gbnf_literal("\\t");
        case '\r': return gbnf_literal("\\r");
        default: {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            return gbnf_literal(buf);
        }
    }
}

struct Range {
    uint32_t lo, hi;
};

// A set of code points as a GBNF expression for their JSON encodings.
std::string set_expr(std::vector<Range> ranges, bool negated) {
    if (negated) {  // complement over all code points
        std::sort(ranges.begin(), ranges.end(), [](Range a, Range b) { return a.lo < b.lo; });
        std::vector<Range> out;
        uint32_t next = 0;
        for (Range r : ranges) {
            if (r.lo > next) out.push_back({next, r.lo - 1});
            next = std::max(next, r.hi + 1);
        }
        if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
        ranges = out;
    }
    std::string cls;
    std::vector<std::string> escaped;
    for (Range r : ranges) {
        // the raw-able part goes into one class; '"', '\\' and controls become their escapes
        for (uint32_t special : {uint32_t('"'), uint32_t('\\')})
            if (r.lo <= special && special <= r.hi) escaped.push_back(literal_char(special));
        for (uint32_t c = r.lo; c <= std::min<uint32_t>(r.hi, 0x1F); c++)
            if (c == '\n' || c == '\t' || c == '\r') escaped.push_back(literal_char(c));
        auto add = [&](uint32_t a, uint32_t b) {
            if (a > b) return;
            cls += class_char(a);
            if (b > a) cls += "-" + class_char(b);
        };
        uint32_t lo = std::max<uint32_t>(r.lo, 0x20);
        // split around the characters JSON must escape and the surrogates
        std::vector<Range> pieces = {{lo, r.hi}};
        for (uint32_t hole_lo : {uint32_t('"'), uint32_t('\\'), uint32_t(0x7F), uint32_t(0xD800)}) {
            uint32_t hole_hi = hole_lo == 0xD800 ? 0xDFFF : hole_lo;
            std::vector<Range> next;
            for (Range p : pieces) {
                if (p.lo > p.hi) continue;
                if (hole_hi < p.lo || hole_lo > p.hi) { next.push_back(p); continue; }
                if (p.lo < hole_lo) next.push_back({p.lo, hole_lo - 1});
                if (p.hi > hole_hi) next.push_back({hole_hi + 1, p.hi});
            }
            pieces = next;
        }
        for (Range p : pieces) add(p.lo, p.hi);
    }
    std::vector<std::string> alts;
    if (!cls.empty()) alts.push_back("[" + cls + "]");
    for (auto& e : escaped) alts.push_back(e);
    if (alts.empty()) throw GrammarError("[json_schema] 'pattern' has a character class that matches nothing");
    if (alts.size() == 1) return alts[0];
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); i++) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

const std::vector<Range> DIGIT = {{'0', '9'}}, WORD = {{'0', '9'}, {'A', 'Z'}, {'a', 'z'}, {'_', '_'}},
                         SPACE = {{' ', ' '}, {'\t', '\r'}};

class PatternParser {
public:
    PatternParser(std::string_view p) : p_(p) {}

    std::string parse() {
        bool start = false, end = false;
        if (!p_.empty() && p_.front() == '^') start = true, pos_ = 1;
        if (p_.size() > pos_ && p_.back() == '$' && (p_.size() < 2 || p_[p_.size() - 2] != '\\')) end = true, p_.remove_suffix(1);
        std::string body = alternatives();
        if (pos_ != p_.size()) throw error("unexpected ')'");
        const std::string any = set_expr({}, true) + "*";
        return (start ? "" : any + " ") + "(" + body + ")" + (end ? "" : " " + any);
    }

private:
    GrammarError error(const std::string& what) const {
        return GrammarError("[json_schema] 'pattern' " + std::string(p_) + " at " + std::to_string(pos_) + ": " + what);
    }
    bool more() const { return pos_ < p_.size(); }

    std::string alternatives() {
        std::string out = sequence();
        while (more() && p_[pos_] == '|') {
            pos_++;
            out += " | " + sequence();
        }
        return out;
    }

    std::string sequence() {
        std::string out;
        while (more() && p_[pos_] != '|' && p_[pos_] != ')') {
            std::string a = atom();
            a = quantified(a);
            out += (out.empty() ? "" : " ") + a;
        }
        return out.empty() ? "\"\"" : out;
    }

    std::string quantified(const std::string& a) {
        if (!more()) return a;
        char c = p_[pos_];
        std::string q;
        if (c == '*' || c == '+' || c == '?') q = std::string(1, c), pos_++;
        else if (c == '{') {
            size_t close = p_.find('}', pos_);
            if (close == std::string_view::npos) throw error("unterminated {m,n}");
            q = std::string(p_.substr(pos_, close - pos_ + 1));
            // {m}, {m,} or {m,n} with m <= n <= 100000: what the GBNF parser takes (found by fuzz_grammar)
            const std::string inner = q.substr(1, q.size() - 2);
            const size_t comma = inner.find(',');
            const std::string lo = inner.substr(0, comma), hi = comma == std::string::npos ? lo : inner.substr(comma + 1);
            auto count = [&](const std::string& digits) {
                if (digits.empty() || digits.size() > 6 || !std::all_of(digits.begin(), digits.end(), [](char d) { return std::isdigit(static_cast<unsigned char>(d)); }))
                    throw error("bad repetition " + q);
                return std::stoul(digits);
            };
            if (count(lo) > 100000 || (!hi.empty() && (count(hi) > 100000 || count(hi) < count(lo))) || hi.find(',') != std::string::npos)
                throw error("bad repetition " + q + " (needs m <= n <= 100000)");
            pos_ = close + 1;
        } else return a;
        if (more() && (p_[pos_] == '?' || p_[pos_] == '+')) pos_++;  // lazy / possessive: the same language
        return "(" + a + ")" + q;
    }

    uint32_t utf8_char() {
        unsigned char c = static_cast<unsigned char>(p_[pos_]);
        int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : 3;
        uint32_t v = n == 0 ? c : n == 1 ? c & 0x1F : n == 2 ? c & 0x0F : c & 0x07;
        pos_++;
        for (int i = 0; i < n && more(); i++) v = (v << 6) | (static_cast<unsigned char>(p_[pos_++]) & 0x3F);
        return v;
    }

    // An escape after '\': a class (\d \w \s and negations) or one character.
    bool escape(std::vector<Range>& ranges, bool& negated_class, uint32_t& single) {
        if (!more()) throw error("pattern ends with '\\'");
        char e = p_[pos_++];
        switch (e) {
            case 'd': ranges = DIGIT; return true;
            case 'w': ranges = WORD; return true;
            case 's': ranges = SPACE; return true;
            case 'D': ranges = DIGIT, negated_class = true; return true;
            case 'W': ranges = WORD, negated_class = true; return true;
            case 'S': ranges = SPACE, negated_class = true; return true;
            case 'n': single = '\n'; return false;
            case 't': single = '\t'; return false;
            case 'r': single = '\r'; return false;
            case 'u': {
                if (pos_ + 4 > p_.size() ||
                    !std::all_of(p_.begin() + pos_, p_.begin() + pos_ + 4, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); }))
                    throw error("\\u needs 4 hex digits");
                single = uint32_t(std::stoul(std::string(p_.substr(pos_, 4)), nullptr, 16));
                pos_ += 4;
                return false;
            }
            case 'b': case 'B': case 'A': case 'z': case 'Z': case 'k': case 'p': case 'P': case '1': case '2':
                throw error(std::string("'\\") + e + "' is not supported (anchors, back-references, properties)");
            default: single = uint32_t(static_cast<unsigned char>(e)); return false;
        }
    }

    std::string atom() {
        char c = p_[pos_];
        if (c == '(') {
            pos_++;
            if (p_.substr(pos_, 2) == "?:") pos_ += 2;
            else if (more() && p_[pos_] == '?') throw error("lookarounds and named groups are not supported");
            std::string inner = alternatives();
            if (!more() || p_[pos_] != ')') throw error("missing ')'");
            pos_++;
            return "(" + inner + ")";
        }
        if (c == '[') return char_class();
        if (c == '.') {
            pos_++;
            return set_expr({{'\n', '\n'}}, true);
        }
        if (c == '^' || c == '$') throw error("anchors are only supported at the start and end");
        if (c == '*' || c == '+' || c == '?' || c == '{') throw error(std::string("'") + c + "' with nothing to repeat");
        if (c == '\\') {
            pos_++;
            std::vector<Range> ranges;
            bool negated = false;
            uint32_t single = 0;
            if (escape(ranges, negated, single)) return set_expr(ranges, negated);
            return literal_char(single);
        }
        return literal_char(utf8_char());
    }

    std::string char_class() {
        pos_++;
        bool negated = more() && p_[pos_] == '^';
        if (negated) pos_++;
        std::vector<Range> ranges;
        bool first = true;
        while (more() && (p_[pos_] != ']' || first)) {
            first = false;
            uint32_t lo;
            if (p_[pos_] == '\\') {
                pos_++;
                std::vector<Range> cls;
                bool neg = false;
                if (escape(cls, neg, lo)) {
                    if (neg) throw error("negated escapes inside a class are not supported");
                    ranges.insert(ranges.end(), cls.begin(), cls.end());
                    continue;
                }
            } else lo = utf8_char();
            uint32_t hi = lo;
            if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
                pos_++;
                if (p_[pos_] == '\\') {
                    pos_++;
                    std::vector<Range> cls;
                    bool neg = false;
                    if (escape(cls, neg, hi)) throw error("a class escape cannot end a range");
                } else hi = utf8_char();
                if (hi < lo) throw error("range with its end below its start");
            }
            ranges.push_back({lo, hi});
        }
        if (!more()) throw error("unterminated '['");
        pos_++;
        return set_expr(ranges, negated);
    }

    std::string_view p_;
    size_t pos_ = 0;
};

}  // namespace

std::string pattern_expr(std::string_view pattern) { return PatternParser(pattern).parse(); }

std::string json_char_expr() { return set_expr({}, true); }

}  // namespace llm::schema
