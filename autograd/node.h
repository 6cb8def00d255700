// The tape's pieces: AutogradMeta hangs off a Tensor (through TensorImpl::autograd),
// and a Node is one recorded op with its backward rule.
//
// Note [Saved tensors are detached aliases]
// A node saves what its rule needs with save(), which stores an alias of the tensor with
// no autograd data. A node saving its own output therefore makes no reference cycle
// (output -> grad_fn -> saved output), and release() frees the bytes the moment the rule
// has run, whoever else still holds the output tensor.
//
// Note [Frozen inputs]
// An input that does not require grad (a frozen weight, the ids, a constant) has an empty
// edge, and apply() returns an undefined gradient for it. A rule asks needs_input_grad(i)
// and skips what only that gradient needs: a Linear over a frozen weight computes dX and
// neither dW (a GEMM and its (out, in) f32 result) nor db, and saves only what dX needs
// (the weight, not its input). The record-time requires_grad of each input decides, as
// PyTorch's needs_input_grad does.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/memory/scope.h"
#include "tensor/tensor.h"

namespace fitgrad::autograd {

struct Node;

// What a gradient hook learns besides the gradient: which micro-batch of the optimizer step
// the backward belongs to (MicroBatchScope in autograd/tape.h), so a hook can act only once
// the gradient is complete (optimizer-in-backward, offload).
struct GradHookContext {
  int64_t micro_batch = 0;
  bool is_last_micro_batch = true;
};
using GradHook = std::function<void(const Tensor& grad, const GradHookContext& ctx)>;

struct AutogradMeta {
  bool requires_grad = false;
  // Leaves: the accumulated gradient (allocated as Category::gradient, label name + ".grad").
  Tensor grad;
  // Non-leaves: the node that produced the tensor and which of its outputs it is.
  std::shared_ptr<Node> grad_fn;
  int output_nr = 0;
  // Leaves: called once per backward when the gradient is final.
  std::vector<GradHook> hooks;
  // Leaves: the parameter's name, used to label its gradient in the ledger, and the
  // category its gradient is allocated as (checkpoint's recompute inputs: temporary).
  std::string name;
  Category grad_category = Category::gradient;
  // Leaves: an integer tensor whose gradient is floating (an int8 weight's codes, Note
  // [Int8 weights as parameters] in nn/int8_linear.h); its gradient takes the dtype the
  // backward delivers.
  bool integer_leaf = false;
};

// Where an input's gradient goes: to the node that produced it, or to a leaf.
struct Edge {
  std::shared_ptr<AutogradMeta> leaf;  // set for a leaf that requires grad
  Node* node = nullptr;                // set for a non-leaf
  int output_nr = 0;
};

// Note [Saved tensor hooks]
// While a SavedTensorHooksScope is alive on a thread, every tensor a node saves goes
// through `pack`, and the result of `unpack` on what pack returned is what the rule reads,
// as with torch.autograd.graph.saved_tensors_hooks: offload packs an activation into pinned
// host memory and unpacks it back to the device for backward. Unpacking happens once, just
// before the node's rule runs; the hooks in force at save time are the ones used.
struct SavedTensorHooks {
  std::function<Tensor(const Tensor&)> pack;
  std::function<Tensor(const Tensor&)> unpack;
};
class SavedTensorHooksScope {
 public:
  explicit SavedTensorHooksScope(SavedTensorHooks hooks);
  ~SavedTensorHooksScope();
  SavedTensorHooksScope(const SavedTensorHooksScope&) = delete;
  SavedTensorHooksScope& operator=(const SavedTensorHooksScope&) = delete;

 private:
  std::shared_ptr<const SavedTensorHooks> saved_;
};

struct Node {
  virtual ~Node() = default;
  virtual const char* name() const = 0;
  // Given the gradient of each output (undefined where none arrived), returns the gradient
  // of each input (undefined where the input needs none), in input order.
  virtual std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) = 0;

  // Keeps an alias of `t` for apply() as saved[index]; rules read it only from there, so
  // release() frees it. See Note [Saved tensors are detached aliases]; under a
  // SavedTensorHooksScope the alias is packed (Note [Saved tensor hooks]).
  size_t save(const Tensor& t);
  // Replaces each packed saved tensor by its unpacked form; backward calls it before apply().
  void unpack_saved();
  // Drops the saved tensors; called right after apply() and when a tape is cleared.
  void release();
  // Whether input i gets a gradient (Note [Frozen inputs]): a rule computes only those.
  bool needs_input_grad(size_t i) const {
    return i < next.size() && (next[i].leaf != nullptr || next[i].node != nullptr);
  }
  bool released() const { return released_; }

  std::vector<Edge> next;            // one per input
  std::vector<Tensor> grad_outputs;  // filled during backward, one per output
  std::vector<Tensor> saved;
  // The hooks each saved entry was packed with (null: not packed), parallel to `saved`.
  std::vector<std::shared_ptr<const SavedTensorHooks>> saved_hooks;
  MemoryContext context;  // the forward's label; backward temporaries reuse it
  uint64_t position = 0;  // index on its tape

 private:
  bool released_ = false;
};

}  // namespace fitgrad::autograd
