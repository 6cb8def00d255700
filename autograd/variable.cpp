// AutogradMeta access on tensors, and Node's saved-tensor handling.
#include "autograd/variable.h"

namespace fitgrad::autograd {

std::shared_ptr<AutogradMeta> shared_meta_of(const Tensor& t) {
  FG_CHECK(t.defined(), "[autograd] the tensor is undefined");
  return std::static_pointer_cast<AutogradMeta>(t.impl()->autograd);
}

AutogradMeta* meta_of(const Tensor& t) {
  FG_CHECK(t.defined(), "[autograd] the tensor is undefined");
  return static_cast<AutogradMeta*>(t.impl()->autograd.get());
}

AutogradMeta& ensure_meta(const Tensor& t) {
  if (AutogradMeta* m = meta_of(t)) return *m;
  auto m = std::make_shared<AutogradMeta>();
  t.impl()->autograd = m;
  return *m;
}

void set_requires_grad(const Tensor& t, bool requires_grad) {
  AutogradMeta& m = ensure_meta(t);
  FG_CHECK(!m.grad_fn,
           "[autograd] requires_grad can only be set on a leaf; this tensor comes from {}",
           m.grad_fn ? m.grad_fn->name() : "");
  FG_CHECK(!requires_grad || is_floating(t.dtype()),
           "[autograd] only floating tensors can require grad, got {}", dtype_name(t.dtype()));
  m.requires_grad = requires_grad;
}

bool requires_grad(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m && m->requires_grad;
}

bool is_leaf(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return !m || !m->grad_fn;
}

Tensor grad(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m ? m->grad : Tensor();
}

void clear_grad(const Tensor& t) {
  if (AutogradMeta* m = meta_of(t)) m->grad = Tensor();
}

void set_name(const Tensor& t, std::string name) { ensure_meta(t).name = std::move(name); }

void add_grad_hook(const Tensor& t, GradHook hook) {
  AutogradMeta& m = ensure_meta(t);
  FG_CHECK(!m.grad_fn, "[autograd] gradient hooks go on leaves; this tensor comes from {}",
           m.grad_fn->name());
  m.hooks.push_back(std::move(hook));
}

Tensor detach(const Tensor& t) {
  FG_CHECK(t.defined(), "[detach] the tensor is undefined");
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->autograd.reset();
  return Tensor(std::move(impl));
}

size_t Node::save(const Tensor& t) {
  saved.push_back(t.defined() ? detach(t) : Tensor());
  return saved.size() - 1;
}

void Node::release() {
  saved.clear();
  saved.shrink_to_fit();
  grad_outputs.clear();
  grad_outputs.shrink_to_fit();
  released_ = true;
}

}  // namespace fitgrad::autograd
