// The Jinja parser, statements: for/if/set/macro/call/filter/with/break/continue and the generation
// tag (transformers' AssistantTracker), with their end tags.
#include "jinja/parser_impl.h"

namespace jinja {

// Parses until a block tag named in `ends` (left unconsumed) or the end of the template.
Body Parser::subparse(std::initializer_list<std::string_view> ends) {
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

// Ends the current tag, then parses its body up to one of `ends`.
Body Parser::block_body(std::initializer_list<std::string_view> ends) {
    expect(TokenType::BLOCK_END);
    return subparse(ends);
}

void Parser::end_tag(std::string_view name) {
    expect(TokenType::BLOCK_BEGIN);
    if (!skip_name(name)) fail_here("expected '" + std::string(name) + "'");
    expect(TokenType::BLOCK_END);
}

void Parser::parse_statement(Body& body) {
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

StmtPtr Parser::parse_if(int l) {
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

StmtPtr Parser::parse_for(int l) {
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

StmtPtr Parser::parse_set(int l) {
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
std::vector<std::unique_ptr<FilterExpr>> Parser::parse_filter_chain(bool start_inline) {
    std::vector<std::unique_ptr<FilterExpr>> filters;
    bool first = start_inline;
    while (first || skip_op("|")) {
        first = false;
        filters.push_back(parse_filter_call(nullptr));
    }
    return filters;
}

std::shared_ptr<MacroDef> Parser::parse_signature(std::string name, int l) {
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
void Parser::parse_macro_body(MacroDef& def, std::string_view end) {
    macros_.push_back(&def);
    def.body = block_body({end});
    macros_.pop_back();
    end_tag(end);
}

StmtPtr Parser::parse_macro(int l) {
    auto node = std::make_unique<MacroStmt>(l);
    std::string name = expect_name();
    node->slot = slot(name);
    auto def = parse_signature(name, l);
    parse_macro_body(*def, "endmacro");
    node->def = std::move(def);
    return node;
}

StmtPtr Parser::parse_call_block(int l) {
    auto node = std::make_unique<CallBlockStmt>(l);
    auto def = parse_signature("caller", l);
    node->call = parse_expression(true);
    if (node->call->type != ExprType::CALL) fail_here("expected call");
    parse_macro_body(*def, "endcall");
    node->caller = std::move(def);
    return node;
}

StmtPtr Parser::parse_filter_block(int l) {
    auto node = std::make_unique<FilterBlockStmt>(l);
    node->filters = parse_filter_chain(true);
    node->body = block_body({"endfilter"});
    end_tag("endfilter");
    return node;
}

StmtPtr Parser::parse_with(int l) {
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
Target Parser::parse_target(bool with_namespace, std::string_view end_name) {
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

std::shared_ptr<const Program> parse(std::string_view source) {
    constexpr size_t MAX_SOURCE_BYTES = 1 << 20;  // real templates are under 20 KB; parsing is not budgeted
    if (source.size() > MAX_SOURCE_BYTES)
        throw Error(ErrorKind::SYNTAX, "template source of " + std::to_string(source.size()) + " bytes exceeds the limit of " +
                                           std::to_string(MAX_SOURCE_BYTES));
    return Parser(tokenize(source)).run();
}

}  // namespace jinja
