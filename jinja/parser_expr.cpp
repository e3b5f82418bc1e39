// The Jinja parser, expressions: Jinja 3.1's precedence climbing from conditional expressions down to
// primaries, postfix access, calls, filters and tests.
#include "jinja/parser_impl.h"

namespace jinja {

bool Parser::tuple_end(std::string_view extra_end) const {
    TokenType t = cur().type;
    return t == TokenType::VARIABLE_END || t == TokenType::BLOCK_END || is_op(")") || (!extra_end.empty() && is_name(extra_end));
}

ExprPtr Parser::parse_tuple(bool with_condexpr, std::string_view extra_end, bool explicit_parens) {
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

ExprPtr Parser::parse_expression(bool with_condexpr) {
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

ExprPtr Parser::parse_or() {
    ExprPtr left = parse_and();
    Chain chain(*this);
    while (is_name("or")) {
        chain.add();
        int l = next().line;
        left = std::make_unique<BinaryExpr>(l, Op::OR, std::move(left), parse_and());
    }
    return left;
}

ExprPtr Parser::parse_and() {
    ExprPtr left = parse_not();
    Chain chain(*this);
    while (is_name("and")) {
        chain.add();
        int l = next().line;
        left = std::make_unique<BinaryExpr>(l, Op::AND, std::move(left), parse_not());
    }
    return left;
}

ExprPtr Parser::parse_not() {
    if (is_name("not")) {
        Nest nest(*this);
        int l = next().line;
        return std::make_unique<UnaryExpr>(l, Op::NOT, parse_not());
    }
    return parse_compare();
}

ExprPtr Parser::parse_compare() {
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

ExprPtr Parser::parse_math1() {
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

ExprPtr Parser::parse_concat() {
    int l = line();
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto node = std::make_unique<ConcatExpr>(l);
    node->parts.push_back(std::move(first));
    while (skip_op("~")) node->parts.push_back(parse_math2());
    return node;
}

ExprPtr Parser::parse_math2() {
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

ExprPtr Parser::parse_pow() {
    ExprPtr left = parse_unary(true);
    Chain chain(*this);
    while (is_op("**")) {
        chain.add();
        int l = next().line;
        left = std::make_unique<BinaryExpr>(l, Op::POW, std::move(left), parse_unary(true));
    }
    return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
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

ExprPtr Parser::parse_primary() {
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

ExprPtr Parser::parse_postfix(ExprPtr node) {
    Chain chain(*this);
    while (true) {
        chain.add();
        if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
        else if (is_op("(")) node = parse_call(std::move(node));
        else return node;
    }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
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

ExprPtr Parser::parse_subscript(ExprPtr object) {
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
ExprPtr Parser::parse_subscribed(ExprPtr& object, int l) {
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

Arguments Parser::parse_call_args() {
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

ExprPtr Parser::parse_call(ExprPtr callee) {
    auto node = std::make_unique<CallExpr>(line());
    node->callee = std::move(callee);
    node->args = parse_call_args();
    return node;
}

std::string Parser::dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
}

std::unique_ptr<FilterExpr> Parser::parse_filter_call(ExprPtr operand) {
    auto node = std::make_unique<FilterExpr>(line());
    node->operand = std::move(operand);
    node->name = dotted_name();
    node->fn = find_filter(node->name);
    if (is_op("(")) node->args = parse_call_args();
    return node;
}

ExprPtr Parser::parse_test(ExprPtr operand) {
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

}  // namespace jinja
