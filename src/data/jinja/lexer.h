// The template source as jinja2's lexer cuts it, configured as transformers configures it
// (trim_blocks, lstrip_blocks, keep_trailing_newline off): text between tags with the whitespace
// control already applied ({%- -%} strip all whitespace, {%+ keeps the indent lstrip_blocks would
// remove, a block or comment tag eats one newline after it), then the tokens inside each
// {{ }} / {% %} tag. Comments vanish; {% raw %} bodies become text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nemotron::data::jinja {

struct Token {
  enum class Type { text, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };
  Type type;
  std::string text;  // text, a name, an operator, a string literal's decoded value
  int64_t i = 0;
  double f = 0;
  int line = 1;
};

// Throws TemplateError (with the line) on an unterminated tag, string or comment.
std::vector<Token> tokenize(std::string_view source);

}  // namespace nemotron::data::jinja
