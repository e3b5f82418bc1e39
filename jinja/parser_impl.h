// The Jinja parser (internal to jinja/): tokens -> syntax tree, following Jinja 3.1's grammar and operator
// precedence (jinja2/parser.py). Statements are parsed in parser.cpp, expressions in
// parser_expr.cpp.
#pragma once

#include "jinja/ast_impl.h"
#include "jinja/lexer_impl.h"

#include <algorithm>

namespace jinja {

// Deeper syntax trees are refused: rendering and freeing them recurse once per level.
constexpr int MAX_NESTING = 500;

class Parser {
public:
    explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

    std::shared_ptr<const Program> run() {
        auto program = std::make_shared<Program>();
        program_ = program.get();
        program->slot_loop = slot("loop");
        program->slot_caller = slot("caller");
        program->slot_varargs = slot("varargs");
        program->slot_kwargs = slot("kwargs");
        program->body = subparse({});
        if (cur().type != TokenType::END) fail_here("unexpected '" + describe(cur()) + "'");
        return program;
    }

private:
    std::vector<Token> tokens_;
    size_t pos_ = 0;
    Program* program_ = nullptr;
    std::vector<MacroDef*> macros_;  // macros being parsed, innermost last
    int nesting_ = 0;

    struct Nest {  // guards recursion depth
        Parser& p;
        explicit Nest(Parser& parser) : p(parser) {
            if (++p.nesting_ > MAX_NESTING) p.fail_here("template nested too deeply");
        }
        ~Nest() { p.nesting_--; }
    };
    // A loop that wraps the node built so far (a + b + c ...) deepens the tree once per turn.
    struct Chain {
        Parser& p;
        int n = 0;
        explicit Chain(Parser& parser) : p(parser) {}
        void add() {
            n++;
            if (++p.nesting_ > MAX_NESTING) p.fail_here("template nested too deeply");
        }
        ~Chain() { p.nesting_ -= n; }
    };

    const Token& cur() const { return tokens_[pos_]; }
    const Token& peek(size_t k = 1) const { return tokens_[std::min(pos_ + k, tokens_.size() - 1)]; }
    const Token& next() {
        const Token& t = tokens_[pos_];
        if (pos_ + 1 < tokens_.size()) pos_++;
        return t;
    }
    int line() const { return cur().line; }

    static std::string describe(const Token& t) {
        switch (t.type) {
        case TokenType::TEXT: return "template data";
        case TokenType::VARIABLE_BEGIN: return "begin of print statement";
        case TokenType::VARIABLE_END: return "end of print statement";
        case TokenType::BLOCK_BEGIN: return "begin of statement block";
        case TokenType::BLOCK_END: return "end of statement block";
        case TokenType::END: return "end of template";
        default: return t.text;
        }
    }
    [[noreturn]] void fail_here(const std::string& msg) const { throw Error(ErrorKind::SYNTAX, msg, line()); }

    bool is_op(std::string_view op) const { return cur().type == TokenType::OPERATOR && cur().text == op; }
    bool is_name(std::string_view name) const { return cur().type == TokenType::NAME && cur().text == name; }
    bool skip_op(std::string_view op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(std::string_view name) {
        if (!is_name(name)) return false;
        next();
        return true;
    }
    void expect_op(std::string_view op) {
        if (!skip_op(op)) fail_here("expected '" + std::string(op) + "', got '" + describe(cur()) + "'");
    }
    std::string expect_name() {
        if (cur().type != TokenType::NAME) fail_here("expected name, got '" + describe(cur()) + "'");
        return next().text;
    }
    void expect(TokenType type) {
        if (cur().type != type) fail_here("expected '" + describe(Token{type, ""}) + "', got '" + describe(cur()) + "'");
        next();
    }

    int slot(const std::string& name) {
        auto [it, added] = program_->slots.emplace(name, static_cast<int>(program_->symbols.size()));
        if (added) program_->symbols.push_back(name);
        return it->second;
    }

    // ---- statements ----
    // Parses until a block tag named in `ends` (left unconsumed) or the end of the template.
    Body subparse(std::initializer_list<std::string_view> ends);
    // Ends the current tag, then parses its body up to one of `ends`.
    Body block_body(std::initializer_list<std::string_view> ends);
    void end_tag(std::string_view name);  // {% name %}
    void parse_statement(Body& body);
    StmtPtr parse_if(int l);
    StmtPtr parse_for(int l);
    StmtPtr parse_set(int l);
    // `| f | g` after a block set; `f | g` (start_inline) after {% filter %}.
    std::vector<std::unique_ptr<FilterExpr>> parse_filter_chain(bool start_inline);
    std::shared_ptr<MacroDef> parse_signature(std::string name, int l);
    // The body of a macro or call block, noting whether it reads caller/varargs/kwargs.
    void parse_macro_body(MacroDef& def, std::string_view end);
    StmtPtr parse_macro(int l);
    StmtPtr parse_call_block(int l);
    StmtPtr parse_filter_block(int l);
    StmtPtr parse_with(int l);
    // Assignment targets: `x`, `a, b`, `(a, b)`, and with_namespace `ns.attr`.
    Target parse_target(bool with_namespace, std::string_view end_name);

    // ---- expressions ----
    bool tuple_end(std::string_view extra_end) const;
    ExprPtr parse_tuple(bool with_condexpr, std::string_view extra_end = "", bool explicit_parens = false);
    ExprPtr parse_expression(bool with_condexpr);
    ExprPtr parse_or();
    ExprPtr parse_and();
    ExprPtr parse_not();
    ExprPtr parse_compare();
    ExprPtr parse_math1();
    ExprPtr parse_concat();
    ExprPtr parse_math2();
    ExprPtr parse_pow();
    ExprPtr parse_unary(bool with_filter);
    ExprPtr parse_primary();
    ExprPtr parse_postfix(ExprPtr node);
    ExprPtr parse_filter_expr(ExprPtr node);
    ExprPtr parse_subscript(ExprPtr object);
    // One subscript: an expression, or a slice (which takes the object over).
    ExprPtr parse_subscribed(ExprPtr& object, int l);
    Arguments parse_call_args();
    ExprPtr parse_call(ExprPtr callee);
    std::string dotted_name();
    std::unique_ptr<FilterExpr> parse_filter_call(ExprPtr operand);
    ExprPtr parse_test(ExprPtr operand);
};

}  // namespace jinja
