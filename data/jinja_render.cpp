// The Jinja renderer (jinja_render.h).
//
// Note [Jinja scopes]
// jinja2's scoping, which templates depend on:
//   - `if` opens no scope: a variable set inside it is seen after it.
//   - Each iteration of a `for` runs in a fresh scope under the enclosing one: a variable set
//     in the body is gone at the next iteration and after the loop (hence namespace()).
//     `loop` and the loop variables live there too; `else` runs in its own scope.
//   - A macro runs in a new scope under the scope it was defined in (not the caller's),
//     reading that scope's variables as they are when it is called.
//   - {% set %} blocks, {% filter %} blocks, {% with %} and {% generation %} bodies render in
//     a scope of their own.
//   - Template variables shadow the globals (range, namespace, raise_exception, ...).
//
// Note [Generation spans]
// transformers' AssistantTracker renders a {% generation %} body and records
// (start, start + len(body)) where start is the length of everything the template has
// yielded so far. Two consequences are kept here: the offsets count the top-level output
// (inside a macro or a set block the body's text lands elsewhere, but the offsets still
// count the top level), and a block is not recorded when nothing has been output and no
// span recorded yet (the tracker tests `rendered_blocks or generation_indices`, both
// empty). fitgrad's offsets are bytes of the UTF-8 text; Python's count code points.
//
// Note [Jinja render bounds]
// A template is a program, and a hostile or broken one may loop for ever, recurse without
// end or build text without end; rendering it must still end in a clear error naming the
// template and line (ChatTemplate::render adds both) or stop on a signal. So every statement
// and expression rendered is a Step, which
//   - counts the depth of the renderer's recursion and refuses more than kMaxRenderDepth
//     nested steps: jinja2's RecursionError, which a macro that calls itself without end
//     meets (jinja2 stops at about 180 nested macro calls, each of which is a few steps
//     here, so no template jinja2 renders is refused);
//   - counts the steps of the whole rendering and refuses more than kMaxRenderSteps (the
//     real templates of tests/golden/chat_templates render a 10,000-message conversation,
//     far beyond any model's context, within it; Qwen3's, the costliest, stops between
//     10,000 and 40,000 messages; two nested range(100000) loops would take 10^10 steps);
//   - is an interruption point (Note [Interruption points]), so SIGINT stops a long
//     rendering within a second: the flag is read at every step, since one step (a filter
//     over 64 MiB of text) may take a tenth of a second.
// The text a template builds is bounded too: no string above kMaxTextBytes, no list above
// kMaxItems (Value checks itself; repeating and padding check before they build), and the
// output checked as it grows. So is a value's depth: lists and dicts know theirs
// (kMaxValueDepth), and printing counts its own, for namespaces that hold namespaces. A
// namespace can hold itself or a chain of 100,000 others, which reference counting would
// leak or free by a recursion as deep; so the Renderer keeps every namespace() until the
// rendering ends, then clears them all before dropping them, one level each. The parser's
// bound is Note [Jinja nesting bound].
#include "data/jinja_render.h"

#include <algorithm>

#include "data/jinja_builtins.h"
#include "data/jinja_ops.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::data::jinja {
namespace {

class Macro : public Object {
 public:
  Macro(const Stmt* def, std::weak_ptr<Scope> closure) : def_(def), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro '" + def_->text + "'>"; }
  bool callable() const override { return true; }
  Value call(Renderer& renderer, const Args& args) const override {
    const std::shared_ptr<Scope> closure = closure_.lock();
    FG_CHECK(closure, "macro '{}' is called outside the scope that defined it", def_->text);
    return renderer.call_macro(*def_, closure, args);
  }

 private:
  const Stmt* def_;
  std::weak_ptr<Scope> closure_;  // weak: the scope holds the macro
};

class Loop : public Object, public std::enable_shared_from_this<Loop> {
 public:
  explicit Loop(std::vector<Value> items) : items_(std::move(items)) {}
  size_t index = 0;
  const std::vector<Value>& items() const { return items_; }

  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return fmt::format("<LoopContext {}/{}>", index + 1, items_.size());
  }
  Value attr(std::string_view name) const override {
    const auto n = int64_t(items_.size()), i = int64_t(index);
    if (name == "index") return Value::integer(i + 1);
    if (name == "index0") return Value::integer(i);
    if (name == "revindex") return Value::integer(n - i);
    if (name == "revindex0") return Value::integer(n - i - 1);
    if (name == "first") return Value::boolean(i == 0);
    if (name == "last") return Value::boolean(i == n - 1);
    if (name == "length") return Value::integer(n);
    if (name == "depth") return Value::integer(1);
    if (name == "depth0") return Value::integer(0);
    if (name == "previtem")
      return i > 0 ? items_[index - 1] : Value::undefined("there is no previous item");
    if (name == "nextitem")
      return i + 1 < n ? items_[index + 1] : Value::undefined("there is no next item");
    if (name == "cycle" || name == "changed") {
      auto self = std::const_pointer_cast<Loop>(shared_from_this());
      if (name == "cycle") {
        return Value::object(std::make_shared<Function>("cycle", [self](Renderer&, const Args& a) {
          a.expect("loop.cycle", SIZE_MAX, {});
          FG_CHECK(!a.positional.empty(), "no items for cycling given");
          return a.positional[self->index % a.positional.size()];
        }));
      }
      return Value::object(std::make_shared<Function>("changed", [self](Renderer&, const Args& a) {
        a.expect("loop.changed", SIZE_MAX, {});
        const Value now = Value::tuple(a.positional);
        const bool changed = !self->has_last_ || !equal(self->last_, now);
        self->last_ = now;
        self->has_last_ = true;
        return Value::boolean(changed);
      }));
    }
    return Object::attr(name);
  }

 private:
  std::vector<Value> items_;
  Value last_;
  bool has_last_ = false;
};

// Restores a renderer member when a nested rendering ends.
template <class T>
class Restore {
 public:
  Restore(T& slot, T value) : slot_(slot), saved_(std::move(slot)) { slot_ = std::move(value); }
  ~Restore() { slot_ = std::move(saved_); }
  Restore(const Restore&) = delete;
  Restore& operator=(const Restore&) = delete;

 private:
  T& slot_;
  T saved_;
};

std::shared_ptr<Scope> child_of(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

}  // namespace

const Value* Scope::find(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    for (const auto& [key, value] : s->vars)
      if (key == name) return &value;
  return nullptr;
}

void Scope::set(std::string_view name, Value value) {
  for (auto& [key, v] : vars) {
    if (key == name) {
      v = std::move(value);
      return;
    }
  }
  vars.emplace_back(std::string(name), std::move(value));
}

void Renderer::tick() {
  interruption_point();  // Note [Interruption points]
  ++steps_;
  FG_CHECK(steps_ <= kMaxRenderSteps,
           "the template takes more than {} steps to render (a loop that does not end?)",
           kMaxRenderSteps);
}

Renderer::Step::Step(Renderer& r) : r_(r) {
  r_.tick();
  if (++r_.depth_ <= kMaxRenderDepth) return;
  --r_.depth_;
  if (r_.macros_.empty())
    throw Error(fmt::format("maximum recursion depth exceeded: more than {} nested steps",
                            kMaxRenderDepth));
  throw Error(
      fmt::format("maximum recursion depth exceeded in macro '{}' ({} nested macro "
                  "calls; jinja2 raises RecursionError)",
                  r_.macros_.back()->text, r_.macros_.size()));
}

Renderer::~Renderer() {
  for (const auto& ns : namespaces_) ns->clear();
}

void Renderer::check_output(const std::string& text) const {
  check_text(text.size(), "the rendered text");
}

void Renderer::render(const Template& t, std::shared_ptr<Scope> root, std::string& out,
                      std::vector<std::pair<size_t, size_t>>& spans) {
  scope_ = std::move(root);
  out_ = root_ = &out;
  spans_ = &spans;
  exec_body(t.body);
}

Renderer::Flow Renderer::exec_body(const Body& body) {
  for (const auto& s : body) {
    const Flow f = exec(*s);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

std::string Renderer::capture(const Body& body) {
  std::string text;
  Restore<std::shared_ptr<Scope>> scope(scope_, child_of(scope_));
  Restore<std::string*> out(out_, &text);
  exec_body(body);
  return text;
}

Renderer::Flow Renderer::exec(const Stmt& s) {
  const Step step(*this);
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::text:
      *out_ += s.text;
      check_output(*out_);
      break;
    case Stmt::Kind::output:
      for (const auto& e : s.exprs) append_str(eval(*e), *out_);
      check_output(*out_);
      break;
    case Stmt::Kind::if_:
      for (size_t i = 0; i < s.exprs.size(); ++i)
        if (eval(*s.exprs[i]).truthy()) return exec_body(s.bodies[i]);
      if (s.has_else) return exec_body(s.bodies.back());
      break;
    case Stmt::Kind::for_: return exec_for(s);
    case Stmt::Kind::set: assign(s.targets[0], eval(*s.exprs[0]), *scope_); break;
    case Stmt::Kind::set_block: {
      Value text = Value::string(capture(s.bodies[0]));
      if (s.exprs[0]) {
        Restore<Value> input(block_input_, std::move(text));
        text = eval(*s.exprs[0]);
      }
      assign(s.targets[0], text, *scope_);
      break;
    }
    case Stmt::Kind::filter_block: {
      Restore<Value> input(block_input_, Value::string(capture(s.bodies[0])));
      append_str(eval(*s.exprs[0]), *out_);
      check_output(*out_);
      break;
    }
    case Stmt::Kind::with: {
      auto inner = child_of(scope_);
      for (size_t i = 0; i < s.targets.size(); ++i) assign(s.targets[i], eval(*s.exprs[i]), *inner);
      Restore<std::shared_ptr<Scope>> scope(scope_, inner);
      return exec_body(s.bodies[0]);
    }
    case Stmt::Kind::macro:
      scope_->set(s.text, Value::object(std::make_shared<Macro>(&s, scope_)));
      break;
    case Stmt::Kind::break_: return Flow::break_;
    case Stmt::Kind::continue_: return Flow::continue_;
    case Stmt::Kind::generation: exec_generation(s); break;
  }
  return Flow::normal;
}

Renderer::Flow Renderer::exec_for(const Stmt& s) {
  std::vector<Value> items = iterate(eval(*s.exprs[0]));
  if (s.exprs[1]) {
    std::vector<Value> kept;
    for (Value& item : items) {
      auto probe = child_of(scope_);
      assign(s.targets[0], item, *probe);
      Restore<std::shared_ptr<Scope>> scope(scope_, probe);
      if (eval(*s.exprs[1]).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  auto loop = std::make_shared<Loop>(std::move(items));
  const Value loop_value = Value::object(loop);
  const std::shared_ptr<Scope> outer = scope_;
  for (size_t i = 0; i < loop->items().size(); ++i) {
    tick();
    auto iteration = child_of(outer);
    loop->index = i;
    assign(s.targets[0], loop->items()[i], *iteration);
    iteration->set("loop", loop_value);
    Restore<std::shared_ptr<Scope>> scope(scope_, iteration);
    if (exec_body(s.bodies[0]) == Flow::break_) break;
  }
  if (loop->items().empty() && s.has_else) {
    Restore<std::shared_ptr<Scope>> scope(scope_, child_of(outer));
    exec_body(s.bodies[1]);
  }
  return Flow::normal;
}

void Renderer::exec_generation(const Stmt& s) {
  const std::string text = capture(s.bodies[0]);
  const size_t start = root_->size();
  if (!root_->empty() || !spans_->empty()) spans_->emplace_back(start, start + text.size());
  *out_ += text;
  check_output(*out_);
}

Value Renderer::call_macro(const Stmt& def, const std::shared_ptr<Scope>& closure,
                           const Args& args) {
  auto frame = child_of(closure);
  const size_t n = def.params.size();
  std::vector<bool> given(n, false);
  for (size_t i = 0; i < args.positional.size() && i < n; ++i) {
    frame->set(def.params[i], args.positional[i]);
    given[i] = true;
  }
  if (args.positional.size() > n) {
    FG_CHECK(def.uses_varargs, "macro '{}' takes not more than {} argument(s)", def.text, n);
    frame->set("varargs",
               Value::tuple({args.positional.begin() + std::ptrdiff_t(n), args.positional.end()}));
  } else if (def.uses_varargs) {
    frame->set("varargs", Value::tuple({}));
  }
  auto extra = std::make_shared<Dict>();
  for (const auto& [key, value] : args.named) {
    const auto at = std::find(def.params.begin(), def.params.end(), key);
    if (at == def.params.end()) {
      FG_CHECK(def.uses_kwargs, "macro '{}' takes no keyword argument '{}'", def.text, key);
      extra->set(Value::string(key), value);
      continue;
    }
    const size_t i = size_t(at - def.params.begin());
    FG_CHECK(!given[i], "macro '{}' got multiple values for argument '{}'", def.text, key);
    frame->set(key, value);
    given[i] = true;
  }
  if (def.uses_kwargs) frame->set("kwargs", Value::dict(std::move(extra)));
  std::string text;
  Restore<std::shared_ptr<Scope>> scope(scope_, frame);
  Restore<std::string*> out(out_, &text);
  macros_.push_back(&def);
  struct Pop {
    std::vector<const Stmt*>& macros;
    ~Pop() { macros.pop_back(); }
  } pop{macros_};
  for (size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    frame->set(def.params[i], def.exprs[i]
                                  ? eval(*def.exprs[i])
                                  : Value::undefined(fmt::format("parameter '{}' was not provided",
                                                                 def.params[i])));
  }
  exec_body(def.bodies[0]);
  return Value::string(std::move(text));
}

void Renderer::assign(const Target& target, const Value& value, Scope& scope) {
  switch (target.kind) {
    case Target::Kind::name: scope.set(target.name, value); return;
    case Target::Kind::tuple: {
      const std::vector<Value> items = iterate(value);
      const size_t want = target.items.size();
      FG_CHECK(items.size() <= want, "too many values to unpack (expected {})", want);
      FG_CHECK(items.size() >= want, "not enough values to unpack (expected {}, got {})", want,
               items.size());
      for (size_t i = 0; i < want; ++i) assign(target.items[i], items[i], scope);
      return;
    }
    case Target::Kind::attribute: {
      const Value* ns = scope.find(target.name);
      Namespace* object =
          ns && ns->is_object() ? dynamic_cast<Namespace*>(ns->object_ptr().get()) : nullptr;
      FG_CHECK(object, "cannot assign attribute on non-namespace object '{}'", target.name);
      object->set(target.attribute, value);
      return;
    }
  }
}

Value Renderer::lookup(const std::string& name) const {
  if (const Value* v = scope_->find(name)) return *v;
  if (is_global(name)) return global(name);
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

Args Renderer::eval_args(const Expr& e) {
  Args args;
  args.positional.reserve(e.positional);
  for (size_t i = 0; i < e.positional; ++i) args.positional.push_back(eval(*e.kids[1 + i]));
  for (size_t i = 0; i < e.keywords.size(); ++i)
    args.named.emplace_back(e.keywords[i], eval(*e.kids[1 + e.positional + i]));
  return args;
}

Value Renderer::eval(const Expr& e) {
  const Step step(*this);
  line_ = e.line;
  switch (e.kind) {
    case Expr::Kind::constant: return e.value;
    case Expr::Kind::name: return lookup(e.name);
    case Expr::Kind::list:
    case Expr::Kind::tuple: {
      std::vector<Value> items;
      items.reserve(e.kids.size());
      for (const auto& k : e.kids) items.push_back(eval(*k));
      return e.kind == Expr::Kind::list ? Value::list(std::move(items))
                                        : Value::tuple(std::move(items));
    }
    case Expr::Kind::dict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        Value key = eval(*e.kids[i]);
        d->set(std::move(key), eval(*e.kids[i + 1]));
      }
      return Value::dict(std::move(d));
    }
    case Expr::Kind::getattr: return get_attribute(eval(*e.kids[0]), e.name);
    case Expr::Kind::getitem: {
      const Value obj = eval(*e.kids[0]);
      return get_item(obj, eval(*e.kids[1]));
    }
    case Expr::Kind::slice: {
      const Value obj = eval(*e.kids[0]);
      const auto bound = [&](size_t i) { return e.kids[i] ? eval(*e.kids[i]) : Value::none(); };
      const Value start = bound(1), stop = bound(2), step = bound(3);
      return get_slice(obj, start, stop, step);
    }
    case Expr::Kind::call: {
      const Value callee = eval(*e.kids[0]);
      const Args args = eval_args(e);
      line_ = e.line;
      if (callee.is_undefined()) throw Error(callee.undefined_hint());
      FG_CHECK(callee.is_object() && callee.object().callable(), "'{}' object is not callable",
               callee.type_name());
      return callee.object().call(*this, args);
    }
    case Expr::Kind::filter: {
      const Value input = eval(*e.kids[0]);
      const Args args = eval_args(e);
      line_ = e.line;
      return e.filter(*this, input, args);
    }
    case Expr::Kind::test: {
      const Value input = eval(*e.kids[0]);
      const Args args = eval_args(e);
      line_ = e.line;
      return Value::boolean(e.test(*this, input, args));
    }
    case Expr::Kind::block_input: return block_input_;
    case Expr::Kind::neg: return negate(eval(*e.kids[0]));
    case Expr::Kind::pos: {
      const Value v = eval(*e.kids[0]);
      if (v.is_undefined()) throw Error(v.undefined_hint());
      FG_CHECK(v.is_number(), "bad operand type for unary +: '{}'", v.type_name());
      return v.is_int() ? Value::integer(v.as_int()) : v;
    }
    case Expr::Kind::not_: return Value::boolean(!eval(*e.kids[0]).truthy());
    case Expr::Kind::and_: {
      Value a = eval(*e.kids[0]);
      return a.truthy() ? eval(*e.kids[1]) : a;
    }
    case Expr::Kind::or_: {
      Value a = eval(*e.kids[0]);
      return a.truthy() ? a : eval(*e.kids[1]);
    }
    case Expr::Kind::binary: {
      const Value a = eval(*e.kids[0]);
      const Value b = eval(*e.kids[1]);
      line_ = e.line;
      return arithmetic(e.ops[0], a, b);
    }
    case Expr::Kind::concat: {
      std::string out;
      for (const auto& k : e.kids) {
        append_str(eval(*k), out);
        check_text(out.size(), "the ~ operator");
      }
      return Value::string(std::move(out));
    }
    case Expr::Kind::compare: {
      Value left = eval(*e.kids[0]);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.kids[i + 1]);
        line_ = e.line;
        if (!compare(e.ops[i], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::cond:
      if (eval(*e.kids[1]).truthy()) return eval(*e.kids[0]);
      if (e.kids[2]) return eval(*e.kids[2]);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.",
          e.line));
  }
  return Value();
}

}  // namespace fitgrad::data::jinja
