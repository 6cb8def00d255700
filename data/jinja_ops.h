// Python's operators on Jinja values (data/chat_template.h): arithmetic with Python's int
// and float rules (1 / 2 is 0.5, 7 // 2 is 3, -7 // 2 is -4, % takes the divisor's sign,
// ** is an int for int operands), + and * on strings and lists, comparisons, `in`,
// indexing and slicing (negative indexes and steps), and jinja2's lookup rules for
// `obj.attr` and `obj[key]` (Note [Jinja attribute lookup] in jinja_ops.cpp).
#pragma once

#include <optional>

#include "data/jinja_ast.h"
#include "data/jinja_value.h"

namespace fitgrad::data::jinja {

// + - * / // % ** (throws with Python's TypeError/ZeroDivisionError wording).
Value arithmetic(BinOp op, const Value& a, const Value& b);
// == != < <= > >= in, not in.
bool compare(BinOp op, const Value& a, const Value& b);
// `item in container`.
bool contains(const Value& container, const Value& item);
Value negate(const Value& v);

// jinja2's environment.getattr (obj.name) and environment.getitem (obj[key]): methods,
// dict keys, list/str indexes; undefined when there is nothing, an error on an undefined obj.
Value get_attribute(const Value& obj, std::string_view name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step], each bound None when not given; undefined when Python would raise a
// TypeError (jinja2 turns that into undefined).
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

}  // namespace fitgrad::data::jinja
