// The Jinja parser (jinja_parser.h).
//
// Note [Jinja statements]
// Statements are jinja2's: if/elif/else, for (with else, an `if` filter and unpacking targets),
// set (a name, a tuple, a namespace attribute, or a block with optional filters), macro,
// filter, with, print, break/continue (transformers enables loopcontrols) and transformers'
// generation. A tag ends at "%}", optionally after a colon, and a block's end tag is consumed
// with it.
// Checks made at parse time that jinja2 makes only when the code runs: an unknown filter or
// test, a function that is neither a global nor a macro of the template, a method name that
// no str/dict/list has, break/continue outside a loop. Tags that a single chat template cannot
// use (extends, block, include, import, from, call, autoescape) and recursive loops are
// reported as unsupported. (Unknown filters and tests are caught in jinja_expr_parser.cpp.)
#include "data/jinja_parser.h"

#include <algorithm>

#include "data/jinja_expr_parser.h"
#include "tensor/error.h"

namespace fitgrad::data::jinja {
namespace {

class Parser : public ExprParser {
 public:
  using ExprParser::ExprParser;

  Template run() {
    Template t;
    t.body = subparse({});
    for (const auto& [name, line] : called_)
      if (!is_global(name) && !macros_.count(name))
        fail(line, fmt::format("unknown function '{}' (neither a global nor a macro)", name));
    return t;
  }

 private:
  // Statements up to a `{% name %}` with name in `ends`; stops on that name (after its "{%").
  Body subparse(Names ends) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == T::eof) {
        if (ends.size() == 0) return body;
        std::string want;
        for (const std::string_view e : ends)
          want += (want.empty() ? "'" : ", '") + std::string(e) + "'";
        fail(t.line, "unexpected end of template; expected " + want);
      }
      if (t.type == T::text) {
        auto s = stmt(Stmt::Kind::text, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == T::var_begin) {
        next();
        auto s = stmt(Stmt::Kind::output, t.line);
        s->exprs.push_back(parse_tuple(false, true, {}, false));
        expect(T::var_end, "'}}'");
        body.push_back(std::move(s));
      } else if (t.type == T::block_begin) {
        next();
        if (cur().type == T::name && contains(ends, cur().text)) return body;
        body.push_back(statement());
        expect(T::block_end, "'%}'");
      } else {
        fail(t.line, "unexpected " + describe(t));
      }
    }
  }

  static std::unique_ptr<Stmt> stmt(Stmt::Kind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  // The body of a block statement after its opening tag, up to one of `ends` (consumed).
  Body block_body(Names ends) {
    const Nested nested(*this);
    end_of_tag();
    Body body = subparse(ends);
    return body;
  }

  std::unique_ptr<Stmt> statement() {
    const Token& t = cur();
    if (t.type != T::name) fail(t.line, "expected a statement, got " + describe(t));
    const std::string tag = t.text;
    const int line = t.line;
    next();
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "filter") return parse_filter_block(line);
    if (tag == "with") return parse_with(line);
    if (tag == "generation") {
      auto s = stmt(Stmt::Kind::generation, line);
      s->bodies.push_back(block_body({"endgeneration"}));
      next();
      return s;
    }
    if (tag == "print") {
      auto s = stmt(Stmt::Kind::output, line);
      while (cur().type != T::block_end) {
        if (!s->exprs.empty()) expect_op(",");
        s->exprs.push_back(parse_expression(true));
      }
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(line, fmt::format("'{}' outside a for loop", tag));
      return stmt(tag == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_, line);
    }
    if (contains({"extends", "block", "include", "import", "from", "call", "autoescape"}, tag))
      fail(line, fmt::format("unsupported tag '{}'", tag));
    if (contains({"endif", "endfor", "endset", "endmacro", "endfilter", "endwith", "endgeneration",
                  "elif", "else", "endraw", "endblock", "endcall"},
                 tag))
      fail(line, fmt::format("unexpected tag '{}'", tag));
    fail(line, fmt::format("unknown tag '{}'", tag));
  }

  std::unique_ptr<Stmt> parse_if(int line) {
    auto s = stmt(Stmt::Kind::if_, line);
    while (true) {
      s->exprs.push_back(parse_tuple(false, false, {}, false));
      s->bodies.push_back(block_body({"elif", "else", "endif"}));
      const std::string which = next().text;
      if (which == "elif") continue;
      if (which == "else") {
        s->has_else = true;
        s->bodies.push_back(block_body({"endif"}));
        next();
      }
      return s;
    }
  }

  std::unique_ptr<Stmt> parse_for(int line) {
    auto s = stmt(Stmt::Kind::for_, line);
    s->targets.push_back(assign_target(true, {"in"}));
    if (!skip_name("in")) fail(cur().line, "expected 'in', got " + describe(cur()));
    s->exprs.push_back(parse_tuple(false, false, {"recursive"}, false));
    s->exprs.push_back(skip_name("if") ? parse_expression(true) : nullptr);
    if (is_name("recursive")) fail(cur().line, "unsupported recursive for loop");
    ++loop_depth_;
    s->bodies.push_back(block_body({"endfor", "else"}));
    --loop_depth_;
    if (next().text == "else") {
      s->has_else = true;
      s->bodies.push_back(block_body({"endfor"}));
      next();
    } else {
      s->bodies.emplace_back();
    }
    return s;
  }

  std::unique_ptr<Stmt> parse_set(int line) {
    Target target;
    if (cur().type == T::name && look().type == T::op && look().text == ".") {
      target.kind = Target::Kind::attribute;
      target.name = next().text;
      next();
      target.attribute = expect_name();
    } else {
      target = assign_target(true, {});
    }
    if (skip_op("=")) {
      auto s = stmt(Stmt::Kind::set, line);
      s->targets.push_back(std::move(target));
      s->exprs.push_back(parse_tuple(false, true, {}, false));
      return s;
    }
    auto s = stmt(Stmt::Kind::set_block, line);
    s->targets.push_back(std::move(target));
    s->exprs.push_back(is_op("|") ? parse_filter(block_input(line), false) : nullptr);
    s->bodies.push_back(block_body({"endset"}));
    next();
    return s;
  }

  std::unique_ptr<Stmt> parse_macro(int line) {
    auto s = stmt(Stmt::Kind::macro, line);
    s->text = expect_name();
    macros_.insert(s->text);
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      s->params.push_back(expect_name());
      if (skip_op("=")) {
        s->exprs.push_back(parse_expression(true));
      } else {
        if (std::any_of(s->exprs.begin(), s->exprs.end(),
                        [](const ExprPtr& e) { return e != nullptr; }))
          fail(cur().line, "non-default argument follows default argument");
        s->exprs.push_back(nullptr);
      }
    }
    next();
    const int saved_depth = loop_depth_;
    loop_depth_ = 0;
    macro_reads_.emplace_back();
    s->bodies.push_back(block_body({"endmacro"}));
    next();
    s->uses_varargs = macro_reads_.back().count("varargs") > 0;
    s->uses_kwargs = macro_reads_.back().count("kwargs") > 0;
    macro_reads_.pop_back();
    loop_depth_ = saved_depth;
    return s;
  }

  std::unique_ptr<Stmt> parse_filter_block(int line) {
    auto s = stmt(Stmt::Kind::filter_block, line);
    s->exprs.push_back(parse_filter(block_input(line), true));
    s->bodies.push_back(block_body({"endfilter"}));
    next();
    return s;
  }

  std::unique_ptr<Stmt> parse_with(int line) {
    auto s = stmt(Stmt::Kind::with, line);
    while (cur().type != T::block_end) {
      if (!s->targets.empty()) expect_op(",");
      s->targets.push_back(assign_target(true, {}));
      expect_op("=");
      s->exprs.push_back(parse_expression(true));
    }
    s->bodies.push_back(block_body({"endwith"}));
    next();
    return s;
  }

  Target to_target(const Expr& e) {
    Target t;
    if (e.kind == Expr::Kind::name) {
      t.name = e.name;
      return t;
    }
    if (e.kind != Expr::Kind::tuple) fail(e.line, "can't assign to this expression");
    t.kind = Target::Kind::tuple;
    for (const auto& k : e.kids) t.items.push_back(to_target(*k));
    return t;
  }

  Target assign_target(bool with_tuple, Names extra_end) {
    const int line = cur().line;
    const ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
    if (e->kind == Expr::Kind::name &&
        contains({"true", "false", "none", "True", "False", "None"}, e->name))
      fail(line, fmt::format("can't assign to '{}'", e->name));
    return to_target(*e);
  }

  int loop_depth_ = 0;
  std::set<std::string> macros_;
};

}  // namespace

Template parse_template(std::string_view source) { return Parser(source).run(); }

}  // namespace fitgrad::data::jinja
