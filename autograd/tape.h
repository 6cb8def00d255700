// The tape (DESIGN.md, Autograd): the forward pass appends nodes in execution order and
// backward() walks them in reverse. Each thread has a stack of tapes; checkpoint pushes a
// private one for its recompute.
//
// Note [What backward frees and when]
//   - A node's saved tensors are released right after its rule has run.
//   - A node's output gradients are released right after its rule has consumed them, so
//     an intermediate gradient lives from the rule that made it to the rule that uses it.
//   - Leaf gradients accumulate with += into AutogradMeta::grad, which is allocated once
//     as Category::gradient labelled "<name>.grad": micro-batch accumulation is free.
//   - backward() consumes the whole tape: every node on it is released and the tape is
//     empty when backward returns, reached or not. A second backward through the same
//     tensors is an error naming the op, as with PyTorch's retain_graph=False.
// Backward rules run under Category::temporary and the label of their forward op, so the
// ledger attributes backward memory to modules too.
//
// Note [Final gradients and hooks]
// Before walking, backward marks the nodes reachable from the roots and counts, for each
// leaf, the edges from reachable nodes into it. A leaf's gradient is final when its count
// reaches zero, and its hooks fire then (optimizer-in-backward, offload). Leaves reached
// only inside a checkpoint's recompute are final when the outer backward ends.
#pragma once

#include <memory>
#include <vector>

#include "autograd/node.h"

namespace fitgrad::autograd {

class Tape {
 public:
  void push(std::shared_ptr<Node> node);
  size_t size() const { return nodes_.size(); }
  const std::vector<std::shared_ptr<Node>>& nodes() const { return nodes_; }
  // Releases every node's saved tensors and forgets the nodes.
  void clear();

 private:
  std::vector<std::shared_ptr<Node>> nodes_;
};

// The innermost tape of this thread.
Tape& current_tape();
// Pushes a fresh tape for its lifetime (checkpoint's recompute runs on one).
class TapeScope {
 public:
  TapeScope();
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;
  Tape& tape() { return *tape_; }

 private:
  std::unique_ptr<Tape> tape_;
};

// True when grad mode is on and some input requires grad: the op must record a node.
// With grad mode off and a LeafCollector active, notes the leaves that require grad.
bool needs_record(std::initializer_list<const Tensor*> inputs);
bool needs_record(const std::vector<Tensor>& inputs);

// While alive, collects the leaves requiring grad that ops see with grad mode off.
class LeafCollector {
 public:
  LeafCollector();
  ~LeafCollector();
  LeafCollector(const LeafCollector&) = delete;
  LeafCollector& operator=(const LeafCollector&) = delete;
  void add(const Tensor& t);
  void add_meta(std::shared_ptr<AutogradMeta> m);
  // Each leaf once, in first-seen order.
  const std::vector<std::shared_ptr<AutogradMeta>>& leaves() const { return leaves_; }

 private:
  LeafCollector* saved_;
  std::vector<std::shared_ptr<AutogradMeta>> leaves_;
};
// Records `node` for an op with these inputs and outputs: sets the edges to the inputs
// that require grad, gives every output this node as grad_fn, and appends it to the tape.
void record(std::shared_ptr<Node> node, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<const Tensor*> outputs);
void record(std::shared_ptr<Node> node, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs);

// While alive, backward passes on this thread belong to micro-batch `index` of an
// optimizer step, the last one when `last`; gradient hooks receive it (GradHookContext).
// Outside any scope a backward is micro-batch 0 and the last.
class MicroBatchScope {
 public:
  MicroBatchScope(int64_t index, bool last);
  ~MicroBatchScope();
  MicroBatchScope(const MicroBatchScope&) = delete;
  MicroBatchScope& operator=(const MicroBatchScope&) = delete;

 private:
  GradHookContext saved_;
};
// The thread's current micro-batch context.
GradHookContext current_micro_batch();

// Backpropagates from `roots`, seeded with `grads` (for a scalar root an undefined grad
// means 1), through the current tape, then clears it. See the Notes above. With
// fire_hooks false (checkpoint's recompute) leaf gradients accumulate but no hook fires.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {},
              bool fire_hooks = true);
inline void backward(const Tensor& root) { backward(std::vector<Tensor>{root}); }

}  // namespace fitgrad::autograd
