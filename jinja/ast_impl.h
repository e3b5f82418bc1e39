// The syntax tree of a parsed template (internal to jinja/): expressions and statements, each with the
// line it starts on. Built once by the parser, then only read by renders (a template renders from
// any number of threads at once).
#pragma once

#include "jinja/value_impl.h"

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace jinja {

class Renderer;
struct CallArgs;
using FilterFn = Value (*)(Renderer&, const Value& operand, CallArgs& args);
using TestFn = bool (*)(Renderer&, const Value& operand, CallArgs& args);
FilterFn find_filter(std::string_view name);  // nullptr when Jinja has no such filter
TestFn find_test(std::string_view name);

enum class Op : uint8_t { ADD, SUB, MUL, DIV, FLOORDIV, MOD, POW, AND, OR, NOT, NEG, POS, EQ, NE, LT, LE, GT, GE, IN, NOT_IN };

enum class ExprType : uint8_t {
    CONST, NAME, GETATTR, GETITEM, SLICE, CALL, FILTER, TEST, UNARY, BINARY, CONCAT, COMPARE, CONDITIONAL, LIST, DICT,
};

struct Expr {
    ExprType type;
    int line;
    Expr(ExprType t, int l) : type(t), line(l) {}
    virtual ~Expr() = default;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr : Expr {
    Value value;
    ConstExpr(int l, Value v) : Expr(ExprType::CONST, l), value(std::move(v)) {}
};
struct NameExpr : Expr {
    int slot;  // index into Program::symbols
    NameExpr(int l, int s) : Expr(ExprType::NAME, l), slot(s) {}
};
struct GetAttrExpr : Expr {  // x.name
    ExprPtr object;
    std::string name;
    GetAttrExpr(int l) : Expr(ExprType::GETATTR, l) {}
};
struct GetItemExpr : Expr {  // x[index]
    ExprPtr object, index;
    GetItemExpr(int l) : Expr(ExprType::GETITEM, l) {}
};
struct SliceExpr : Expr {  // x[start:stop:step], any part may be missing
    ExprPtr object, start, stop, step;
    SliceExpr(int l) : Expr(ExprType::SLICE, l) {}
};
struct Arguments {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> keyword;
    ExprPtr star_args, star_kwargs;  // *xs, **kw
};
struct CallExpr : Expr {
    ExprPtr callee;
    Arguments args;
    CallExpr(int l) : Expr(ExprType::CALL, l) {}
};
struct FilterExpr : Expr {  // operand | name(args); operand is null in {% filter %} and block {% set %}
    ExprPtr operand;
    std::string name;
    FilterFn fn = nullptr;  // unknown filters fail when reached, as in Jinja 3
    Arguments args;
    FilterExpr(int l) : Expr(ExprType::FILTER, l) {}
};
struct TestExpr : Expr {  // operand is name(args)
    ExprPtr operand;
    std::string name;
    TestFn fn = nullptr;
    Arguments args;
    TestExpr(int l) : Expr(ExprType::TEST, l) {}
};
struct UnaryExpr : Expr {  // not x, -x, +x
    Op op;
    ExprPtr operand;
    UnaryExpr(int l, Op o, ExprPtr x) : Expr(ExprType::UNARY, l), op(o), operand(std::move(x)) {}
};
struct BinaryExpr : Expr {  // arithmetic, and, or
    Op op;
    ExprPtr left, right;
    BinaryExpr(int l, Op o, ExprPtr a, ExprPtr b) : Expr(ExprType::BINARY, l), op(o), left(std::move(a)), right(std::move(b)) {}
};
struct ConcatExpr : Expr {  // a ~ b ~ c
    std::vector<ExprPtr> parts;
    ConcatExpr(int l) : Expr(ExprType::CONCAT, l) {}
};
struct CompareExpr : Expr {  // a < b == c (chained as in Python)
    ExprPtr first;
    std::vector<std::pair<Op, ExprPtr>> rest;
    CompareExpr(int l) : Expr(ExprType::COMPARE, l) {}
};
struct ConditionalExpr : Expr {  // then if condition else otherwise; otherwise may be null
    ExprPtr condition, then, otherwise;
    ConditionalExpr(int l) : Expr(ExprType::CONDITIONAL, l) {}
};
struct ListExpr : Expr {  // [a, b] or (a, b)
    std::vector<ExprPtr> items;
    bool tuple = false;
    ListExpr(int l) : Expr(ExprType::LIST, l) {}
};
struct DictExpr : Expr {
    std::vector<std::pair<ExprPtr, ExprPtr>> items;
    DictExpr(int l) : Expr(ExprType::DICT, l) {}
};

enum class StmtType : uint8_t { TEXT, OUTPUT, IF, FOR, SET, SET_BLOCK, MACRO, CALL_BLOCK, FILTER_BLOCK, WITH, BREAK, CONTINUE };

struct Stmt {
    StmtType type;
    int line;
    Stmt(StmtType t, int l) : type(t), line(l) {}
    virtual ~Stmt() = default;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// What an assignment or a for loop binds: a name, a namespace attribute (ns.x) or a tuple of names.
struct Target {
    enum Kind : uint8_t { NAME, ATTRIBUTE, TUPLE } kind = NAME;
    int slot = -1;     // NAME, and the namespace variable of ATTRIBUTE
    std::string attr;  // ATTRIBUTE
    std::vector<Target> items;  // TUPLE
};

struct TextStmt : Stmt {
    std::string text;
    TextStmt(int l, std::string t) : Stmt(StmtType::TEXT, l), text(std::move(t)) {}
};
struct OutputStmt : Stmt {  // {{ expr }}
    ExprPtr expr;
    OutputStmt(int l, ExprPtr e) : Stmt(StmtType::OUTPUT, l), expr(std::move(e)) {}
};
struct IfStmt : Stmt {
    std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
    Body otherwise;
    IfStmt(int l) : Stmt(StmtType::IF, l) {}
};
struct ForStmt : Stmt {
    Target target;
    ExprPtr iterable, filter;  // filter: `for x in xs if cond`, may be null
    Body body, otherwise;
    bool recursive = false;
    ForStmt(int l) : Stmt(StmtType::FOR, l) {}
};
struct SetStmt : Stmt {  // {% set target = value %}
    Target target;
    ExprPtr value;
    SetStmt(int l) : Stmt(StmtType::SET, l) {}
};
struct SetBlockStmt : Stmt {  // {% set target | filters %}body{% endset %}
    Target target;
    std::vector<std::unique_ptr<FilterExpr>> filters;
    Body body;
    SetBlockStmt(int l) : Stmt(StmtType::SET_BLOCK, l) {}
};
struct MacroDef {
    std::string name;
    int line = 0;
    std::vector<int> params;           // slots
    std::vector<ExprPtr> defaults;     // parallel to params; null when none
    Body body;
    bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};
struct MacroStmt : Stmt {
    std::shared_ptr<const MacroDef> def;
    int slot;
    MacroStmt(int l) : Stmt(StmtType::MACRO, l) {}
};
struct CallBlockStmt : Stmt {  // {% call(params) macro(args) %}body{% endcall %}
    std::shared_ptr<const MacroDef> caller;
    ExprPtr call;
    CallBlockStmt(int l) : Stmt(StmtType::CALL_BLOCK, l) {}
};
struct FilterBlockStmt : Stmt {  // {% filter f | g %}body{% endfilter %}
    std::vector<std::unique_ptr<FilterExpr>> filters;
    Body body;
    FilterBlockStmt(int l) : Stmt(StmtType::FILTER_BLOCK, l) {}
};
struct WithStmt : Stmt {
    std::vector<std::pair<Target, ExprPtr>> assignments;
    Body body;
    WithStmt(int l) : Stmt(StmtType::WITH, l) {}
};

struct Program {
    Body body;
    std::vector<std::string> symbols;  // variable names by slot
    std::unordered_map<std::string, int> slots;  // the inverse
    int slot_loop = -1, slot_caller = -1, slot_varargs = -1, slot_kwargs = -1;
};

}  // namespace jinja
