// The Jinja renderer (data/chat_template.h): walks a parsed Template (jinja_ast.h) with a
// set of variables and writes its text. Scopes follow jinja2 (Note [Jinja scopes] in
// jinja_render.cpp); transformers' {% generation %} blocks record the span of text they
// produce.
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/jinja_ast.h"
#include "data/jinja_value.h"

namespace fitgrad::data::jinja {

// Variables by name, with the scope that encloses them (null at the top).
struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const;
  void set(std::string_view name, Value value);
};

// raise_exception(message) in a template: what() is the template's message.
class Raised : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Note [Jinja render bounds] in jinja_render.cpp.
inline constexpr int kMaxRenderDepth = 2000;
inline constexpr uint64_t kMaxRenderSteps = 2'000'000;

class Renderer {
 public:
  // `now` is the local time strftime_now() formats.
  explicit Renderer(const std::tm& now) : now_(now) {}
  // Clears the namespaces it kept, then drops them (Note [Jinja render bounds]).
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // Holds a namespace() the template made until the rendering ends.
  void keep(std::shared_ptr<Namespace> ns) { namespaces_.push_back(std::move(ns)); }

  // Renders `t` with `root` as its top scope into `out`; appends the byte span [start, end)
  // of each {% generation %} block's output to `spans` (Note [Generation spans]).
  void render(const Template& t, std::shared_ptr<Scope> root, std::string& out,
              std::vector<std::pair<size_t, size_t>>& spans);

  // The line of the expression or statement being evaluated, for error messages.
  int line() const { return line_; }
  const std::tm& now() const { return now_; }

  // A macro call: `def` is the macro statement, `closure` the scope it was defined in.
  Value call_macro(const Stmt& def, const std::shared_ptr<Scope>& closure, const Args& args);

 private:
  enum class Flow : uint8_t { normal, break_, continue_ };

  // One statement or expression being rendered, while it lives: counts the depth and the
  // steps and reads the interrupt flag (Note [Jinja render bounds]).
  class Step {
   public:
    explicit Step(Renderer& r);
    ~Step() { --r_.depth_; }
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;

   private:
    Renderer& r_;
  };
  // Counts a step, reads the interrupt flag; throws past kMaxRenderSteps.
  void tick();
  // Throws when `text` has grown past kMaxTextBytes.
  void check_output(const std::string& text) const;

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_generation(const Stmt& s);
  // Renders `body` in a new scope under the current one and returns its text.
  std::string capture(const Body& body);
  Value eval(const Expr& e);
  Args eval_args(const Expr& e);
  void assign(const Target& target, const Value& value, Scope& scope);
  Value lookup(const std::string& name) const;

  std::shared_ptr<Scope> scope_;
  std::string* out_ = nullptr;
  std::string* root_ = nullptr;
  std::vector<std::pair<size_t, size_t>>* spans_ = nullptr;
  Value block_input_;
  std::tm now_;
  int line_ = 0;
  int depth_ = 0;
  std::vector<const Stmt*> macros_;  // the macro calls in progress, innermost last
  uint64_t steps_ = 0;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
};

}  // namespace fitgrad::data::jinja
