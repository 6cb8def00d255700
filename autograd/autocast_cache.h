// The per-step autocast weight cache: while an AutocastCacheScope is alive, each parameter is
// cast to the compute dtype once, and every later use (the next micro-batch, a checkpoint's
// recompute, a tied weight's second use) reads that copy.
//
// Note [Autocast weight cache]
// What is cached: a parameter (a leaf that requires grad and whose gradient is allocated as
// Category::gradient), the first time autocast_operands casts it to a compute dtype, keyed by
// its TensorImpl and that dtype, as PyTorch's autocast caches the casts of leaves requiring
// grad. Activations and frozen weights are cast each time, as there. The inputs of a
// checkpoint's recompute are leaves requiring grad too, but activations (their gradients are
// temporary): PyTorch would cache them; here they are cast each time, so none outlives its
// segment.
// How a use is recorded: the tape consumes every node at each backward (Note [What backward
// frees and when] in tape.h), so the cached tensor itself may carry no grad_fn. The copy is
// made with grad mode off: a plain compute-dtype tensor. Each use returns a fresh alias of it
// and records a cast node with no saved tensors, whose backward casts the incoming gradient
// to the weight's dtype and sends it along the weight's edge: the rule of cast() exactly,
// so the weight's gradient is the one an uncached run gives, bit for bit. With grad mode off
// (a checkpoint's forward) the use records nothing but still shows the weight to the
// checkpoint's LeafCollector, as an uncached cast would.
// When it is dropped: an entry remembers the version of the weight's storage
// (Storage::version, bumped by every in-place front-end); a use that finds a different
// version casts again and replaces the entry. The whole cache goes when the scope ends.
// The trainer opens one scope per optimizer step, around the forward and backward of its
// micro-batches, and closes it before clipping and the optimizer update, so the copies are
// freed before the weights change and before the optimizer allocates its state.
// How the ledger shows it: a cached copy is a parameter in another dtype, held for the step
// whatever the batch size, so it is allocated as Category::parameter, labelled with the
// parameter's name and the dtype (`layers.0.attn.c_attn.weight.bf16`). It is not an
// activation: it does not grow with the batch, and every node that saves it for backward
// saves an alias of these bytes, not bytes of its own. Meta makes the same copies at the
// same points as the CPU (nothing here depends on data), so dry runs stay exact.
// A scope opened while another is alive on the thread defers to the outer one: it caches
// nothing itself and ending it drops nothing, so a helper that opens its own scope inside
// the trainer's step does not empty the step's cache.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::autograd {

class AutocastCacheScope {
 public:
  AutocastCacheScope();
  ~AutocastCacheScope();
  AutocastCacheScope(const AutocastCacheScope&) = delete;
  AutocastCacheScope& operator=(const AutocastCacheScope&) = delete;

  // Copies made so far in this scope (a weight cast again after an in-place write counts
  // again); 0 for a scope that defers to an outer one.
  int64_t casts() const { return casts_; }
  // Entries held now.
  size_t size() const { return entries_.size(); }

 private:
  friend Tensor cached_cast(const Tensor& weight, DType dtype);
  struct Entry {
    Tensor weight;  // keeps the key's TensorImpl alive, so its address is not reused
    uint64_t version = 0;
    Tensor copy;  // the weight's shape, in the compute dtype; no autograd data
  };
  bool active_;
  int64_t casts_ = 0;
  // In first-cast order, which is also the order the copies are freed in when the scope
  // ends: the same on every device, unlike an order by address.
  std::vector<Entry> entries_;
  std::map<std::pair<const TensorImpl*, DType>, size_t> index_;  // into entries_
};

// `weight` in `dtype` from the thread's cache, recording a cast node when grad mode is on
// (Note [Autocast weight cache]); undefined when no scope is alive or weight is not a leaf
// that requires grad, so the caller casts as usual.
Tensor cached_cast(const Tensor& weight, DType dtype);

}  // namespace fitgrad::autograd
