// The Jinja parser: tokens -> syntax tree, following Jinja 3.1's grammar and operator precedence
// (jinja2/parser.py): statements for/if/set/macro/call/filter/with/break/continue/raw/generation.
#include "llm/jinja_ast.h"
#include "llm/jinja_lexer.h"


namespace llm::jinja {

namespace {

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
    Body subparse(std::initializer_list<std::string_view> ends) {
        Nest nest(*this);
        Body body;
        while (cur().type != TokenType::END) {
            const Token& t = cur();
            if (t.type == TokenType::TEXT) {
                body.push_back(std::make_unique<TextStmt>(t.line, t.text));
                next();
            } else if (t.type == TokenType::VARIABLE_BEGIN) {
                next();
                int l = line();
                body.push_back(std::make_unique<OutputStmt>(l, parse_tuple(true)));
                expect(TokenType::VARIABLE_END);
            } else if (t.type == TokenType::BLOCK_BEGIN) {
                const Token& tag = peek();
                for (std::string_view end : ends)
                    if (tag.type == TokenType::NAME && tag.text == end) return body;
                next();
                parse_statement(body);
            } else {
                fail_here("unexpected '" + describe(t) + "'");
            }
        }
        if (ends.size()) {
            std::string names;
            for (std::string_view e : ends) names += (names.empty() ? "'" : " or '") + std::string(e) + "'";
            fail_here("unexpected end of template, expected " + names);
        }
        return body;
    }

    // After `{%` and a body: the end tag `{% name %}`.
    Body block_body(std::initializer_list<std::string_view> ends) {
        expect(TokenType::BLOCK_END);
        return subparse(ends);
    }
    void end_tag(std::string_view name) {
        expect(TokenType::BLOCK_BEGIN);
        if (!skip_name(name)) fail_here("expected '" + std::string(name) + "'");
        expect(TokenType::BLOCK_END);
    }

    void parse_statement(Body& body) {
        if (cur().type != TokenType::NAME) fail_here("tag name expected");
        int l = line();
        std::string tag = next().text;
        if (tag == "if") body.push_back(parse_if(l));
        else if (tag == "for") body.push_back(parse_for(l));
        else if (tag == "set") body.push_back(parse_set(l));
        else if (tag == "macro") body.push_back(parse_macro(l));
        else if (tag == "call") body.push_back(parse_call_block(l));
        else if (tag == "filter") body.push_back(parse_filter_block(l));
        else if (tag == "with") body.push_back(parse_with(l));
        else if (tag == "break" || tag == "continue") {
            body.push_back(std::make_unique<Stmt>(tag == "break" ? StmtType::BREAK : StmtType::CONTINUE, l));
            expect(TokenType::BLOCK_END);
        } else if (tag == "generation") {  // transformers' AssistantTracker: renders its body
            Body inner = block_body({"endgeneration"});
            end_tag("endgeneration");
            for (auto& s : inner) body.push_back(std::move(s));
        } else if (tag == "print") {
            body.push_back(std::make_unique<OutputStmt>(l, parse_tuple(true)));
            expect(TokenType::BLOCK_END);
        } else {
            fail_here("Encountered unknown tag '" + tag + "'.");
        }
    }

    StmtPtr parse_if(int l) {
        auto node = std::make_unique<IfStmt>(l);
        while (true) {
            ExprPtr cond = parse_tuple(false);
            Body branch = block_body({"elif", "else", "endif"});
            node->branches.emplace_back(std::move(cond), std::move(branch));
            expect(TokenType::BLOCK_BEGIN);
            std::string tag = next().text;
            if (tag == "elif") continue;
            if (tag == "else") {
                node->otherwise = block_body({"endif"});
                end_tag("endif");
            } else {
                expect(TokenType::BLOCK_END);
            }
            return node;
        }
    }

    StmtPtr parse_for(int l) {
        auto node = std::make_unique<ForStmt>(l);
        node->target = parse_target(false, "in");
        if (!skip_name("in")) fail_here("expected 'in'");
        node->iterable = parse_tuple(false, "recursive");
        if (skip_name("if")) node->filter = parse_expression(true);
        node->recursive = skip_name("recursive");
        node->body = block_body({"endfor", "else"});
        expect(TokenType::BLOCK_BEGIN);
        if (next().text == "else") {
            node->otherwise = block_body({"endfor"});
            end_tag("endfor");
        } else {
            expect(TokenType::BLOCK_END);
        }
        return node;
    }

    StmtPtr parse_set(int l) {
        Target target = parse_target(true, "");
        if (skip_op("=")) {
            auto node = std::make_unique<SetStmt>(l);
            node->target = std::move(target);
            node->value = parse_tuple(true);
            expect(TokenType::BLOCK_END);
            return node;
        }
        auto node = std::make_unique<SetBlockStmt>(l);
        node->target = std::move(target);
        node->filters = parse_filter_chain(false);
        node->body = block_body({"endset"});
        end_tag("endset");
        return node;
    }

    // `| f | g` after a block set; `f | g` (start_inline) after {% filter %}.
    std::vector<std::unique_ptr<FilterExpr>> parse_filter_chain(bool start_inline) {
        std::vector<std::unique_ptr<FilterExpr>> filters;
        bool first = start_inline;
        while (first || skip_op("|")) {
            first = false;
            filters.push_back(parse_filter_call(nullptr));
        }
        return filters;
    }

    std::shared_ptr<MacroDef> parse_signature(std::string name, int l) {
        auto def = std::make_shared<MacroDef>();
        def->name = std::move(name);
        def->line = l;
        if (!is_op("(")) return def;
        next();
        while (!skip_op(")")) {
            if (!def->params.empty()) expect_op(",");
            def->params.push_back(slot(expect_name()));
            if (skip_op("=")) def->defaults.push_back(parse_expression(true));
            else if (!def->defaults.empty() && def->defaults.back()) fail_here("non-default argument follows default argument");
            else def->defaults.push_back(nullptr);
        }
        return def;
    }

    // The body of a macro or call block, noting whether it reads caller/varargs/kwargs.
    void parse_macro_body(MacroDef& def, std::string_view end) {
        macros_.push_back(&def);
        def.body = block_body({end});
        macros_.pop_back();
        end_tag(end);
    }

    StmtPtr parse_macro(int l) {
        auto node = std::make_unique<MacroStmt>(l);
        std::string name = expect_name();
        node->slot = slot(name);
        auto def = parse_signature(name, l);
        parse_macro_body(*def, "endmacro");
        node->def = std::move(def);
        return node;
    }

    StmtPtr parse_call_block(int l) {
        auto node = std::make_unique<CallBlockStmt>(l);
        auto def = parse_signature("caller", l);
        node->call = parse_expression(true);
        if (node->call->type != ExprType::CALL) fail_here("expected call");
        parse_macro_body(*def, "endcall");
        node->caller = std::move(def);
        return node;
    }

    StmtPtr parse_filter_block(int l) {
        auto node = std::make_unique<FilterBlockStmt>(l);
        node->filters = parse_filter_chain(true);
        node->body = block_body({"endfilter"});
        end_tag("endfilter");
        return node;
    }

    StmtPtr parse_with(int l) {
        auto node = std::make_unique<WithStmt>(l);
        while (cur().type != TokenType::BLOCK_END) {
            if (!node->assignments.empty()) expect_op(",");
            Target t = parse_target(false, "");
            expect_op("=");
            node->assignments.emplace_back(std::move(t), parse_expression(true));
        }
        node->body = block_body({"endwith"});
        end_tag("endwith");
        return node;
    }

    // Assignment targets: `x`, `a, b`, `(a, b)`, and with_namespace `ns.attr`.
    Target parse_target(bool with_namespace, std::string_view end_name) {
        Target target;
        if (with_namespace && cur().type == TokenType::NAME && peek().type == TokenType::OPERATOR && peek().text == ".") {
            target.kind = Target::ATTRIBUTE;
            target.slot = slot(next().text);
            next();
            target.attr = expect_name();
            return target;
        }
        bool parens = skip_op("(");
        std::vector<Target> items;
        while (true) {
            if (!items.empty() && !skip_op(",")) break;
            if (cur().type != TokenType::NAME || (!end_name.empty() && is_name(end_name))) break;
            Target item;
            item.slot = slot(next().text);
            items.push_back(std::move(item));
        }
        if (parens) expect_op(")");
        if (items.empty()) fail_here("can't assign to '" + describe(cur()) + "'");
        if (items.size() == 1 && !parens) return std::move(items[0]);
        target.kind = Target::TUPLE;
        target.items = std::move(items);
        return target;
    }

    // ---- expressions ----

    bool tuple_end(std::string_view extra_end) const {
        TokenType t = cur().type;
        return t == TokenType::VARIABLE_END || t == TokenType::BLOCK_END || is_op(")") || (!extra_end.empty() && is_name(extra_end));
    }

    ExprPtr parse_tuple(bool with_condexpr, std::string_view extra_end = "", bool explicit_parens = false) {
        int l = line();
        std::vector<ExprPtr> items;
        bool is_tuple = false;
        while (true) {
            if (!items.empty()) expect_op(",");
            if (tuple_end(extra_end)) break;
            items.push_back(parse_expression(with_condexpr));
            if (!is_op(",")) break;
            is_tuple = true;
        }
        if (!is_tuple) {
            if (!items.empty()) return std::move(items[0]);
            if (!explicit_parens) fail_here("Expected an expression, got '" + describe(cur()) + "'");
        }
        auto node = std::make_unique<ListExpr>(l);
        node->items = std::move(items);
        node->tuple = true;
        return node;
    }

    ExprPtr parse_expression(bool with_condexpr) {
        Nest nest(*this);
        if (!with_condexpr) return parse_or();
        int l = line();
        ExprPtr expr = parse_or();
        Chain chain(*this);
        while (skip_name("if")) {
            chain.add();
            auto node = std::make_unique<ConditionalExpr>(l);
            node->condition = parse_or();
            if (skip_name("else")) node->otherwise = parse_expression(true);
            node->then = std::move(expr);
            expr = std::move(node);
            l = line();
        }
        return expr;
    }

    ExprPtr parse_or() {
        ExprPtr left = parse_and();
        Chain chain(*this);
        while (is_name("or")) {
            chain.add();
            int l = next().line;
            left = std::make_unique<BinaryExpr>(l, Op::OR, std::move(left), parse_and());
        }
        return left;
    }
    ExprPtr parse_and() {
        ExprPtr left = parse_not();
        Chain chain(*this);
        while (is_name("and")) {
            chain.add();
            int l = next().line;
            left = std::make_unique<BinaryExpr>(l, Op::AND, std::move(left), parse_not());
        }
        return left;
    }
    ExprPtr parse_not() {
        if (is_name("not")) {
            Nest nest(*this);
            int l = next().line;
            return std::make_unique<UnaryExpr>(l, Op::NOT, parse_not());
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        int l = line();
        ExprPtr first = parse_math1();
        std::vector<std::pair<Op, ExprPtr>> rest;
        static const std::pair<const char*, Op> OPS[] = {{"==", Op::EQ}, {"!=", Op::NE}, {"<", Op::LT},
                                                          {"<=", Op::LE}, {">", Op::GT},  {">=", Op::GE}};
        while (true) {
            bool matched = false;
            for (const auto& [text, op] : OPS) {
                if (is_op(text)) {
                    next();
                    rest.emplace_back(op, parse_math1());
                    matched = true;
                    break;
                }
            }
            if (matched) continue;
            if (skip_name("in")) {
                rest.emplace_back(Op::IN, parse_math1());
            } else if (is_name("not") && peek().type == TokenType::NAME && peek().text == "in") {
                next(), next();
                rest.emplace_back(Op::NOT_IN, parse_math1());
            } else {
                break;
            }
        }
        if (rest.empty()) return first;
        auto node = std::make_unique<CompareExpr>(l);
        node->first = std::move(first);
        node->rest = std::move(rest);
        return node;
    }

    ExprPtr parse_math1() {
        ExprPtr left = parse_concat();
        Chain chain(*this);
        while (is_op("+") || is_op("-")) {
            chain.add();
            const Token& t = next();
            Op op = t.text == "+" ? Op::ADD : Op::SUB;
            left = std::make_unique<BinaryExpr>(t.line, op, std::move(left), parse_concat());
        }
        return left;
    }
    ExprPtr parse_concat() {
        int l = line();
        ExprPtr first = parse_math2();
        if (!is_op("~")) return first;
        auto node = std::make_unique<ConcatExpr>(l);
        node->parts.push_back(std::move(first));
        while (skip_op("~")) node->parts.push_back(parse_math2());
        return node;
    }
    ExprPtr parse_math2() {
        ExprPtr left = parse_pow();
        Chain chain(*this);
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            chain.add();
            const Token& t = next();
            Op op = t.text == "*" ? Op::MUL : t.text == "/" ? Op::DIV : t.text == "//" ? Op::FLOORDIV : Op::MOD;
            left = std::make_unique<BinaryExpr>(t.line, op, std::move(left), parse_pow());
        }
        return left;
    }
    ExprPtr parse_pow() {
        ExprPtr left = parse_unary(true);
        Chain chain(*this);
        while (is_op("**")) {
            chain.add();
            int l = next().line;
            left = std::make_unique<BinaryExpr>(l, Op::POW, std::move(left), parse_unary(true));
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        Nest nest(*this);
        int l = line();
        ExprPtr node;
        if (skip_op("-")) node = std::make_unique<UnaryExpr>(l, Op::NEG, parse_unary(false));
        else if (skip_op("+")) node = std::make_unique<UnaryExpr>(l, Op::POS, parse_unary(false));
        else node = parse_primary();
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filter_expr(std::move(node));
        return node;
    }

    ExprPtr parse_primary() {
        const Token& t = cur();
        int l = t.line;
        switch (t.type) {
        case TokenType::NAME: {
            std::string name = next().text;
            if (name == "true" || name == "True") return std::make_unique<ConstExpr>(l, Value::boolean(true));
            if (name == "false" || name == "False") return std::make_unique<ConstExpr>(l, Value::boolean(false));
            if (name == "none" || name == "None") return std::make_unique<ConstExpr>(l, Value::none());
            int s = slot(name);
            if (!macros_.empty()) {
                MacroDef* m = macros_.back();
                m->uses_caller |= name == "caller";
                m->uses_varargs |= name == "varargs";
                m->uses_kwargs |= name == "kwargs";
            }
            return std::make_unique<NameExpr>(l, s);
        }
        case TokenType::STRING: {
            std::string s;
            while (cur().type == TokenType::STRING) s += next().text;  // adjacent literals concatenate
            return std::make_unique<ConstExpr>(l, Value::string(std::move(s)));
        }
        case TokenType::INTEGER: return std::make_unique<ConstExpr>(l, Value::integer(next().int_value));
        case TokenType::FLOAT: return std::make_unique<ConstExpr>(l, Value::number(next().float_value));
        default: break;
        }
        if (skip_op("(")) {
            ExprPtr e = parse_tuple(true, "", true);
            expect_op(")");
            return e;
        }
        if (skip_op("[")) {
            auto node = std::make_unique<ListExpr>(l);
            while (!skip_op("]")) {
                if (!node->items.empty()) expect_op(",");
                if (skip_op("]")) break;
                node->items.push_back(parse_expression(true));
            }
            return node;
        }
        if (skip_op("{")) {
            auto node = std::make_unique<DictExpr>(l);
            while (!skip_op("}")) {
                if (!node->items.empty()) expect_op(",");
                if (skip_op("}")) break;
                ExprPtr key = parse_expression(true);
                expect_op(":");
                node->items.emplace_back(std::move(key), parse_expression(true));
            }
            return node;
        }
        fail_here("unexpected '" + describe(t) + "'");
    }

    ExprPtr parse_postfix(ExprPtr node) {
        Chain chain(*this);
        while (true) {
            chain.add();
            if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
            else if (is_op("(")) node = parse_call(std::move(node));
            else return node;
        }
    }

    ExprPtr parse_filter_expr(ExprPtr node) {
        Chain chain(*this);
        while (true) {
            chain.add();
            if (is_op("|")) {
                while (skip_op("|")) chain.add(), node = parse_filter_call(std::move(node));
            } else if (is_name("is")) {
                node = parse_test(std::move(node));
            } else if (is_op("(")) {
                node = parse_call(std::move(node));
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr object) {
        const Token& t = next();
        if (t.text == ".") {
            const Token& attr = next();
            if (attr.type == TokenType::NAME) {
                auto node = std::make_unique<GetAttrExpr>(t.line);
                node->object = std::move(object);
                node->name = attr.text;
                return node;
            }
            if (attr.type != TokenType::INTEGER) fail_here("expected name or number");
            auto node = std::make_unique<GetItemExpr>(t.line);
            node->object = std::move(object);
            node->index = std::make_unique<ConstExpr>(attr.line, Value::integer(attr.int_value));
            return node;
        }
        std::vector<ExprPtr> args;
        while (!skip_op("]")) {
            if (!args.empty()) expect_op(",");
            args.push_back(parse_subscribed(object, t.line));
        }
        if (args.size() == 1 && args[0]->type == ExprType::SLICE) return std::move(args[0]);
        for (const auto& a : args)
            if (a->type == ExprType::SLICE) fail_here("a slice cannot be combined with other subscripts");
        auto node = std::make_unique<GetItemExpr>(t.line);
        node->object = std::move(object);
        if (args.size() == 1) {
            node->index = std::move(args[0]);
        } else {
            auto tuple = std::make_unique<ListExpr>(t.line);
            tuple->items = std::move(args);
            tuple->tuple = true;
            node->index = std::move(tuple);
        }
        return node;
    }

    // One subscript: an expression, or a slice (which takes the object over).
    ExprPtr parse_subscribed(ExprPtr& object, int l) {
        ExprPtr start;
        if (!is_op(":")) {
            start = parse_expression(true);
            if (!is_op(":")) return start;
        }
        next();  // ':'
        auto slice = std::make_unique<SliceExpr>(l);
        slice->start = std::move(start);
        if (!is_op(":") && !is_op("]") && !is_op(",")) slice->stop = parse_expression(true);
        if (skip_op(":") && !is_op("]") && !is_op(",")) slice->step = parse_expression(true);
        if (!object) fail_here("only one slice per subscript is supported");
        slice->object = std::move(object);
        return slice;
    }

    Arguments parse_call_args() {
        expect_op("(");
        Arguments args;
        bool first = true;
        while (!skip_op(")")) {
            if (!first) {
                expect_op(",");
                if (skip_op(")")) break;
            }
            first = false;
            if (skip_op("*")) {
                args.star_args = parse_expression(true);
            } else if (skip_op("**")) {
                args.star_kwargs = parse_expression(true);
            } else if (cur().type == TokenType::NAME && peek().type == TokenType::OPERATOR && peek().text == "=") {
                std::string key = next().text;
                next();
                args.keyword.emplace_back(std::move(key), parse_expression(true));
            } else {
                if (!args.keyword.empty() || args.star_args || args.star_kwargs) fail_here("invalid syntax for function call expression");
                args.positional.push_back(parse_expression(true));
            }
        }
        return args;
    }

    ExprPtr parse_call(ExprPtr callee) {
        auto node = std::make_unique<CallExpr>(line());
        node->callee = std::move(callee);
        node->args = parse_call_args();
        return node;
    }

    std::string dotted_name() {
        std::string name = expect_name();
        while (skip_op(".")) name += "." + expect_name();
        return name;
    }

    std::unique_ptr<FilterExpr> parse_filter_call(ExprPtr operand) {
        auto node = std::make_unique<FilterExpr>(line());
        node->operand = std::move(operand);
        node->name = dotted_name();
        node->fn = find_filter(node->name);
        if (is_op("(")) node->args = parse_call_args();
        return node;
    }

    ExprPtr parse_test(ExprPtr operand) {
        int l = next().line;  // 'is'
        bool negated = skip_name("not");
        auto node = std::make_unique<TestExpr>(l);
        node->operand = std::move(operand);
        node->name = dotted_name();
        node->fn = find_test(node->name);
        const Token& t = cur();
        bool bare_arg = t.type == TokenType::NAME || t.type == TokenType::STRING || t.type == TokenType::INTEGER ||
                        t.type == TokenType::FLOAT || is_op("[") || is_op("{");
        if (is_op("(")) {
            node->args = parse_call_args();
        } else if (bare_arg && !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) fail_here("You cannot chain multiple tests with is");
            node->args.positional.push_back(parse_postfix(parse_primary()));  // `x is divisibleby 3`
        }
        if (negated) return std::make_unique<UnaryExpr>(l, Op::NOT, std::move(node));
        return node;
    }
};

}  // namespace

std::shared_ptr<const Program> parse(std::string_view source) { return Parser(tokenize(source)).run(); }

}  // namespace llm::jinja
