// Tokens to the statement tree, with jinja2's operator precedence (parser.py): conditional
// expressions, or, and, not, comparisons (chained, in / not in), + -, ~, * / // %, **, unary
// minus, then postfix (attribute, subscript, slice, call), filters and tests. Tags: if/elif/else,
// for (with an `if` filter and else), set (names, tuples, namespace attributes, blocks), macro,
// filter, break/continue, generation (rendered as its body), raw (done by the lexer). Anything else
// is a TemplateError naming the tag and its line. Nesting deeper than kMaxDepth is refused so a
// hostile template cannot exhaust the stack.
#pragma once
#include <vector>

#include "data/jinja/ast.h"
#include "data/jinja/lexer.h"

namespace nemotron::data::jinja {

inline constexpr int kMaxParseDepth = 200;

Body parse(const std::vector<Token>& tokens);

}  // namespace nemotron::data::jinja
