// The parsed form of a Jinja template (data/chat_template.h): expressions and statements as
// jinja2's parser builds them, with filters and tests already resolved to their functions.
// jinja_parser.h builds it; jinja_render.h walks it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/jinja_builtins.h"
#include "data/jinja_value.h"

namespace fitgrad::data::jinja {

enum class BinOp : uint8_t {
  add,
  sub,
  mul,
  div,
  floordiv,
  mod,
  pow,
  eq,
  ne,
  lt,
  le,
  gt,
  ge,
  in,
  not_in
};

struct Expr {
  enum class Kind : uint8_t {
    constant,     // value
    name,         // name
    list,         // kids
    tuple,        // kids
    dict,         // kids: key, value, key, value, ...
    getattr,      // kids[0].name
    getitem,      // kids[0][kids[1]]
    slice,        // kids[0][kids[1]:kids[2]:kids[3]], each bound may be null
    call,         // kids[0](arguments)
    filter,       // kids[0] | name(arguments); kids[0] is block_input in filter blocks
    test,         // kids[0] is name(arguments)
    block_input,  // the text of a {% filter %} or {% set x | f %} block
    neg,          // -kids[0]
    pos,          // +kids[0]
    not_,         // not kids[0]
    and_,         // kids[0] and kids[1]
    or_,          // kids[0] or kids[1]
    binary,       // kids[0] ops[0] kids[1]
    concat,       // kids[0] ~ kids[1] ~ ...
    compare,      // kids[0] ops[0] kids[1] ops[1] kids[2] ..., chained as Python
    cond,         // kids[0] if kids[1] else kids[2] (null: undefined)
  };
  Kind kind;
  int line = 0;
  int height = 1;  // the longest path to a leaf (Note [Jinja nesting bound])
  Value value;
  std::string name;
  std::vector<std::unique_ptr<Expr>> kids;
  // call, filter, test: kids[1 .. 1 + positional) are positional arguments, the rest are
  // keyword arguments named by `keywords`.
  size_t positional = 0;
  std::vector<std::string> keywords;
  std::vector<BinOp> ops;
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};
using ExprPtr = std::unique_ptr<Expr>;

// What set, for and with assign to: a name, a tuple of targets to unpack into, or a
// namespace attribute (`ns.count`).
struct Target {
  enum class Kind : uint8_t { name, tuple, attribute };
  Kind kind = Kind::name;
  std::string name;
  std::string attribute;
  std::vector<Target> items;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind : uint8_t {
    text,          // text
    output,        // {{ exprs[0] }}, or {% print exprs... %}
    if_,           // exprs[i] -> bodies[i]; bodies.back() is the else branch when has_else
    for_,          // for targets[0] in exprs[0] [if exprs[1]]: bodies[0], else bodies[1]
    set,           // targets[0] = exprs[0]
    set_block,     // targets[0] = bodies[0] rendered [| exprs[0] filter chain]
    macro,         // text(params = exprs defaults): bodies[0]
    filter_block,  // bodies[0] rendered | exprs[0]
    with,          // targets[i] = exprs[i] in a new scope: bodies[0]
    break_,
    continue_,
    generation,  // transformers' {% generation %}: bodies[0], its output span recorded
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  std::vector<Target> targets;
  bool has_else = false;
  // macro: parameter names, with exprs[i] the default of params[i] (null: none); whether the
  // body reads `varargs` / `kwargs` (else extra arguments are an error, as in jinja2).
  std::vector<std::string> params;
  bool uses_varargs = false;
  bool uses_kwargs = false;
};

struct Template {
  Body body;
};

}  // namespace fitgrad::data::jinja
