// Internals of the JSON Schema conversion shared by its files (json_schema.cpp, json_schema_pattern.cpp).
#pragma once

#include "llm/grammar.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

namespace llm::schema {

// A GBNF expression for a JSON string's contents (between the quotes) that matches `pattern`.
std::string pattern_expr(std::string_view pattern);
// A GBNF expression for one character of a JSON string's contents (raw or escaped).
std::string json_char_expr();

}  // namespace llm::schema
