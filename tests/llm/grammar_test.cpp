// The grammar engine: GBNF parsing and its errors, the matcher (repetition bounds, negated classes,
// UTF-8 characters split across tokens, token references), the token mask against a brute-force
// check of every token, and lazy triggers.
#include "llm/grammar.h"

#include <catch2/catch.hpp>

#include <map>
#include <random>

namespace {

// A vocabulary of pieces given as strings; ids 0 and 1 are the special <s> and </s> (the end).
class PieceTokenizer : public tok::Tokenizer {
public:
    explicit PieceTokenizer(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {
        pieces_.insert(pieces_.begin(), {"<s>", "</s>", "<tool>"});
    }
    std::vector<int32_t> encode(std::string_view text, bool, bool) const override {
        for (size_t i = 0; i < pieces_.size(); i++)
            if (pieces_[i] == text) return {int32_t(i)};
        return {0, 0};
    }
    std::string piece(int32_t id) const override { return pieces_[size_t(id)]; }
    std::string token_text(int32_t id, bool) const override { return pieces_[size_t(id)]; }
    int32_t n_vocab() const override { return int32_t(pieces_.size()); }
    int32_t bos() const override { return 0; }
    int32_t eos() const override { return 1; }
    bool add_bos() const override { return false; }
    bool is_end(int32_t id) const override { return id == 1; }
    bool is_special(int32_t id) const override { return id < 3; }
    bool is_control(int32_t id) const override { return id < 3; }

private:
    std::vector<std::string> pieces_;
};

// Every byte as its own piece, plus some multi-byte pieces.
std::vector<std::string> byte_pieces() {
    std::vector<std::string> p;
    for (int b = 1; b < 256; b++) p.push_back(std::string(1, char(b)));
    for (const char* s : {"ab", "abc", "true", "\"a", "a\"", "12", "1.5", "é", "\xC3", "\xA9", "\xE2\x82", "\xAC", "€x", "{\"", "\":"})
        p.push_back(s);
    return p;
}

bool matches(const std::string& gbnf, const std::string& text) {
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    llm::GrammarMatcher m(llm::parse_gbnf(gbnf), vocab);
    return m.accept_text(text) && m.can_end();
}

std::string parse_error(const std::string& gbnf) {
    try {
        llm::parse_gbnf(gbnf);
    } catch (const llm::GrammarError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("gbnf: literals, alternatives, groups and comments") {
    const std::string g = "# a comment\nroot ::= \"a\" (\"b\" | \"c\") tail  # trailing\ntail ::= \"!\" |\n";
    CHECK(matches(g, "ab!"));
    CHECK(matches(g, "ac"));
    CHECK_FALSE(matches(g, "ad"));
    CHECK_FALSE(matches(g, "a"));
}

TEST_CASE("gbnf: repetition bounds") {
    const std::string g = "root ::= [0-9]{2,4} \"x\"*  \"y\"+ \"z\"?";
    CHECK_FALSE(matches(g, "1y"));
    CHECK(matches(g, "12y"));
    CHECK(matches(g, "1234xxxyyz"));
    CHECK_FALSE(matches(g, "12345y"));
    CHECK_FALSE(matches(g, "12x"));
    CHECK(matches("root ::= \"a\"{3}", "aaa"));
    CHECK_FALSE(matches("root ::= \"a\"{3}", "aa"));
    CHECK(matches("root ::= (\"ab\"){2,}", "ababab"));
    CHECK_FALSE(matches("root ::= (\"ab\"){2,}", "ab"));
}

TEST_CASE("gbnf: negated classes, ranges, escapes and any character") {
    const std::string g = R"(root ::= [^"\\a-c]+ "\x21" [\u00e9] . "\n")";
    CHECK(matches(g, "xyz!é\xE2\x82\xAC\n"));
    CHECK_FALSE(matches(g, "xaz!é.\n"));
    CHECK_FALSE(matches(g, "x\"z!é.\n"));
    CHECK_FALSE(matches(g, "xz!e.\n"));
}

TEST_CASE("gbnf: errors name the line, column and rule") {
    CHECK(parse_error("root ::= foo").find("undefined rule 'foo'") != std::string::npos);
    CHECK(parse_error("root ::= \"a\"\nbad ::= [a-").find("line 2") != std::string::npos);
    CHECK(parse_error("root ::= \"abc").find("unterminated string") != std::string::npos);
    CHECK(parse_error("start ::= \"a\"").find("no 'root' rule") != std::string::npos);
    CHECK(parse_error("root ::= root \"a\" | \"b\"").find("left-recursive") != std::string::npos);
    CHECK(parse_error("root ::= \"a\" x\nx ::= \"b\"*\nx ::= \"c\"").find("defined twice") != std::string::npos);
    CHECK(parse_error("root ::= [z-a]").find("column") != std::string::npos);
    CHECK(parse_error("root ::= \"a\"{5,2}").find("m > n") != std::string::npos);
    CHECK(parse_error("root ::= * \"a\"").find("nothing before it") != std::string::npos);
    CHECK(parse_error("root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')')).find("nested deeper") != std::string::npos);
    CHECK(parse_error("root ::= \"a\"{0,90000}").find("rules") != std::string::npos);
}

TEST_CASE("grammar matcher: a UTF-8 character split across two tokens") {
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    llm::GrammarMatcher m(llm::parse_gbnf("root ::= \"é€\""), vocab);
    auto id = [&](const std::string& s) { return tk.encode(s, false, true)[0]; };
    CHECK_FALSE(m.accept_token(id("\xA9")));  // a continuation byte cannot start
    REQUIRE(m.accept_token(id("\xC3")));      // the first half of é
    CHECK_FALSE(m.can_end());
    CHECK_FALSE(m.accept_token(id("a")));
    REQUIRE(m.accept_token(id("\xA9")));
    REQUIRE(m.accept_token(id("\xE2\x82")));  // two of €'s three bytes
    REQUIRE(m.accept_token(id("\xAC")));
    CHECK(m.can_end());
    CHECK(m.finished());
}

TEST_CASE("grammar mask equals a brute-force check of every token") {
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    const std::string g = R"(root ::= "{\"" [a-c]+ "\":" ("true" | [0-9]+ ("." [0-9])?) "é"? "}")";
    auto grammar = llm::parse_gbnf(g);
    llm::GrammarMatcher m(grammar, vocab);
    const std::string path = "{\"abc\":1.5é}";
    std::vector<int32_t> ids;
    for (size_t i = 0; i < path.size(); i++) ids.push_back(tk.encode(path.substr(i, 1), false, true)[0]);
    for (size_t step = 0; step <= ids.size(); step++) {
        const std::vector<uint64_t>& mask = m.allowed();
        for (int32_t t = 0; t < tk.n_vocab(); t++) {
            llm::GrammarMatcher probe(grammar, vocab);
            bool ok = true;
            for (size_t j = 0; j < step && ok; j++) ok = probe.accept_token(ids[j]);
            REQUIRE(ok);
            const bool allows = probe.allows(t);  // the one-token check, without a mask
            bool accepts = probe.accept_token(t);
            CHECK(allows == accepts);
            bool masked = (mask[size_t(t) >> 6] >> (t & 63)) & 1;
            INFO("step " << step << " token " << t << " '" << tk.piece(t) << "'");
            CHECK(accepts == masked);
        }
        if (step < ids.size()) REQUIRE(m.accept_token(ids[step]));
    }
    CHECK(m.finished());
}

TEST_CASE("grammar: special tokens only where the grammar names them; the end only where it may end") {
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    llm::GrammarMatcher plain(llm::parse_gbnf("root ::= \"a\"+"), vocab);
    auto bit = [](const std::vector<uint64_t>& mask, int32_t t) { return (mask[size_t(t) >> 6] >> (t & 63)) & 1; };
    CHECK_FALSE(bit(plain.allowed(), 1));  // </s> before any "a"
    CHECK_FALSE(bit(plain.allowed(), 2));  // <tool> is special
    REQUIRE(plain.accept_token(tk.encode("a", false, true)[0]));
    CHECK(bit(plain.allowed(), 1));
    llm::GrammarMatcher named(llm::parse_gbnf("root ::= <tool> \"a\""), vocab);
    CHECK(bit(named.allowed(), 2));
    CHECK_FALSE(bit(named.allowed(), tk.encode("a", false, true)[0]));
    REQUIRE(named.accept_token(2));
    CHECK(named.accept_token(tk.encode("a", false, true)[0]));
    CHECK_THROWS_WITH(llm::GrammarMatcher(llm::parse_gbnf("root ::= <nope>"), vocab), Catch::Contains("not one token"));
}

TEST_CASE("grammar constraint: lazy until a trigger word, then constrained") {
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    llm::GrammarSpec spec;
    spec.grammar = llm::parse_gbnf("root ::= \"<call>\" [0-9]+ \"</call>\"");
    spec.trigger_words = {"<call>"};
    llm::GrammarConstraint c(spec, vocab);
    auto id = [&](const std::string& s) { return tk.encode(s, false, true)[0]; };
    std::vector<float> logits(size_t(tk.n_vocab()), 0.0f);
    for (const char* s : {"h", "i", " ", "<", "c", "a", "l"}) REQUIRE(c.accept(id(s)));
    CHECK_FALSE(c.active());
    CHECK(c.apply(logits));
    CHECK(logits[size_t(id("x"))] == 0.0f);  // not constrained yet
    REQUIRE(c.accept(id("l")));
    REQUIRE(c.accept(id(">")));
    CHECK(c.active());
    REQUIRE(c.apply(logits));
    CHECK(logits[size_t(id("x"))] < -1e30f);
    CHECK(logits[size_t(id("7"))] == 0.0f);
}

TEST_CASE("grammar matcher: overlong forms and surrogates are not characters, even split across tokens") {
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    auto grammar = llm::parse_gbnf("root ::= [^a]+");
    for (std::string bad : {"\xC0\x80", "\xE0\x82\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80"}) {
        llm::GrammarMatcher m(grammar, vocab);
        bool ok = true;
        for (char c : bad) ok = ok && m.accept_token(tk.encode(std::string(1, c), false, true)[0]);
        CHECK_FALSE(ok);
    }
    llm::GrammarMatcher good(grammar, vocab);
    CHECK(good.accept_text("\xF0\x9F\x98\x80\xE2\x82\xAC"));  // 😀€
}

TEST_CASE("json schema: extra keys beside declared ones never repeat a declared key") {
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    auto schema = nlohmann::ordered_json::parse(R"({"type":"object","properties":{"a":{"type":"boolean"},"ab":{"type":"boolean"}},
        "additionalProperties":{"enum":[1,2]}})");
    auto grammar = llm::parse_gbnf(llm::json_schema_to_gbnf(schema));
    auto accepts = [&](const std::string& text) {
        llm::GrammarMatcher m(grammar, vocab);
        return m.accept_text(text) && m.can_end();
    };
    CHECK(accepts(R"({"a":true,"ab":false,"b":1,"abc":2,"":1})"));
    CHECK(accepts(R"({"x":2})"));
    CHECK_FALSE(accepts(R"({"a":true,"a":1})"));
    CHECK_FALSE(accepts(R"({"ab":1})"));
    CHECK_FALSE(accepts(R"({"a":true,"c":3})"));
}

TEST_CASE("json schema: integer bounds, formats and unsupported keywords") {
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    auto accepts = [&](const char* schema, const std::string& text) {
        llm::GrammarMatcher m(llm::parse_gbnf(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(schema))), vocab);
        return m.accept_text(text) && m.can_end();
    };
    const char* range = R"({"type":"integer","minimum":-40,"maximum":125})";
    for (int v = -60; v <= 140; v++) CHECK(accepts(range, std::to_string(v)) == (v >= -40 && v <= 125));
    CHECK_FALSE(accepts(range, "-0"));
    CHECK_FALSE(accepts(range, "007"));
    const char* open = R"({"type":"integer","minimum":7})";  // up to 15 digits, in a grammar of linear size
    CHECK(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(open)).size() < 20000);
    CHECK(accepts(open, "123456789012345"));
    CHECK_FALSE(accepts(open, "6"));
    CHECK(accepts(R"({"type":"integer","exclusiveMinimum":99,"exclusiveMaximum":1000})", "100"));
    CHECK_FALSE(accepts(R"({"type":"integer","exclusiveMinimum":99,"exclusiveMaximum":1000})", "1000"));
    CHECK(accepts(R"({"type":"string","format":"date"})", "\"2024-02-28\""));
    CHECK_FALSE(accepts(R"({"type":"string","format":"date"})", "\"2024-02-30\""));
    CHECK(accepts(R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$"})", "\"AB-12\""));
    CHECK_FALSE(accepts(R"({"type":"string","pattern":"^[A-Z]{2}-\\d+$"})", "\"AB-\""));
    CHECK_THROWS_WITH(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"type":"array","uniqueItems":true})")),
                      Catch::Contains("'uniqueItems'"));
    CHECK_THROWS_WITH(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"type":"number","minimum":1})")),
                      Catch::Contains("'minimum'"));
    CHECK_THROWS_WITH(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"$ref":"#/$defs/none"})")),
                      Catch::Contains("points at nothing"));
    // A list of types: each alternative takes the keywords of its own type, as JSON Schema applies them.
    const char* optional = R"({"type":["string","null"],"minLength":2,"maxLength":3})";
    CHECK(accepts(optional, "null"));
    CHECK(accepts(optional, "\"ab\""));
    CHECK_FALSE(accepts(optional, "\"a\""));
    CHECK_FALSE(accepts(optional, "\"abcd\""));
    const char* either = R"({"type":["integer","array"],"minimum":5,"maxItems":1})";
    CHECK(accepts(either, "5"));
    CHECK_FALSE(accepts(either, "4"));
    CHECK(accepts(either, "[4]"));
    CHECK_FALSE(accepts(either, "[4,4]"));
    CHECK_THROWS_WITH(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"type":["integer","null"],"minLength":1})")),
                      Catch::Contains("'minLength'"));
}

// fuzz_grammar found a pattern repetition {2,1} copied into GBNF that the GBNF parser then refused: the
// schema converter must refuse it itself, naming the pattern, and write only GBNF that parses.
TEST_CASE("json_schema: a pattern repetition GBNF cannot take is refused by the converter") {
    for (const char* rep : {"{2,1}", "{,3}", "{1,2,3}", "{100001}", "{}"}) {
        const auto schema = nlohmann::ordered_json{{"type", "string"}, {"pattern", std::string("^[^a-z\"\\\\]") + rep + "$"}};
        INFO(rep);
        CHECK_THROWS_AS(llm::json_schema_to_gbnf(schema), llm::GrammarError);
    }
    for (const char* rep : {"{2}", "{2,}", "{1,3}", "{0,1000}"}) {
        const auto schema = nlohmann::ordered_json{{"type", "string"}, {"pattern", std::string("^a") + rep + "$"}};
        INFO(rep);
        CHECK_NOTHROW(llm::parse_gbnf(llm::json_schema_to_gbnf(schema)));
    }
}

TEST_CASE("json_schema: a type list with a non-string entry is a GrammarError naming 'type' (found by fuzz_grammar)") {
    for (const char* text : {R"({"type":[3]})", R"({"type":["string",null]})", R"({"type":[{"type":"string"}]})"}) {
        INFO(text);
        CHECK_THROWS_WITH(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(text)), Catch::Contains("'type' must be a string"));
    }
}

// Found by fuzz_grammar: empty alternatives under a repetition reach the same stack along 2^27 paths;
// without the matcher's memo this never finished.
TEST_CASE("grammar matcher: empty alternatives under a repetition stay polynomial") {
    const std::string gbnf = R"(root ::= (("a" | | "d")?){6,27})";
    CHECK(matches(gbnf, ""));
    CHECK(matches(gbnf, "adaadddaad"));
    CHECK(matches(gbnf, std::string(27, 'a')));
    CHECK_FALSE(matches(gbnf, std::string(28, 'a')));
    CHECK_FALSE(matches(gbnf, "ab"));
}

TEST_CASE("grammar matcher: a letter that many repetitions can take keeps one copy of each stack (found by fuzz_grammar)") {
    // The letter may go to any of 64 words (the commas and words before it may be empty): hundreds of stacks,
    // deduplicated through a hash set past 64 of them.
    const std::string gbnf = "root ::= word (\",\"* word){63}\nword ::= [a-z]{0,4}";
    CHECK(matches(gbnf, "abtype,c"));
    CHECK_FALSE(matches(gbnf, "ab-c"));
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    auto grammar = llm::parse_gbnf(gbnf);
    llm::GrammarMatcher m(grammar, vocab);
    const std::string path = "ab,c";
    llm::GrammarMatcher probe(grammar, vocab);  // the one-token check, without a mask
    for (size_t step = 0; step <= path.size(); step++) {
        const std::vector<uint64_t> mask = m.allowed();
        for (int32_t t = 0; t < tk.n_vocab(); t++) {
            INFO("step " << step << " token " << t << " '" << tk.piece(t) << "'");
            CHECK(probe.allows(t) == bool((mask[size_t(t) >> 6] >> (t & 63)) & 1));
        }
        if (step < path.size()) REQUIRE((m.accept_text(path.substr(step, 1)) && probe.accept_text(path.substr(step, 1))));
    }
}

TEST_CASE("grammar matcher: a char that may start any of 230 optional slots costs linear work per mask (found by fuzz_grammar)") {
    const std::string gbnf = R"(root ::= ((.|."....a " "b")?){230} "*")";
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    llm::GrammarMatcher m(llm::parse_gbnf(gbnf), vocab);
    const std::string text = "\x01{\":[#\"consc\t\":\"head0} \"*";
    for (char c : text) {
        m.allowed();
        REQUIRE(m.accept_text(std::string(1, c)));
    }
    CHECK(m.can_end());

    // Over a large vocabulary every token prefix is such a byte: the mask gives up at its work budget,
    // well under a second, instead of never ending.
    std::vector<std::string> pieces = byte_pieces();
    std::mt19937 rng(7);
    for (int i = 0; i < 20000; i++) {
        std::string piece;
        for (int k = 0; k < 6; k++) piece += char('a' + rng() % 26);
        pieces.push_back(piece);
    }
    PieceTokenizer big(pieces);
    llm::GrammarVocab big_vocab(big);
    llm::GrammarMatcher stalled(llm::parse_gbnf(gbnf), big_vocab);
    CHECK_THROWS_WITH(stalled.allowed(), Catch::Contains("too ambiguous"));
}

TEST_CASE("json_schema: a \\u escape without 4 hex digits in a pattern is a GrammarError (found by fuzz_grammar)") {
    for (const char* pattern : {"^\\uzzzz$", "^\\u12g4$", "^\\u-123$"}) {
        INFO(pattern);
        CHECK_THROWS_WITH(llm::json_schema_to_gbnf(nlohmann::ordered_json{{"type", "string"}, {"pattern", pattern}}),
                          Catch::Contains("4 hex digits"));
    }
    CHECK_NOTHROW(llm::parse_gbnf(llm::json_schema_to_gbnf(nlohmann::ordered_json{{"type", "string"}, {"pattern", "^\\u00e9$"}})));
}

TEST_CASE("grammar budget: too many parse stacks or a long run of empty rules is a GrammarError, not a crash or a stall") {
    // 100 x 900 optional words in a row: expanding the start passed 90,000 nested rules and overflowed
    // the thread's stack (SIGSEGV in `tinyllm run --grammar`).
    CHECK_THROWS_WITH(llm::parse_gbnf("root ::= (word (\",\"* word){900}){100}\nword ::= [a-z]?"),
                      Catch::Contains("rules that can match nothing in a row"));
    // 1100 alternatives that all begin alike: 1100 stacks at the start.
    std::string many = "(";
    for (int i = 0; i < 1100; i++) many += (i ? " | \"a" : "\"a") + std::to_string(i) + "\"";
    many += ")";
    CHECK_THROWS_WITH(llm::parse_gbnf("root ::= " + many), Catch::Contains("parse stacks at once"));
    // A state past the budget later on throws from the matcher.
    PieceTokenizer tk(byte_pieces());
    llm::GrammarVocab vocab(tk);
    llm::GrammarMatcher m(llm::parse_gbnf("root ::= \"y\" | \"x\" " + many), vocab);
    CHECK_THROWS_WITH(m.accept_text("x"), Catch::Contains("parse stacks at once"));
    // What real grammars need stays well inside: 256 tools behind one opener (the server's tools limit).
    std::string calls = "root ::= \"<call>{\\\"name\\\": \\\"\" (";
    for (int i = 0; i < 256; i++) calls += (i ? " | " : "") + std::string("\"tool_") + std::to_string(i) + "\\\", \\\"arguments\\\": {}}\"";
    calls += ")";
    CHECK(matches(calls, "<call>{\"name\": \"tool_17\", \"arguments\": {}}"));
}

// Found by fuzz_grammar: a schema whose $ref (directly, or through anyOf/allOf) comes back to itself
// before any character is read wrote a left-recursive GBNF that the GBNF parser refused, or recursed
// without end. The converter refuses such a schema itself, naming the $ref; recursion under an object
// or an array (a tree) stays fine.
TEST_CASE("json_schema: a $ref that reaches itself before reading a character is refused (found by fuzz_grammar)") {
    for (const char* text : {
             R"({"$defs":{"n":{"type":"integer"}},"$ref":"#"})",
             R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})",
             R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
             // x reaches y under an array first (memoized there), then directly
             R"({"$defs":{"x":{"anyOf":[{"type":"array","items":{"$ref":"#/$defs/y"}},{"$ref":"#/$defs/y"}]},
                 "y":{"anyOf":[{"$ref":"#/$defs/x"},{"type":"null"}]}},"$ref":"#/$defs/x"})",
             R"({"allOf":[{"$ref":"#"}]})",
             R"({"type":"object","allOf":[{"$ref":"#/$defs/o"}],"$defs":{"o":{"allOf":[{"$ref":"#"}]}}})",
         }) {
        INFO(text);
        CHECK_THROWS_AS(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(text)), llm::GrammarError);
    }
    CHECK_THROWS_WITH(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})")),
                      Catch::Contains("'$ref' #") && Catch::Contains("before"));
    CHECK_THROWS_AS(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(R"({"type":"object","allOf":[{"$ref":5}]})")), llm::GrammarError);
    // a tree: recursion under an array and under an object
    const char* tree = R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
        "kids":{"type":"array","items":{"$ref":"#/$defs/node"}},"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},
        "required":["v"]}},"$ref":"#/$defs/node"})";
    CHECK(matches(llm::json_schema_to_gbnf(nlohmann::ordered_json::parse(tree)), R"({"v":1,"kids":[{"v":2,"kids":[]}],"next":{"v":3}})"));
}
