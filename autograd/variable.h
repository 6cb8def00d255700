// Autograd state on tensors: requires_grad, the gradient of a leaf, names and hooks, and
// detach. A tensor has autograd data only once something asks for it.
#pragma once

#include "autograd/node.h"

namespace fitgrad::autograd {

// The tensor's AutogradMeta, or nullptr when it has none.
AutogradMeta* meta_of(const Tensor& t);
std::shared_ptr<AutogradMeta> shared_meta_of(const Tensor& t);
// Creates the AutogradMeta when missing.
AutogradMeta& ensure_meta(const Tensor& t);

// Marks a leaf as requiring a gradient; throws on a non-leaf (it already gets one).
void set_requires_grad(const Tensor& t, bool requires_grad = true);
bool requires_grad(const Tensor& t);
// Marks an integer leaf (an int8 weight's u8 codes) as requiring a floating gradient, in the
// dtype its backward rule delivers; set_requires_grad then also accepts it.
void set_requires_float_grad(const Tensor& t);
bool is_leaf(const Tensor& t);
// The accumulated gradient of a leaf (undefined before the first backward reaches it).
Tensor grad(const Tensor& t);
// Makes g (of t's shape) the gradient of leaf t, replacing any: a gradient computed
// elsewhere (optimizer offload's host copy of a device gradient).
void set_grad(const Tensor& t, const Tensor& g);
// Drops a leaf's gradient (zero_grad with set_to_none).
void clear_grad(const Tensor& t);
// Names a leaf, so its gradient is labelled "<name>.grad" in the memory ledger.
void set_name(const Tensor& t, std::string name);
// Calls `hook` with the final gradient of leaf `t` during every backward that reaches it.
void add_grad_hook(const Tensor& t, GradHook hook);
// The same data and view, without autograd history.
Tensor detach(const Tensor& t);

}  // namespace fitgrad::autograd
