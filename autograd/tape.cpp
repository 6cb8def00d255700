// Recording nodes and walking the tape backwards (see the Notes in tape.h).
#include "autograd/tape.h"

#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/ops/elementwise.h"

namespace fitgrad::autograd {

namespace {

thread_local std::vector<Tape*> tls_tapes;

Tape& base_tape() {
  thread_local Tape tape;
  return tape;
}

GradHookContext& micro_batch_state() {
  thread_local GradHookContext ctx;
  return ctx;
}

// dst += g for an intermediate gradient; never in place, since `g` may be shared.
void accumulate(Tensor& dst, const Tensor& g) { dst = dst.defined() ? ops::add(dst, g) : g; }

// Note [Adopted gradients]
// A leaf's first gradient is usually a fresh result that nothing else holds: dW of a Linear,
// the scatter-add of an embedding. Copying it into a new "<name>.grad" buffer would hold the
// largest gradient twice for a moment (the peak of a 7B model's 250 MiB embedding gradient).
// So when g is contiguous, has the leaf's shape, dtype and device, fills its whole storage
// and is that storage's only holder, the leaf adopts it: its block is retagged from
// `temporary` to the gradient's category and label (CachingAllocator::retag), on meta as on
// the CPU. Otherwise (a gradient shared between edges, a view, a broadcast) it is copied.
bool adoptable(const Tensor& g, const Tensor& like) {
  return g.shape() == like.shape() && g.dtype() == like.dtype() && g.device() == like.device() &&
         g.is_contiguous() && g.offset() == 0 && g.storage() && g.storage().use_count() == 1 &&
         g.storage()->from_allocator() &&
         g.storage()->nbytes() == size_t(g.numel()) * element_size(g.dtype());
}

void accumulate_leaf(AutogradMeta& leaf, const Tensor& g, const Tensor& like) {
  if (leaf.grad.defined()) {
    ops::add_(leaf.grad, g);
    return;
  }
  const uint32_t label =
      intern_label(leaf.name.empty() ? std::string("grad") : leaf.name + ".grad");
  if (adoptable(g, like)) {
    g.storage()->retag(leaf.grad_category, label);
    leaf.grad = g;
    return;
  }
  MemoryContextScope scope(MemoryContext{leaf.grad_category, label});
  leaf.grad = Tensor::empty(like.shape(), like.dtype(), like.device());
  leaf.grad.copy_(g);
}

}  // namespace

MicroBatchScope::MicroBatchScope(int64_t index, bool last) : saved_(micro_batch_state()) {
  FG_CHECK(index >= 0, "[backward] micro-batch index {} is negative", index);
  micro_batch_state() = {index, last};
}

MicroBatchScope::~MicroBatchScope() { micro_batch_state() = saved_; }

GradHookContext current_micro_batch() { return micro_batch_state(); }

void Tape::push(std::shared_ptr<Node> node) {
  node->position = nodes_.size();
  nodes_.push_back(std::move(node));
}

void Tape::clear() {
  for (auto& n : nodes_) n->release();
  nodes_.clear();
}

Tape& current_tape() { return tls_tapes.empty() ? base_tape() : *tls_tapes.back(); }

TapeScope::TapeScope() : tape_(std::make_unique<Tape>()) { tls_tapes.push_back(tape_.get()); }
TapeScope::~TapeScope() {
  tape_->clear();
  tls_tapes.pop_back();
}

namespace {
thread_local LeafCollector* tls_collector = nullptr;
}

LeafCollector::LeafCollector() : saved_(tls_collector) { tls_collector = this; }
LeafCollector::~LeafCollector() {
  tls_collector = saved_;
  // A nested collector (checkpoint inside checkpoint) passes its leaves outwards.
  if (saved_)
    for (const auto& l : leaves_) saved_->add_meta(l);
}

void LeafCollector::add(const Tensor& t) { add_meta(shared_meta_of(t)); }

void LeafCollector::add_meta(std::shared_ptr<AutogradMeta> m) {
  for (const auto& l : leaves_)
    if (l == m) return;
  leaves_.push_back(std::move(m));
}

bool needs_record(std::initializer_list<const Tensor*> inputs) {
  const bool enabled = grad_enabled();
  bool any = false;
  for (const Tensor* t : inputs) {
    if (!t->defined() || !requires_grad(*t)) continue;
    any = true;
    if (!enabled && tls_collector && is_leaf(*t)) tls_collector->add(*t);
  }
  return enabled && any;
}

bool needs_record(const std::vector<Tensor>& inputs) {
  const bool enabled = grad_enabled();
  bool any = false;
  for (const Tensor& t : inputs) {
    if (!t.defined() || !requires_grad(t)) continue;
    any = true;
    if (!enabled && tls_collector && is_leaf(t)) tls_collector->add(t);
  }
  return enabled && any;
}

namespace {

template <class Inputs, class Outputs>
void record_impl(std::shared_ptr<Node> node, const Inputs& inputs, const Outputs& outputs) {
  node->context = current_memory_context();
  for (const auto& in : inputs) {
    const Tensor& t = *in;
    Edge e;
    if (t.defined() && requires_grad(t)) {
      std::shared_ptr<AutogradMeta> m = shared_meta_of(t);
      if (m->grad_fn) {
        FG_CHECK(!m->grad_fn->released(),
                 "[{}] an input comes from {}, whose graph an earlier backward already consumed",
                 node->name(), m->grad_fn->name());
        e.node = m->grad_fn.get();
        e.output_nr = m->output_nr;
      } else {
        e.leaf = std::move(m);
      }
    }
    node->next.push_back(std::move(e));
  }
  node->grad_outputs.resize(outputs.size());
  int k = 0;
  for (const auto& out : outputs) {
    const Tensor& t = *out;
    FG_ASSERT(meta_of(t) == nullptr || !meta_of(t)->requires_grad,
              "{} output {} already has autograd data: an op returned its input", node->name(), k);
    AutogradMeta& m = ensure_meta(t);
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = k++;
  }
  current_tape().push(std::move(node));
}

struct PtrRange {
  const std::vector<Tensor>& v;
  struct It {
    std::vector<Tensor>::const_iterator i;
    const Tensor* operator*() const { return &*i; }
    It& operator++() {
      ++i;
      return *this;
    }
    bool operator!=(const It& o) const { return i != o.i; }
  };
  It begin() const { return {v.begin()}; }
  It end() const { return {v.end()}; }
  size_t size() const { return v.size(); }
};

}  // namespace

void record(std::shared_ptr<Node> node, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<const Tensor*> outputs) {
  record_impl(std::move(node), inputs, outputs);
}

void record(std::shared_ptr<Node> node, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs) {
  record_impl(std::move(node), PtrRange{inputs}, PtrRange{outputs});
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool fire_hooks) {
  FG_CHECK(!roots.empty(), "[backward] no tensors to backpropagate from");
  FG_CHECK(grads.empty() || grads.size() == roots.size(), "[backward] {} roots but {} gradients",
           roots.size(), grads.size());
  Tape& tape = current_tape();
  const GradHookContext hook_context = current_micro_batch();
  std::vector<char> reached(tape.size(), 0);
  std::unordered_map<AutogradMeta*, int> pending;  // leaf -> edges still to deliver
  auto deliver_to_leaf = [&](const std::shared_ptr<AutogradMeta>& leaf, const Tensor* g,
                             const Tensor& like) {
    if (g) accumulate_leaf(*leaf, *g, like);
    if (--pending[leaf.get()] > 0 || !leaf->grad.defined() || !fire_hooks) return;
    for (const GradHook& hook : leaf->hooks) hook(leaf->grad, hook_context);
  };

  // Seed the roots.
  std::vector<std::pair<std::shared_ptr<AutogradMeta>, Tensor>> leaf_roots;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    FG_CHECK(root.defined() && requires_grad(root),
             "[backward] root {} does not require grad: nothing recorded leads to it", i);
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      FG_CHECK(root.numel() == 1,
               "[backward] root {} has shape {}: pass its gradient (only a scalar gets 1)", i,
               shape_str(root.shape()));
      // The seed d root / d root: a temporary of the op that made the root (a loss).
      const std::shared_ptr<AutogradMeta> rm = shared_meta_of(root);
      const uint32_t label = rm->grad_fn && rm->grad_fn->context.label != 0
                                 ? rm->grad_fn->context.label
                                 : intern_label("loss");
      const MemoryContextScope scope(MemoryContext{Category::temporary, label});
      g = Tensor::full(root.shape(), 1.0, root.dtype(), root.device());
    }
    FG_CHECK(g.shape() == root.shape(), "[backward] root {} has shape {} but its gradient {}", i,
             shape_str(root.shape()), shape_str(g.shape()));
    std::shared_ptr<AutogradMeta> m = shared_meta_of(root);
    if (!m->grad_fn) {
      leaf_roots.emplace_back(m, g);
      continue;
    }
    Node* n = m->grad_fn.get();
    FG_CHECK(!n->released(),
             "[backward] the graph through {} was already consumed by an earlier backward",
             n->name());
    FG_CHECK(n->position < tape.size() && tape.nodes()[n->position].get() == n,
             "[backward] {} was recorded on another tape", n->name());
    accumulate(n->grad_outputs[size_t(m->output_nr)], g);
    reached[n->position] = 1;
  }

  // Reachability and leaf edge counts (Note [Final gradients and hooks]).
  for (size_t i = tape.size(); i-- > 0;) {
    if (!reached[i]) continue;
    for (const Edge& e : tape.nodes()[i]->next) {
      if (e.node) reached[e.node->position] = 1;
      if (e.leaf) ++pending[e.leaf.get()];
    }
  }
  for (auto& [leaf, g] : leaf_roots) {
    ++pending[leaf.get()];
    deliver_to_leaf(leaf, &g, g);
  }

  // Walk backwards.
  for (size_t i = tape.size(); i-- > 0;) {
    if (!reached[i]) continue;
    Node* n = tape.nodes()[i].get();
    bool any = false;
    for (const Tensor& g : n->grad_outputs) any = any || g.defined();
    std::vector<Tensor> grad_inputs;
    if (any) {
      MemoryContextScope scope(MemoryContext{Category::temporary, n->context.label});
      n->unpack_saved();
      grad_inputs = n->apply(n->grad_outputs);
      FG_ASSERT(grad_inputs.size() == n->next.size(), "{} returned {} gradients for {} inputs",
                n->name(), grad_inputs.size(), n->next.size());
    }
    n->release();
    for (size_t k = 0; k < n->next.size(); ++k) {
      const Edge& e = n->next[k];
      const Tensor* g = any && grad_inputs[k].defined() ? &grad_inputs[k] : nullptr;
      if (e.node && g) {
        // A sum of two consumers' gradients: the producing op's temporary.
        const MemoryContextScope scope(MemoryContext{Category::temporary, e.node->context.label});
        accumulate(e.node->grad_outputs[size_t(e.output_nr)], *g);
      } else if (e.leaf) {
        deliver_to_leaf(e.leaf, g, g ? *g : Tensor());
      }
    }
  }
  tape.clear();
}

}  // namespace fitgrad::autograd
