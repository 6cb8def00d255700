// The Jinja lexer (data/chat_template.h): template text becomes a flat token stream of
// text, {{ ... }} and {% ... %} tags and the tokens inside them. Comments disappear here, and
// all whitespace control is applied here, as in jinja2 with transformers' settings
// (trim_blocks, lstrip_blocks; Note [Jinja whitespace control] in jinja_lexer.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fitgrad::data::jinja {

struct Token {
  enum class Type : uint8_t {
    text,
    var_begin,
    var_end,
    block_begin,
    block_end,
    name,
    string,   // `text` holds the value, escapes resolved
    integer,  // `integer` holds the value
    real,     // `real` holds the value
    op,       // `text` holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
    eof,
  };
  Type type;
  int line;
  std::string text;
  int64_t integer = 0;
  double real = 0;
};

// Throws fitgrad::Error "line N: ..." for an unterminated comment, tag or string, an
// unexpected character, or unbalanced brackets.
std::vector<Token> tokenize(std::string_view source);

}  // namespace fitgrad::data::jinja
