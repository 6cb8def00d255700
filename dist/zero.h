// ZeRO stages 1 and 2 (--zero_stage) over a process group: the optimizer state, and with
// stage 2 the gradients, of each trained parameter held by one rank only.
//
// Note [ZeRO by whole parameters]
// ZeRO (Rajbhandari et al., 2020) removes the redundant copies that data parallelism keeps on
// every rank: stage 1 partitions the optimizer state across the N ranks, stage 2 the
// gradients as well, each rank updating its part and the parameters gathered after the step.
// DeepSpeed and llm.c cut one flat buffer of every parameter into N equal shards; fitgrad
// cuts along parameter boundaries, as PyTorch's ZeroRedundancyOptimizer does: each trained
// parameter has one owner, which alone holds its optimizer state and applies its update,
// and then broadcasts it to the others. That lets every optimizer shard unchanged: Adafactor's
// row and column factors, GaLore's SVD and APOLLO's projections need their whole matrix, and
// Adam8bit's 256-value blocks would straddle flat shards and quantize differently from one
// process. The price is balance: owners are assigned greedily by the bytes a parameter
// brings (its optimizer state; for a parameter without state, its gradient), the largest
// first (ties: the lower index), each to the rank with the fewest bytes so far (ties: the
// lower rank), so a rank's share of the state is within one parameter's of 1/N.
//
// A step under ZeRO:
//   1. DDP's averaged gradients (Note [DDP buckets] in dist/ddp.h). Stage 1 keeps every
//      reduced gradient; stage 2 drops a gradient the rank does not own as soon as its
//      bucket is packed (the all-reduce's buffer has it), so the backward's gradients
//      shrink to the rank's share while it runs. Gradient accumulation still accumulates
//      every gradient locally before the last micro-batch.
//   2. Clipping by the global norm: with stage 2 each rank sums the squares of its own
//      gradients, and the ranks' sums are added on the host in rank order (reduce_norm).
//   3. The update: each rank steps its own parameters and skips the others (Note [Sharded
//      steps] in optim/optimizer.h), then every parameter is broadcast from its owner, in
//      index order, so all ranks hold the same weights, equal to one process's.
// A checkpoint is the one process's file: save gathers each parameter's state from its
// owner into rank 0's host memory, one tensor at a time (consolidated_state_dict), and a
// resume reads the whole file on every rank and keeps its own parameters' state (local), so
// a run resumes on any world size.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "optim/optimizer.h"

namespace fitgrad::dist {

class ZeroSharding {
 public:
  // stage 1 or 2, over the optimizer's parameters.
  ZeroSharding(ProcessGroup& group, optim::Optimizer& optimizer, int stage);

  int stage() const { return stage_; }
  // The rank that owns optimizer parameter `index`, and whether it is this one.
  int owner(size_t index) const { return owner_[index]; }
  bool owns(size_t index) const { return owner_[index] == group_.rank(); }
  // Whether this rank owns the parameter named `name` (throws for an unknown name).
  bool owns(const std::string& name) const;

  // With stage 2, sum_sq (one double of ops::zero_doubles) becomes the sum over the ranks.
  void reduce_norm(const Tensor& sum_sq) const;
  // The optimizer step of this rank's parameters, then each parameter from its owner.
  void step();
  // The whole optimizer state as one process's state_dict, on the host of rank 0 (the other
  // ranks get an empty map). Every rank must call it.
  std::map<std::string, Tensor> consolidated_state_dict() const;
  // Of a whole state_dict, what this rank keeps: its own parameters' entries and the
  // optimizer's global ones.
  std::map<std::string, Tensor> local(const std::map<std::string, Tensor>& whole) const;

 private:
  ProcessGroup& group_;
  optim::Optimizer& optimizer_;
  int stage_;
  std::vector<int> owner_;  // by optimizer parameter index
};

}  // namespace fitgrad::dist
