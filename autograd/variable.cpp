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
  FG_CHECK(!requires_grad || is_floating(t.dtype()) || m.integer_leaf,
           "[autograd] only floating tensors can require grad, got {}", dtype_name(t.dtype()));
  m.requires_grad = requires_grad;
}

void set_requires_float_grad(const Tensor& t) {
  FG_CHECK(!is_floating(t.dtype()),
           "[autograd] set_requires_float_grad is for integer leaves, got {}",
           dtype_name(t.dtype()));
  ensure_meta(t).integer_leaf = true;
  set_requires_grad(t, true);
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

void set_grad(const Tensor& t, const Tensor& g) {
  FG_CHECK(g.defined() && g.shape() == t.shape(),
           "[set_grad] a gradient of shape {} for a leaf of shape {}",
           g.defined() ? shape_str(g.shape()) : std::string("(undefined)"), shape_str(t.shape()));
  ensure_meta(t).grad = g;
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

namespace {
std::shared_ptr<const SavedTensorHooks>& saved_tensor_hooks() {
  thread_local std::shared_ptr<const SavedTensorHooks> hooks;
  return hooks;
}
}  // namespace

SavedTensorHooksScope::SavedTensorHooksScope(SavedTensorHooks hooks)
    : saved_(saved_tensor_hooks()) {
  FG_CHECK(hooks.pack && hooks.unpack, "[saved_tensor_hooks] pack and unpack must both be set");
  saved_tensor_hooks() = std::make_shared<const SavedTensorHooks>(std::move(hooks));
}

SavedTensorHooksScope::~SavedTensorHooksScope() { saved_tensor_hooks() = saved_; }

size_t Node::save(const Tensor& t) {
  const std::shared_ptr<const SavedTensorHooks>& hooks = saved_tensor_hooks();
  Tensor alias = t.defined() ? detach(t) : Tensor();
  if (hooks && alias.defined()) {
    alias = hooks->pack(alias);
    saved_hooks.resize(saved.size());
    saved_hooks.push_back(hooks);
  } else if (!saved_hooks.empty()) {
    saved_hooks.push_back(nullptr);
  }
  saved.push_back(std::move(alias));
  return saved.size() - 1;
}

void Node::unpack_saved() {
  for (size_t i = 0; i < saved_hooks.size(); ++i)
    if (saved_hooks[i]) {
      saved[i] = saved[i].defined() ? detach(saved_hooks[i]->unpack(saved[i])) : saved[i];
      saved_hooks[i].reset();
    }
}

void Node::release() {
  saved.clear();
  saved.shrink_to_fit();
  saved_hooks.clear();
  saved_hooks.shrink_to_fit();
  grad_outputs.clear();
  grad_outputs.shrink_to_fit();
  released_ = true;
}

}  // namespace fitgrad::autograd
