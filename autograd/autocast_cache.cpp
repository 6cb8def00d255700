// The per-step autocast weight cache (autocast_cache.h, Note [Autocast weight cache]).
#include "autograd/autocast_cache.h"

#include <string>

#include "autograd/grad_mode.h"
#include "autograd/lambda_node.h"
#include "tensor/storage.h"

namespace fitgrad::autograd {
namespace {

thread_local AutocastCacheScope* t_cache = nullptr;

// A parameter: a leaf that requires grad and whose gradient is a gradient. The inputs of a
// checkpoint's recompute are leaves too, but activations (their gradients are temporary),
// and are cast each time.
bool is_parameter(const Tensor& t) {
  const AutogradMeta* m = meta_of(t);
  return m && m->requires_grad && !m->grad_fn && m->grad_category == Category::gradient;
}

// "<parameter name>.bf16", or the current label when the parameter has no name.
uint32_t copy_label(const Tensor& weight, DType dtype) {
  const std::string& name = meta_of(weight)->name;
  if (name.empty()) return current_memory_context().label;
  return intern_label(name + "." + std::string(dtype_name(dtype)));
}

}  // namespace

AutocastCacheScope::AutocastCacheScope() : active_(t_cache == nullptr) {
  if (active_) t_cache = this;
}

AutocastCacheScope::~AutocastCacheScope() {
  if (!active_) return;
  t_cache = nullptr;
  for (Entry& e : entries_) e.copy = Tensor();  // freed in first-cast order
}

Tensor cached_cast(const Tensor& weight, DType dtype) {
  AutocastCacheScope* scope = t_cache;
  if (scope == nullptr || !is_parameter(weight)) return Tensor();
  const uint64_t version = weight.storage()->version();
  const auto [slot, added] =
      scope->index_.try_emplace({weight.impl(), dtype}, scope->entries_.size());
  if (added) scope->entries_.emplace_back();
  AutocastCacheScope::Entry& e = scope->entries_[slot->second];
  if (!e.copy.defined() || e.version != version) {
    NoGradGuard no_grad;
    MemoryContextScope ctx(MemoryContext{Category::parameter, copy_label(weight, dtype)});
    e = {weight, version, weight.to(dtype)};
    ++scope->casts_;
  }
  Tensor out = detach(e.copy);  // an alias with autograd data of its own
  if (needs_record({&weight})) {
    auto node = make_node("cast", [from = weight.dtype()](Node&, std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0].defined() ? g[0].to(from) : g[0]};
    });
    record(node, {&weight}, {&out});
  }
  return out;
}

}  // namespace fitgrad::autograd
