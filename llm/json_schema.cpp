// JSON Schema -> GBNF: one rule per schema node producing compact JSON the schema accepts (types,
// properties/required/additionalProperties, enum, const, anyOf/oneOf, allOf of objects, $ref/$defs
// with recursion, items/prefixItems/minItems/maxItems, string lengths, patterns, formats, integer
// bounds). A keyword it cannot honour is an error naming it, never ignored.
#include "llm/json_schema_impl.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <utility>

namespace llm {

namespace {

using json = nlohmann::ordered_json;

// Keywords that describe but do not constrain.
// The keywords each type takes here (with "type" itself): a schema of that type with any other is refused.
const std::map<std::string, std::set<std::string>> TYPE_KEYWORDS = {
    {"string", {"type", "minLength", "maxLength", "pattern", "format"}},
    {"integer", {"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}},
    {"number", {"type"}},
    {"boolean", {"type"}},
    {"null", {"type"}},
    {"object", {"type", "properties", "required", "additionalProperties"}},
    {"array", {"type", "items", "prefixItems", "minItems", "maxItems"}}};
const std::set<std::string> ANNOTATIONS = {"$schema", "$id", "$comment", "title", "description", "default", "examples",
                                           "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "strict"};

const char* PRIMITIVES = R"(json-char ::= [^"\\\x00-\x1F\x7F\uD800-\uDFFF] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-int ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" (json-string ":" json-value ("," json-string ":" json-value)*)? "}"
json-array ::= "[" (json-value ("," json-value)*)? "]"
)";

// Formats as ajv-formats' "full" mode checks them (days per month; Feb to 28; time with a zone).
const std::map<std::string, std::string> FORMATS = {
    {"date", R"([0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))"},
    {"time", R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,3})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))"},
    {"uuid", R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})"},
    {"email", R"([a-z0-9]{1,16} ("." [a-z0-9]{1,16})? "@" [a-z0-9]{1,16} ("." [a-z0-9]{1,16})? "." [a-z]{2,6})"},
};

std::string sanitize(const std::string& name) {
    std::string out;
    for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    return out.empty() ? "x" : out;
}

// Decimal integers in [lo, hi] (both with the same number of digits, as strings).
std::string digits_between(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return "\"\"";
    if (lo == std::string(lo.size(), '0') && hi == std::string(hi.size(), '9'))  // any digits: keeps the recursion linear
        return "[0-9]{" + std::to_string(lo.size()) + "}";
    if (lo.size() == 1) return lo == hi ? gbnf_literal(lo) : "[" + lo + "-" + hi + "]";
    if (lo[0] == hi[0]) return gbnf_literal(lo.substr(0, 1)) + " " + digits_between(lo.substr(1), hi.substr(1));
    const size_t n = lo.size() - 1;
    std::string out = "(" + gbnf_literal(lo.substr(0, 1)) + " " + digits_between(lo.substr(1), std::string(n, '9'));
    if (lo[0] + 1 <= hi[0] - 1)
        out += " | [" + std::string(1, char(lo[0] + 1)) + "-" + std::string(1, char(hi[0] - 1)) + "] [0-9]{" + std::to_string(n) + "}";
    return out + " | " + gbnf_literal(hi.substr(0, 1)) + " " + digits_between(std::string(n, '0'), hi.substr(1)) + ")";
}

// Non-negative integers in [a, b] without leading zeros.
std::string naturals_between(uint64_t a, uint64_t b) {
    std::vector<std::string> alts;
    uint64_t pow = 1;
    for (int d = 1; d <= 19 && a <= b; d++, pow *= 10) {
        uint64_t top = d == 19 ? UINT64_MAX : pow * 10 - 1;
        uint64_t lo = std::max(a, d == 1 ? 0 : pow), hi = std::min(b, top);
        if (lo <= hi) alts.push_back(digits_between(std::to_string(lo), std::to_string(hi)));
        if (d == 19 || top >= b) break;
    }
    std::string out = "(";
    for (size_t i = 0; i < alts.size(); i++) out += (i ? " | " : "") + alts[i];
    return out + ")";
}

std::string integers_between(int64_t lo, int64_t hi) {
    std::vector<std::string> alts;
    if (lo < 0) alts.push_back("\"-\" " + naturals_between(hi < 0 ? uint64_t(-(hi + 1)) + 1 : 1, uint64_t(-(lo + 1)) + 1));
    if (hi >= 0) alts.push_back(naturals_between(uint64_t(std::max<int64_t>(lo, 0)), uint64_t(hi)));
    return alts.size() == 1 ? alts[0] : "(" + alts[0] + " | " + alts[1] + ")";
}

// Converts one schema (its $refs resolve against it) into rules of a shared rule set.
class Converter {
public:
    Converter(const json& root, std::map<std::string, std::string>& rules) : root_(root), rules_(rules) {}

    void convert(const std::string& name) {
        prefix_ = name;
        std::string top = visit(root_, name, "");
        if (top != name) rules_[name] = top;
        check_ref_cycles();
    }

private:
    [[noreturn]] void fail(const std::string& where, const std::string& what) const {
        throw GrammarError("[json_schema] " + (where.empty() ? std::string("the schema") : "at '" + where + "'") + ": " + what);
    }

    std::string add_rule(const std::string& base, const std::string& body) {
        std::string name = sanitize(base);
        for (int i = 2; rules_.count(name) && rules_[name] != body; i++) name = sanitize(base) + "-" + std::to_string(i);
        rules_[name] = body;
        return name;
    }

    const json& resolve(const std::string& ref, const std::string& where) const {
        if (ref == "#") return root_;
        if (!ref.starts_with("#/")) fail(where, "'$ref' " + ref + " is not supported (only local refs '#/...')");
        try {
            const json& target = root_.at(json::json_pointer(ref.substr(1)));
            return target;
        } catch (const std::exception&) {
            fail(where, "'$ref' " + ref + " points at nothing");
        }
    }

    void check_keywords(const json& s, const std::set<std::string>& allowed, const std::string& where) const {
        for (const auto& [key, value] : s.items())
            if (!allowed.count(key) && !ANNOTATIONS.count(key)) fail(where, "keyword '" + key + "' is not supported here");
    }

    struct Depth {  // nesting bound: hostile schemas must not exhaust the stack
        int& d;
        explicit Depth(int& d_) : d(++d_) {}
        ~Depth() { --d; }
    };

    // A $ref rule that can reach itself through refs alone (anyOf, oneOf, $ref), before its value has
    // read a character, is a left recursion GBNF cannot take; such a schema describes no finite value.
    void check_ref_cycles() const {
        std::vector<std::string> rules;  // every $ref rule, numbered
        std::map<std::string, uint32_t> id;
        for (const auto& [rule, ref] : ref_names_) id[rule] = uint32_t(rules.size()), rules.push_back(rule);
        std::vector<std::vector<uint32_t>> edges(rules.size());
        for (const auto& [rule, heads] : heads_of_)
            for (const std::string& next : heads) edges[id.at(rule)].push_back(id.at(next));
        if (const int64_t r = node_on_cycle(edges); r >= 0) {
            const std::string& ref = ref_names_.at(rules[size_t(r)]);
            fail(ref, "'$ref' " + ref + " leads back to itself before any value is read");
        }
    }

    // The rule (or expression) producing the JSON of schema `s`.
    std::string visit(const json& s, const std::string& name, const std::string& where) {
        Depth guard(depth_);
        if (depth_ > 64) fail(where, "the schema nests deeper than 64 levels");
        if (s.is_boolean()) {
            if (!s.get<bool>()) fail(where, "the schema 'false' accepts no value");
            return "json-value";
        }
        if (!s.is_object()) fail(where, "a schema must be an object or a boolean");
        if (s.contains("$ref")) {
            check_keywords(s, {"$ref"}, where);
            const std::string ref = s["$ref"].is_string() ? s["$ref"].get<std::string>() : "";
            auto it = refs_.find(ref);
            std::string rule = it != refs_.end() ? it->second : sanitize(prefix_ + "-ref" + ref.substr(1));
            if (heads_) heads_->insert(rule);
            if (it != refs_.end()) return rule;
            refs_[ref] = rule;  // before visiting: recursive schemas refer to it
            ref_names_[rule] = ref;
            rules_[rule] = "";
            std::set<std::string>* outer = std::exchange(heads_, &heads_of_[rule]);
            std::string body = visit(resolve(ref, where), rule, ref);
            heads_ = outer;
            rules_[rule] = body;
            return rule;
        }
        if (s.contains("const")) {
            check_keywords(s, {"const"}, where);
            return add_rule(name, gbnf_literal(s["const"].dump()));
        }
        if (s.contains("enum")) {
            check_keywords(s, {"enum", "type"}, where);
            if (!s["enum"].is_array() || s["enum"].empty()) fail(where, "'enum' must be a non-empty list");
            std::string body;
            for (const auto& v : s["enum"]) body += (body.empty() ? "" : " | ") + gbnf_literal(v.dump());
            return add_rule(name, body);
        }
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!s.contains(key)) continue;
            check_keywords(s, {key}, where);
            if (!s[key].is_array() || s[key].empty()) fail(where, std::string("'") + key + "' must be a non-empty list");
            std::string body;
            for (size_t i = 0; i < s[key].size(); i++)
                body += (i ? " | " : "") + visit(s[key][i], name + "-" + std::to_string(i), where + "/" + key + "/" + std::to_string(i));
            return add_rule(name, body);
        }
        if (s.contains("allOf")) return visit(merge_all_of(s, where), name, where);
        json type = s.value("type", json());
        if (type.is_array()) {  // one alternative per type, each without the keywords only the others take
            std::string body;
            for (const auto& t : type) {
                if (!t.is_string()) fail(where, "'type' must be a string or a list of strings");
                json one = s;
                one["type"] = t;
                const auto own = TYPE_KEYWORDS.find(t.get<std::string>());
                for (const auto& other : type)
                    if (const auto theirs = other.is_string() ? TYPE_KEYWORDS.find(other.get<std::string>()) : TYPE_KEYWORDS.end();
                        other != t && theirs != TYPE_KEYWORDS.end())
                        for (const auto& key : theirs->second)
                            if (own == TYPE_KEYWORDS.end() || !own->second.count(key)) one.erase(key);
                body += (body.empty() ? "" : " | ") + visit(one, name + "-" + t.get<std::string>(), where);
            }
            if (body.empty()) fail(where, "'type' is an empty list");
            return add_rule(name, body);
        }
        if (type.is_null()) {
            if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) type = "object";
            else if (s.contains("items") || s.contains("prefixItems")) type = "array";
            else {
                check_keywords(s, {}, where);
                return "json-value";
            }
        }
        if (!type.is_string()) fail(where, "'type' must be a string or a list of strings");
        const std::string t = type.get<std::string>();
        if (t == "object" || t == "array") {  // their values begin with a character: no $ref is at the head inside
            std::set<std::string>* outer = std::exchange(heads_, nullptr);
            std::string rule = t == "object" ? object(s, name, where) : array(s, name, where);
            heads_ = outer;
            return rule;
        }
        if (t == "string") return string(s, name, where);
        if (t == "integer") return integer(s, name, where);
        if (t == "number") {
            check_keywords(s, TYPE_KEYWORDS.at("number"), where);
            return "json-number";
        }
        if (t == "boolean") return check_keywords(s, TYPE_KEYWORDS.at("boolean"), where), "json-boolean";
        if (t == "null") return check_keywords(s, TYPE_KEYWORDS.at("null"), where), "json-null";
        fail(where, "unknown type '" + t + "'");
    }

    json merge_all_of(const json& s, const std::string& where) {
        Depth guard(depth_);  // an allOf may $ref back to itself
        if (depth_ > 64) fail(where, "'allOf' nests deeper than 64 levels (does a '$ref' in it lead back to it?)");
        check_keywords(s, {"allOf", "type", "properties", "required", "additionalProperties"}, where);
        if (!s["allOf"].is_array()) fail(where, "'allOf' must be a list");
        json merged = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
        std::vector<json> parts = {s};
        for (const auto& p : s["allOf"]) parts.push_back(p);
        for (size_t i = 0; i < parts.size(); i++) {
            json part = parts[i];
            if (i > 0 && part.is_object() && part.contains("$ref"))
                part = resolve(part["$ref"].is_string() ? part["$ref"].get<std::string>() : "", where);
            if (i > 0 && part.contains("allOf")) part = merge_all_of(part, where);
            if (i > 0 && (!part.is_object() || (part.contains("type") && part["type"] != "object")))
                fail(where, "'allOf' is supported for object schemas only");
            if (i > 0) check_keywords(part, {"type", "properties", "required", "additionalProperties"}, where + "/allOf");
            const json props = part.value("properties", json::object());
            for (const auto& [k, v] : props.items()) merged["properties"][k] = v;
            for (const auto& r : part.value("required", json::array()))
                if (std::find(merged["required"].begin(), merged["required"].end(), r) == merged["required"].end()) merged["required"].push_back(r);
            if (part.contains("additionalProperties")) merged["additionalProperties"] = part["additionalProperties"];
        }
        return merged;
    }

    // "any string except these keys", built over the keys' trie so a generated extra key never
    // repeats a declared one (plain characters only, so no escape can spell one either).
    std::string other_key(const std::vector<std::string>& keys, const std::string& name) {
        std::function<std::string(const std::string&)> rest = [&](const std::string& prefix) -> std::string {
            std::set<unsigned char> next;
            bool is_key = false;
            for (const auto& k : keys) {
                if (k == prefix) is_key = true;
                else if (k.starts_with(prefix)) next.insert(static_cast<unsigned char>(k[prefix.size()]));
            }
            std::string others = R"([^"\\\x00-\x1F\x7F\uD800-\uDFFF)";
            for (unsigned char c : next) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02X", c);
                others += c < 0x80 ? std::string(buf) : std::string();  // multi-byte key chars: see below
            }
            std::string body = is_key ? "" : "\"\" | ";
            body += others + "] key-char*";
            for (unsigned char c : next) {
                if (c >= 0x80) fail("", "additional properties beside non-ASCII property names are not supported");
                body += " | " + gbnf_literal(std::string(1, char(c))) + " " + rest(prefix + char(c));
            }
            return add_rule(name + "-k" + std::to_string(counter_++), body);
        };
        rules_["key-char"] = R"([^"\\\x00-\x1F\x7F\uD800-\uDFFF])";
        return "\"\\\"\" " + rest("") + " \"\\\"\"";
    }

    std::string object(const json& s, const std::string& name, const std::string& where) {
        check_keywords(s, TYPE_KEYWORDS.at("object"), where);
        json props = s.value("properties", json::object());
        json required = s.value("required", json::array());
        if (!props.is_object()) fail(where, "'properties' must be an object");
        if (!required.is_array()) fail(where, "'required' must be a list");
        std::vector<std::string> req, opt, keys;
        std::map<std::string, std::string> kv;
        for (const auto& [key, sub] : props.items()) {
            keys.push_back(key);
            std::string value = visit(sub, name + "-" + key, where + "/properties/" + key);
            kv[key] = gbnf_literal(json(key).dump()) + " \":\" " + value;
            bool is_req = std::find(required.begin(), required.end(), key) != required.end();
            (is_req ? req : opt).push_back(key);
        }
        for (const auto& r : required)
            if (!r.is_string() || !props.contains(r.get<std::string>()))
                fail(where, "'required' names '" + (r.is_string() ? r.get<std::string>() : r.dump()) + "', which is not in 'properties'");
        std::string extra;
        json additional = s.contains("additionalProperties") ? s["additionalProperties"] : json(false);
        if (!(additional.is_boolean() && !additional.get<bool>())) {
            std::string value = visit(additional, name + "-additional", where + "/additionalProperties");
            std::string key = keys.empty() ? "json-string" : other_key(keys, name);
            extra = add_rule(name + "-extra", key + " \":\" " + value);
        }
        std::string body = "\"{\" ";
        if (!req.empty()) {
            for (size_t i = 0; i < req.size(); i++) body += (i ? " \",\" " : "") + kv[req[i]];
            for (const auto& o : opt) body += " (\",\" " + kv[o] + ")?";
            if (!extra.empty()) body += " (\",\" " + extra + ")*";
        } else if (!opt.empty() || !extra.empty()) {
            // the first member present may be any optional one (or an extra one); the later ones follow in order
            std::string alts;
            for (size_t i = 0; i < opt.size(); i++) {
                std::string a = kv[opt[i]];
                for (size_t j = i + 1; j < opt.size(); j++) a += " (\",\" " + kv[opt[j]] + ")?";
                if (!extra.empty()) a += " (\",\" " + extra + ")*";
                alts += (alts.empty() ? "" : " | ") + a;
            }
            if (!extra.empty()) alts += (alts.empty() ? "" : " | ") + extra + " (\",\" " + extra + ")*";
            body += "(" + alts + ")?";
        }
        return add_rule(name, body + " \"}\"");
    }

    std::string array(const json& s, const std::string& name, const std::string& where) {
        check_keywords(s, TYPE_KEYWORDS.at("array"), where);
        std::vector<std::string> prefix;
        if (s.contains("prefixItems")) {
            if (!s["prefixItems"].is_array()) fail(where, "'prefixItems' must be a list");
            for (size_t i = 0; i < s["prefixItems"].size(); i++)
                prefix.push_back(visit(s["prefixItems"][i], name + "-" + std::to_string(i), where + "/prefixItems/" + std::to_string(i)));
        }
        const uint64_t lo = count(s, "minItems", 0, where);
        uint64_t hi = count(s, "maxItems", UINT64_MAX, where);
        std::string item;
        if (s.contains("items") && s["items"].is_boolean() && !s["items"].get<bool>()) hi = std::min<uint64_t>(hi, prefix.size());
        else item = s.contains("items") ? visit(s["items"], name + "-item", where + "/items") : "json-value";
        if (hi < lo) fail(where, "'maxItems' is below 'minItems' (or 'items': false leaves too few)");
        std::function<std::string(uint64_t)> from = [&](uint64_t i) -> std::string {
            const std::string sep = i > 0 ? "\",\" " : "";
            if (i == hi) return "";
            if (i >= prefix.size() && i >= lo) {
                if (hi == UINT64_MAX) return "(" + sep + item + " (\",\" " + item + ")*)?";
                return "(" + sep + item + " (\",\" " + item + "){0," + std::to_string(hi - i - 1) + "})?";
            }
            std::string part = sep + (i < prefix.size() ? prefix[i] : item) + " " + from(i + 1);
            return i >= lo ? "(" + part + ")?" : part;
        };
        return add_rule(name, "\"[\" " + from(0) + " \"]\"");
    }

    uint64_t count(const json& s, const char* key, uint64_t fallback, const std::string& where) const {
        if (!s.contains(key)) return fallback;
        if (!s[key].is_number_unsigned() && !(s[key].is_number_integer() && s[key].get<int64_t>() >= 0))
            fail(where, std::string("'") + key + "' must be a non-negative integer");
        uint64_t v = s[key].get<uint64_t>();
        if (v > 10000) fail(where, std::string("'") + key + "' is too large for a grammar (at most 10000)");
        return v;
    }

    std::string string(const json& s, const std::string& name, const std::string& where) {
        check_keywords(s, TYPE_KEYWORDS.at("string"), where);
        const bool lengths = s.contains("minLength") || s.contains("maxLength");
        if (s.contains("pattern")) {
            if (lengths || s.contains("format")) fail(where, "'pattern' together with 'minLength'/'maxLength'/'format' is not supported");
            if (!s["pattern"].is_string()) fail(where, "'pattern' must be a string");
            return add_rule(name, "\"\\\"\" " + schema::pattern_expr(s["pattern"].get<std::string>()) + " \"\\\"\"");
        }
        if (s.contains("format")) {
            if (lengths) fail(where, "'format' together with 'minLength'/'maxLength' is not supported");
            const std::string f = s["format"].is_string() ? s["format"].get<std::string>() : "";
            std::string body;
            if (f == "date-time") body = FORMATS.at("date") + " \"T\" " + FORMATS.at("time");
            else if (FORMATS.count(f)) body = FORMATS.at(f);
            else fail(where, "'format' '" + f + "' is not supported (date, time, date-time, uuid, email are)");
            return add_rule(name, "\"\\\"\" (" + body + ") \"\\\"\"");
        }
        if (!lengths) return "json-string";
        uint64_t lo = count(s, "minLength", 0, where), hi = count(s, "maxLength", UINT64_MAX, where);
        if (hi < lo) fail(where, "'maxLength' is below 'minLength'");
        std::string rep = hi == UINT64_MAX ? "{" + std::to_string(lo) + ",}" : "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
        return add_rule(name, "\"\\\"\" json-char" + rep + " \"\\\"\"");
    }

    std::string integer(const json& s, const std::string& name, const std::string& where) {
        check_keywords(s, TYPE_KEYWORDS.at("integer"), where);
        // the integers inside each bound: minimum -> ceil, maximum -> floor, exclusive ones one step in
        auto bound = [&](const char* key, int64_t fallback) -> int64_t {
            if (!s.contains(key)) return fallback;
            if (!s[key].is_number()) fail(where, std::string("'") + key + "' must be a number");
            const double v = s[key].get<double>();
            if (std::abs(v) > 1e15) fail(where, std::string("'") + key + "' is beyond ±1e15");
            const std::string k = key;
            return int64_t(k == "minimum" ? std::ceil(v) : k == "maximum" ? std::floor(v)
                           : k == "exclusiveMinimum" ? std::floor(v) + 1 : std::ceil(v) - 1);
        };
        const int64_t LIMIT = 999999999999999;  // an open side stays within 15 digits
        int64_t lo = std::max(bound("minimum", -LIMIT), bound("exclusiveMinimum", -LIMIT));
        int64_t hi = std::min(bound("maximum", LIMIT), bound("exclusiveMaximum", LIMIT));
        if (!s.contains("minimum") && !s.contains("maximum") && !s.contains("exclusiveMinimum") && !s.contains("exclusiveMaximum"))
            return "json-int";
        if (hi < lo) fail(where, "no integer lies between the bounds");
        return add_rule(name, integers_between(lo, hi));
    }

    const json& root_;
    std::map<std::string, std::string>& rules_;
    std::map<std::string, std::string> refs_;       // $ref -> its rule
    std::map<std::string, std::string> ref_names_;  // rule -> its $ref
    // The $ref rules each $ref rule's value can begin with (no character read before them), and the
    // set being filled: none inside an object or array.
    std::map<std::string, std::set<std::string>> heads_of_;
    std::set<std::string>* heads_ = nullptr;
    std::string prefix_;
    int counter_ = 0;
    int depth_ = 0;
};

}  // namespace

std::string json_schema_rules(const std::vector<std::pair<std::string, nlohmann::ordered_json>>& schemas) {
    std::map<std::string, std::string> rules;
    for (const auto& [name, schema] : schemas) Converter(schema, rules).convert(name);
    std::string out;
    for (const auto& [rule, body] : rules) out += rule + " ::= " + body + "\n";
    return out + PRIMITIVES;
}

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return json_schema_rules({{"root", schema}}); }

}  // namespace llm
