// The expression half of the Jinja parser (jinja_parser.h): jinja2's expression grammar over
// the lexer's tokens (Note [Jinja grammar] in jinja_expr_parser.cpp), and the token stream that
// the statement parser in jinja_parser.cpp shares. Internal to the parser.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "data/jinja_ast.h"
#include "data/jinja_lexer.h"
#include "tensor/error.h"

namespace fitgrad::data::jinja {

using Names = std::initializer_list<std::string_view>;

inline bool contains(Names names, std::string_view s) {
  for (const std::string_view n : names)
    if (n == s) return true;
  return false;
}

// Note [Jinja nesting bound] in jinja_expr_parser.cpp.
inline constexpr int kMaxTemplateNesting = 256;
inline constexpr int kMaxExpressionHeight = 1000;

class ExprParser {
 public:
  explicit ExprParser(std::string_view source) : tokens_(tokenize(source)) {}

 protected:
  using T = Token::Type;

  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(std::string_view op) const { return cur().type == T::op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == T::name && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(int line, const std::string& message) const {
    throw Error(fmt::format("line {}: {}", line, message));
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case T::text: return "text";
      case T::var_begin: return "'{{'";
      case T::var_end: return "'}}'";
      case T::block_begin: return "'{%'";
      case T::block_end: return "'%}'";
      case T::name: return "'" + t.text + "'";
      case T::string: return "a string";
      case T::integer:
      case T::real: return "a number";
      case T::op: return "'" + t.text + "'";
      case T::eof: return "the end of the template";
    }
    return "?";
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(cur().line, fmt::format("expected '{}', got {}", op, describe(cur())));
  }
  void expect(T type, std::string_view what) {
    if (cur().type != type)
      fail(cur().line, fmt::format("expected {}, got {}", what, describe(cur())));
    next();
  }
  std::string expect_name() {
    if (cur().type != T::name)
      fail(cur().line, fmt::format("expected a name, got {}", describe(cur())));
    return next().text;
  }
  // The end of a statement's opening tag (jinja2 allows a colon before it).
  void end_of_tag() {
    skip_op(":");
    expect(T::block_end, "'%}'");
  }

  // One level of the parser's nesting, while it lives; throws past kMaxTemplateNesting.
  class Nested {
   public:
    explicit Nested(ExprParser& p);
    ~Nested() { --p_.nesting_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;

   private:
    ExprParser& p_;
  };

  // `kid` (may be null) becomes a child of `parent`: grow raises parent's height to cover it,
  // throwing past kMaxExpressionHeight; adopt also appends it to parent.kids.
  void grow(Expr& parent, const Expr* kid);
  void adopt(Expr& parent, ExprPtr kid);
  ExprPtr node(Expr::Kind kind, int line);
  ExprPtr block_input(int line);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr binary_chain(Expr::Kind kind, std::string_view word, ExprPtr (ExprParser::*sub)());
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binop(BinOp op, ExprPtr a, ExprPtr b, int line);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  bool tuple_end(Names extra_end) const;
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, Names extra_end, bool explicit_parens);
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_filter_expr(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  ExprPtr parse_subscribed();
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  std::string dotted_name();
  ExprPtr parse_filter(ExprPtr input, bool start_inline);
  ExprPtr parse_test(ExprPtr value);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
  // Names called as functions, with their lines: checked once all macros are known.
  std::vector<std::pair<std::string, int>> called_;
  // For each macro being parsed, the names its body reads (varargs, kwargs).
  std::vector<std::set<std::string>> macro_reads_;
};

}  // namespace fitgrad::data::jinja
