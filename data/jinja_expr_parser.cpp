// The Jinja expression parser (jinja_expr_parser.h).
//
// Note [Jinja grammar]
// The grammar is jinja2's, loosest binding first:
//   a if c else b (no else: undefined) / or / and / not / comparisons (== != < <= > >= in,
//   not in; chained as in Python) / + - / ~ / * / // % / ** (left-associative, unlike
//   Python) / unary - + / primary with postfix .attr [index] [a:b:c] (call), then filters
//   `| f(args)`, tests `is [not] t(args)` and calls, which bind tighter than any operator:
//   `a + b | length` is a + (b | length), `-x | abs` is abs(-x).
// A test takes one argument without parentheses (`x is divisibleby 3`). Adjacent string
// literals join. `{{ a, b }}` is a tuple. A for loop's iterable and an if's condition are
// parsed without the conditional expression, because `if` there filters the loop.
#include "data/jinja_expr_parser.h"

namespace fitgrad::data::jinja {

// Note [Jinja nesting bound]
// The parser and the renderer recurse: each bracket, unary operator and block costs the parser
// a dozen frames, and each level of the tree a frame or two of the renderer and of the tree's
// destructor. So 100,000 nested parentheses or 20,000 nested {% if %} blocks ran the stack
// out. The parser therefore counts how deep it is (Nested: expressions, unary operators,
// blocks) and refuses more than kMaxTemplateNesting levels, and it keeps each expression's
// height (the longest path to a leaf, which a chain of `+`, filters or attributes grows by one
// per link, with no recursion of the parser) and refuses a tree higher than
// kMaxExpressionHeight, both naming the line. jinja2 fails far earlier (RecursionError at
// about 100 nested parentheses or blocks and 500 links of a chain), so no template that
// transformers renders is refused. The renderer's own bound: Note [Jinja render bounds].
ExprParser::Nested::Nested(ExprParser& p) : p_(p) {
  if (++p_.nesting_ > kMaxTemplateNesting) {
    --p_.nesting_;
    p_.fail(p_.cur().line, fmt::format("the template nests deeper than {} levels (brackets, "
                                       "unary operators, blocks); jinja2 stops far earlier",
                                       kMaxTemplateNesting));
  }
}

void ExprParser::grow(Expr& parent, const Expr* kid) {
  if (!kid || kid->height < parent.height) return;
  parent.height = kid->height + 1;
  if (parent.height > kMaxExpressionHeight)
    fail(parent.line, fmt::format("an expression deeper than {} levels (a chain of that many "
                                  "operators, filters, attributes or calls); split it with "
                                  "{{% set %}}",
                                  kMaxExpressionHeight));
}

void ExprParser::adopt(Expr& parent, ExprPtr kid) {
  grow(parent, kid.get());
  parent.kids.push_back(std::move(kid));
}

ExprPtr ExprParser::node(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr ExprParser::block_input(int line) { return node(Expr::Kind::block_input, line); }

ExprPtr ExprParser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExprParser::parse_condexpr() {
  const Nested nested(*this);
  ExprPtr e = parse_or();
  while (is_name("if")) {
    const int line = next().line;
    auto c = node(Expr::Kind::cond, line);
    ExprPtr test = parse_or();
    ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
    adopt(*c, std::move(e));
    adopt(*c, std::move(test));
    adopt(*c, std::move(otherwise));
    e = std::move(c);
  }
  return e;
}

ExprPtr ExprParser::binary_chain(Expr::Kind kind, std::string_view word,
                                 ExprPtr (ExprParser::*sub)()) {
  ExprPtr left = (this->*sub)();
  while (is_name(word)) {
    auto e = node(kind, next().line);
    adopt(*e, std::move(left));
    adopt(*e, (this->*sub)());
    left = std::move(e);
  }
  return left;
}
ExprPtr ExprParser::parse_or() {
  return binary_chain(Expr::Kind::or_, "or", &ExprParser::parse_and);
}
ExprPtr ExprParser::parse_and() {
  return binary_chain(Expr::Kind::and_, "and", &ExprParser::parse_not);
}

ExprPtr ExprParser::parse_not() {
  if (is_name("not")) {
    const Nested nested(*this);
    auto e = node(Expr::Kind::not_, next().line);
    adopt(*e, parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr ExprParser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  ExprPtr cmp;
  while (true) {
    BinOp op;
    if (is_op("=="))
      op = BinOp::eq;
    else if (is_op("!="))
      op = BinOp::ne;
    else if (is_op("<"))
      op = BinOp::lt;
    else if (is_op("<="))
      op = BinOp::le;
    else if (is_op(">"))
      op = BinOp::gt;
    else if (is_op(">="))
      op = BinOp::ge;
    else if (is_name("in"))
      op = BinOp::in;
    else if (is_name("not") && look().type == T::name && look().text == "in") {
      next();
      op = BinOp::not_in;
    } else {
      break;
    }
    next();
    if (!cmp) {
      cmp = node(Expr::Kind::compare, line);
      adopt(*cmp, std::move(first));
    }
    cmp->ops.push_back(op);
    adopt(*cmp, parse_math1());
  }
  return cmp ? std::move(cmp) : std::move(first);
}

ExprPtr ExprParser::binop(BinOp op, ExprPtr a, ExprPtr b, int line) {
  auto e = node(Expr::Kind::binary, line);
  e->ops.push_back(op);
  adopt(*e, std::move(a));
  adopt(*e, std::move(b));
  return e;
}

ExprPtr ExprParser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& t = next();
    left = binop(t.text == "+" ? BinOp::add : BinOp::sub, std::move(left), parse_concat(), t.line);
  }
  return left;
}

ExprPtr ExprParser::parse_concat() {
  const int line = cur().line;
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  auto e = node(Expr::Kind::concat, line);
  adopt(*e, std::move(first));
  while (skip_op("~")) adopt(*e, parse_math2());
  return e;
}

ExprPtr ExprParser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& t = next();
    const BinOp op = t.text == "*"    ? BinOp::mul
                     : t.text == "/"  ? BinOp::div
                     : t.text == "//" ? BinOp::floordiv
                                      : BinOp::mod;
    left = binop(op, std::move(left), parse_pow(), t.line);
  }
  return left;
}

ExprPtr ExprParser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const int line = next().line;
    left = binop(BinOp::pow, std::move(left), parse_unary(true), line);
  }
  return left;
}

ExprPtr ExprParser::parse_unary(bool with_filter) {
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const Nested nested(*this);
    const Token& t = next();
    e = node(t.text == "-" ? Expr::Kind::neg : Expr::Kind::pos, t.line);
    adopt(*e, parse_unary(false));
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr ExprParser::parse_primary() {
  const Token& t = cur();
  if (t.type == T::name) {
    next();
    if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
      auto e = node(Expr::Kind::constant, t.line);
      e->value = Value::boolean(t.text == "true" || t.text == "True");
      return e;
    }
    if (t.text == "none" || t.text == "None") {
      auto e = node(Expr::Kind::constant, t.line);
      e->value = Value::none();
      return e;
    }
    for (auto& reads : macro_reads_) reads.insert(t.text);
    auto e = node(Expr::Kind::name, t.line);
    e->name = t.text;
    return e;
  }
  if (t.type == T::string) {
    std::string s;
    const int line = t.line;
    while (cur().type == T::string) s += next().text;
    auto e = node(Expr::Kind::constant, line);
    e->value = Value::string(std::move(s));
    return e;
  }
  if (t.type == T::integer || t.type == T::real) {
    next();
    auto e = node(Expr::Kind::constant, t.line);
    e->value = t.type == T::integer ? Value::integer(t.integer) : Value::real(t.real);
    return e;
  }
  if (is_op("(")) {
    next();
    ExprPtr e = parse_tuple(false, true, {}, true);
    expect_op(")");
    return e;
  }
  if (is_op("[")) {
    auto e = node(Expr::Kind::list, next().line);
    while (!is_op("]")) {
      if (!e->kids.empty()) expect_op(",");
      if (is_op("]")) break;
      adopt(*e, parse_expression(true));
    }
    next();
    return e;
  }
  if (is_op("{")) {
    auto e = node(Expr::Kind::dict, next().line);
    while (!is_op("}")) {
      if (!e->kids.empty()) expect_op(",");
      if (is_op("}")) break;
      adopt(*e, parse_expression(true));
      expect_op(":");
      adopt(*e, parse_expression(true));
    }
    next();
    return e;
  }
  fail(t.line, "unexpected " + describe(t));
}

bool ExprParser::tuple_end(Names extra_end) const {
  if (cur().type == T::var_end || cur().type == T::block_end || is_op(")")) return true;
  return cur().type == T::name && contains(extra_end, cur().text);
}

ExprPtr ExprParser::parse_tuple(bool simplified, bool with_condexpr, Names extra_end,
                                bool explicit_parens) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (tuple_end(extra_end)) break;
    items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (is_op(","))
      is_tuple = true;
    else
      break;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail(line, "expected an expression, got " + describe(cur()));
  }
  auto e = node(Expr::Kind::tuple, line);
  for (ExprPtr& item : items) adopt(*e, std::move(item));
  return e;
}

ExprPtr ExprParser::parse_postfix(ExprPtr e) {
  while (true) {
    if (is_op(".") || is_op("["))
      e = parse_subscript(std::move(e));
    else if (is_op("("))
      e = parse_call(std::move(e));
    else
      return e;
  }
}

ExprPtr ExprParser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|"))
      e = parse_filter(std::move(e), false);
    else if (is_name("is"))
      e = parse_test(std::move(e));
    else if (is_op("("))
      e = parse_call(std::move(e));
    else
      return e;
  }
}

ExprPtr ExprParser::parse_subscript(ExprPtr obj) {
  const Token& t = next();
  if (t.text == ".") {
    const Token& attr = next();
    if (attr.type == T::name) {
      auto e = node(Expr::Kind::getattr, t.line);
      e->name = attr.text;
      adopt(*e, std::move(obj));
      return e;
    }
    if (attr.type != T::integer) fail(attr.line, "expected a name or number after '.'");
    auto e = node(Expr::Kind::getitem, t.line);
    adopt(*e, std::move(obj));
    auto index = node(Expr::Kind::constant, attr.line);
    index->value = Value::integer(attr.integer);
    adopt(*e, std::move(index));
    return e;
  }
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  next();
  if (args.size() == 1 && args[0]->kind == Expr::Kind::slice) {
    grow(*args[0], obj.get());
    args[0]->kids[0] = std::move(obj);
    return std::move(args[0]);
  }
  auto e = node(Expr::Kind::getitem, t.line);
  adopt(*e, std::move(obj));
  if (args.size() == 1) {
    adopt(*e, std::move(args[0]));
  } else {
    auto tuple = node(Expr::Kind::tuple, t.line);
    for (ExprPtr& arg : args) adopt(*tuple, std::move(arg));
    adopt(*e, std::move(tuple));
  }
  return e;
}

// One subscript: an expression, or a slice a:b:c (kids[0] left for the object).
ExprPtr ExprParser::parse_subscribed() {
  const int line = cur().line;
  ExprPtr start;
  if (!is_op(":")) {
    start = parse_expression(true);
    if (!is_op(":")) return start;
  }
  next();
  auto e = node(Expr::Kind::slice, line);
  adopt(*e, nullptr);
  adopt(*e, std::move(start));
  adopt(*e, is_op("]") || is_op(",") || is_op(":") ? nullptr : parse_expression(true));
  ExprPtr step;
  if (skip_op(":") && !is_op("]") && !is_op(",")) step = parse_expression(true);
  adopt(*e, std::move(step));
  return e;
}

// (args) into e, after its existing kids.
void ExprParser::parse_call_args(Expr& e) {
  expect_op("(");
  while (!is_op(")")) {
    if (e.positional + e.keywords.size() > 0) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) fail(cur().line, "unsupported *args / **kwargs in a call");
    if (cur().type == T::name && look().type == T::op && look().text == "=") {
      e.keywords.push_back(next().text);
      next();
      adopt(e, parse_expression(true));
    } else {
      if (!e.keywords.empty()) fail(cur().line, "positional argument after a keyword argument");
      adopt(e, parse_expression(true));
      ++e.positional;
    }
  }
  next();
}

ExprPtr ExprParser::parse_call(ExprPtr callee) {
  const int line = cur().line;
  if (callee->kind == Expr::Kind::name) {
    if (callee->name == "loop") fail(line, "unsupported recursive loop call loop(...)");
    called_.emplace_back(callee->name, line);
  } else if (callee->kind == Expr::Kind::getattr && !is_method_name(callee->name) &&
             callee->name != "cycle" && callee->name != "changed") {
    fail(line, fmt::format("unknown method '{}'", callee->name));
  }
  auto e = node(Expr::Kind::call, line);
  adopt(*e, std::move(callee));
  parse_call_args(*e);
  return e;
}

std::string ExprParser::dotted_name() {
  std::string name = expect_name();
  while (skip_op(".")) {
    name += '.';
    name += expect_name();
  }
  return name;
}

ExprPtr ExprParser::parse_filter(ExprPtr input, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    const int line = cur().line;
    auto e = node(Expr::Kind::filter, line);
    e->name = dotted_name();
    e->filter = find_filter(e->name);
    if (!e->filter) fail(line, fmt::format("unknown filter '{}'", e->name));
    adopt(*e, std::move(input));
    if (is_op("(")) parse_call_args(*e);
    input = std::move(e);
  }
  return input;
}

ExprPtr ExprParser::parse_test(ExprPtr value) {
  const int line = next().line;
  const bool negated = skip_name("not");
  auto e = node(Expr::Kind::test, line);
  e->name = dotted_name();
  e->test = find_test(e->name);
  if (!e->test) fail(line, fmt::format("unknown test '{}'", e->name));
  adopt(*e, std::move(value));
  if (is_op("(")) {
    parse_call_args(*e);
  } else if ((cur().type == T::name || cur().type == T::string || cur().type == T::integer ||
              cur().type == T::real || is_op("(") || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail(cur().line, "you cannot chain multiple tests with 'is'");
    adopt(*e, parse_postfix(parse_primary()));
    e->positional = 1;
  }
  if (!negated) return e;
  auto n = node(Expr::Kind::not_, line);
  adopt(*n, std::move(e));
  return n;
}

}  // namespace fitgrad::data::jinja
