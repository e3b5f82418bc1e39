// Values of our Jinja interpreter (internal to jinja/): Python's data model as chat templates see it —
// undefined, None, bool, int, float, str, list/tuple, dict (insertion-ordered) and objects (namespace,
// loop, macro, builtin functions). Strings, lists and dicts of the render context are borrowed from
// the caller's JSON, never copied; values the template makes are shared and immutable.
#pragma once

#include "jinja/jinja.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace jinja {

using Json = nlohmann::ordered_json;

[[noreturn]] void fail(ErrorKind kind, std::string message);

enum class Kind : uint8_t { UNDEFINED, NONE, BOOL, INT, FLOAT, STRING, LIST, DICT, OBJECT };

class Value;
class Object;

struct Heap {
    virtual ~Heap() = default;
};
struct StrHeap : Heap {
    std::string s;
    explicit StrHeap(std::string v) : s(std::move(v)) {}
};
// Containers the template builds are at most MAX_VALUE_DEPTH deep, so that freeing, printing and
// comparing them (all recursive) cannot exhaust the stack; deeper JSON input is refused when used.
constexpr int MAX_VALUE_DEPTH = 512;
// The destructors are defined in value.cpp, where Value is complete (clang instantiates a
// virtual destructor's members at the class, where Value is still incomplete).
struct ListHeap : Heap {
    std::vector<Value> items;
    int depth = 1;
    ~ListHeap() override;
};
struct DictHeap : Heap {
    std::vector<std::pair<Value, Value>> items;  // insertion order, unique keys
    int depth = 1;
    ~DictHeap() override;
};
// Why a value is undefined; used when it is used in a way Undefined forbids.
struct UndefinedHeap : Heap {
    std::string hint;
    ErrorKind kind;
    UndefinedHeap(std::string h, ErrorKind k) : hint(std::move(h)), kind(k) {}
};

class Value {
public:
    Value() { i_ = 0; }  // undefined, no hint
    static Value undefined(std::string hint, ErrorKind kind = ErrorKind::UNDEFINED);
    static Value none();
    static Value boolean(bool b);
    static Value integer(int64_t i);
    static Value number(double f);
    static Value string(std::string s, bool safe = false);
    static Value borrowed_string(const std::string& s);  // `s` must outlive the value
    static Value list(std::vector<Value> items, bool tuple = false);
    static Value dict(std::vector<std::pair<Value, Value>> items);
    static Value object(std::shared_ptr<Object> obj);
    static Value from_json(const Json& j);  // borrows j's strings, arrays and objects

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::UNDEFINED; }
    bool is_none() const { return kind_ == Kind::NONE; }
    bool is_string() const { return kind_ == Kind::STRING; }
    bool is_number() const { return kind_ == Kind::INT || kind_ == Kind::FLOAT || kind_ == Kind::BOOL; }
    bool is_tuple() const { return flags_ & TUPLE; }
    bool is_safe() const { return flags_ & SAFE; }  // markupsafe.Markup (from |safe)

    bool as_bool() const { return b_; }
    int64_t as_int() const { return kind_ == Kind::BOOL ? b_ : i_; }  // BOOL or INT
    double as_float() const { return kind_ == Kind::FLOAT ? f_ : static_cast<double>(as_int()); }
    std::string_view str() const;

    // Lists and tuples.
    size_t list_size() const;
    Value list_at(size_t i) const;
    // Dicts.
    size_t dict_size() const;
    bool dict_find(std::string_view key, Value& out) const;
    bool dict_find(const Value& key, Value& out) const;
    template <class F>
    void dict_for_each(F&& f) const;  // f(const Value& key, const Value& value)

    Object* object() const;
    const UndefinedHeap* undefined_info() const;
    // Identity of the underlying data (Python's `is` for containers and objects).
    const void* identity() const;
    int depth() const;  // nesting of a container the template built; 0 for everything else

private:
    enum : uint8_t { TUPLE = 1, SAFE = 2, BORROWED = 4 };
    Kind kind_ = Kind::UNDEFINED;
    uint8_t flags_ = 0;
    union {
        bool b_;
        int64_t i_;
        double f_;
        const std::string* bstr_;  // BORROWED STRING
        const Json* bjson_;        // BORROWED LIST / DICT
    };
    std::shared_ptr<Heap> heap_;

    const ListHeap& list_heap() const { return static_cast<const ListHeap&>(*heap_); }
    const DictHeap& dict_heap() const { return static_cast<const DictHeap&>(*heap_); }
};

template <class F>
void Value::dict_for_each(F&& f) const {
    if (flags_ & BORROWED) {
        for (auto it = bjson_->begin(); it != bjson_->end(); ++it)
            f(Value::borrowed_string(it.key()), Value::from_json(it.value()));
    } else {
        for (const auto& [k, v] : dict_heap().items) f(k, v);
    }
}

// Python's builtins over values.
bool truthy(const Value& v);
bool equal(const Value& a, const Value& b);             // ==
bool less(const Value& a, const Value& b, const char* op);  // <, TypeError when unordered
std::string type_name(const Value& v);                  // Python's type(v).__name__
std::string object_description(const Value& v);         // "'dict object'", as in Jinja's hints
void append_str(std::string& out, const Value& v);      // str(v)
void append_repr(std::string& out, const Value& v);     // repr(v)
std::string to_str(const Value& v);
size_t length(const Value& v);                          // len(v); TypeError when it has none
std::vector<Value> iterate(const Value& v);             // iter(v): str -> chars, dict -> keys
void append_float_repr(std::string& out, double f);     // repr(float)

// Raises the error an undefined value stands for (UndefinedError or SecurityError).
[[noreturn]] void fail_undefined(const Value& v);
inline void require_defined(const Value& v) {
    if (v.is_undefined()) fail_undefined(v);
}

// Python json.dumps as transformers' tojson calls it.
struct JsonOptions {
    bool ensure_ascii = false;
    bool indent_set = false;
    std::string indent;  // the string one level adds
    std::string item_separator = ", ", key_separator = ": ";
    bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& options);

// Objects: everything that is neither data nor undefined.
class Object : public Heap {
public:
    virtual std::string type_name() const = 0;
    virtual bool get_attr(std::string_view name, Value& out) const {
        (void)name, (void)out;
        return false;
    }
    virtual std::string repr() const { return "<" + type_name() + " object>"; }
    virtual bool callable() const { return false; }
};

}  // namespace jinja
