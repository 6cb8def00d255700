// Activation offload (issues 15 and 27): the saved-tensor hooks (Note [Saved tensor hooks] in
// autograd/node.h) that move what the forward saves for backward to far memory and back,
// overlapped with compute.
//
// Note [Activation offload]
// With gradient checkpointing the forward keeps, outside its recomputed segments, each
// segment's input and what the head and the loss save: activations the device holds from
// the forward to the backward. Under these hooks each saved tensor whose bytes are in the
// activation category of the compute device is copied to far memory and the device copy is
// released once the copy is done; backward brings it back before its rule runs. Far memory
// is pinned host memory for a card, meta:1 (planned host memory) for meta, and cpu:1 for
// the CPU: a host arena with its own allocator and ledger, so that the CPU runs the same
// code and its device peak shows what a card would save. Parameters and other saved tensors
// (ids, a frozen base) stay. The recompute inside backward saves on the device as usual,
// since the hooks are only in force during the forward.
//
// Note [Offload overlaps with one block in flight]
// The copies are AsyncCopy's (Note [Copies retired in program order] in
// tensor/async_copy.h), so each overlaps the compute around it:
//   forward   saving tensor k starts its copy out and waits for the copy of tensor k-1,
//             which had block k-1's forward to finish; end_forward() waits for the last;
//   backward  unpacking a tensor waits for its copy in (started one unpack earlier, or now
//             if it was not), then starts the copy in of the newest tensor still out: the
//             prefetch, which runs while this block recomputes and runs backward.
// So a card holds at most one offloaded block input beyond the plain checkpointed run's
// working set in each direction, and the dry run on meta plans that window exactly, since
// the copies are waited for at the same points of the program on every device.
#pragma once

#include <memory>

#include "autograd/node.h"
#include "tensor/device.h"
#include "tensor/memory/caching_allocator.h"

namespace fitgrad::train {

// Where `device` offloads activations: cpu (pinned) for cuda:N, meta:1 for meta, cpu:1 for cpu.
Device activation_far_memory(Device device);
// The allocator of that far memory (the pinned pool for a card), whose ledger shows it.
CachingAllocator& far_memory_allocator(Device device);

class ActivationOffload {
 public:
  explicit ActivationOffload(Device device);
  ~ActivationOffload();
  ActivationOffload(const ActivationOffload&) = delete;
  ActivationOffload& operator=(const ActivationOffload&) = delete;

  // The hooks to hold in force during the forward.
  autograd::SavedTensorHooks hooks() const;
  // Waits for the forward's last copy out: after it, every offloaded tensor has left the
  // device. Call when the forward is done, before backward.
  void end_forward();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace fitgrad::train
