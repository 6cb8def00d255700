// A Node whose backward rule is a lambda, so each differentiable op is one short function:
//
//   Tensor out = ops::exp(x);
//   if (needs_record({&x})) {
//     auto node = make_node("exp", [](Node& n, std::vector<Tensor>& g) {
//       return std::vector<Tensor>{ops::mul(g[0], n.saved[0])};
//     });
//     node->save(out);
//     record(node, {&x}, {&out});
//   }
//
// The rule reads saved tensors only through n.saved (Note [Saved tensors are detached
// aliases]) and captures only small values (shapes, scalars) by copy.
#pragma once

#include <memory>
#include <utility>

#include "autograd/node.h"
#include "autograd/tape.h"
#include "autograd/variable.h"

namespace fitgrad::autograd {

template <class Rule>
struct LambdaNode final : Node {
  LambdaNode(const char* op, Rule r) : op_name(op), rule(std::move(r)) {}
  const char* name() const override { return op_name; }
  std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) override {
    return rule(*this, grad_outputs);
  }
  const char* op_name;
  Rule rule;
};

template <class Rule>
std::shared_ptr<Node> make_node(const char* op, Rule rule) {
  return std::make_shared<LambdaNode<Rule>>(op, std::move(rule));
}

// Forward outputs of recorded ops are activations unless the caller chose a category.
class ForwardScope {
 public:
  explicit ForwardScope(bool recording)
      : scope_(recording && current_memory_context().category == Category::other
                   ? Category::activation
                   : current_memory_context().category) {}

 private:
  CategoryScope scope_;
};

// An op's output as a tensor of its own: an op may return its input unchanged (a cast to
// the same dtype, dropout with p = 0), and the output needs its own autograd data.
inline Tensor own(const Tensor& out, const Tensor& input) {
  return out.same(input) ? detach(out) : out;
}

}  // namespace fitgrad::autograd
