// The Jinja parser (data/chat_template.h): tokens (jinja_lexer.h) to a Template
// (jinja_ast.h), with jinja2's grammar and operator precedence (Note [Jinja grammar] in
// jinja_parser.cpp). Everything that can be checked before rendering is: unknown or
// unsupported tags, filters, tests, functions and methods are errors naming the line.
#pragma once

#include <string_view>

#include "data/jinja_ast.h"

namespace fitgrad::data::jinja {

// Throws fitgrad::Error "line N: ..." for a syntax error or an unsupported construct.
Template parse_template(std::string_view source);

}  // namespace fitgrad::data::jinja
