// Activation checkpointing (DESIGN.md, Autograd): checkpoint(fn, inputs) runs fn without
// recording anything inside it and records one node instead, which saves only fn's inputs
// and the RNG state. Its backward restores that RNG state (so dropout draws the same
// mask), re-runs fn on a private tape with grad on, and backpropagates through it.
// checkpoint_sequential groups consecutive blocks into segments: sqrt(L) segments by
// default, a given count, or an explicit per-block assignment.
#pragma once

#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::autograd {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// Outputs of fn(inputs). fn must be deterministic given its inputs, the parameters it
// reads and the RNG state (DESIGN.md: CPU kernels reduce in a fixed order).
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs);

using Block = std::function<Tensor(const Tensor&)>;

struct SegmentPlan {
  enum class Kind { none, sqrt_blocks, count, per_block };
  Kind kind = Kind::sqrt_blocks;
  int64_t segments = 0;                   // Kind::count
  std::vector<int64_t> segment_of_block;  // Kind::per_block: -1 = not checkpointed

  static SegmentPlan none() { return {Kind::none, 0, {}}; }
  static SegmentPlan sqrt_blocks() { return {Kind::sqrt_blocks, 0, {}}; }
  static SegmentPlan count(int64_t n) { return {Kind::count, n, {}}; }
  // Consecutive blocks with the same id >= 0 form one segment; ids must not repeat
  // after a different id (a segment is one run of blocks).
  static SegmentPlan per_block(std::vector<int64_t> ids) {
    return {Kind::per_block, 0, std::move(ids)};
  }
};

// The checkpointed segments of `blocks` blocks, as [begin, end) block ranges. Blocks in
// no range run without checkpointing. sqrt_blocks: round(sqrt(L)) segments; count n:
// n segments; both split the blocks as evenly as possible, the longer segments first.
std::vector<std::pair<int64_t, int64_t>> plan_segments(int64_t blocks, const SegmentPlan& plan);

// x -> blocks[L-1](...blocks[0](x)), checkpointed per `plan`.
Tensor checkpoint_sequential(const std::vector<Block>& blocks, const Tensor& x,
                             const SegmentPlan& plan = SegmentPlan::sqrt_blocks());

}  // namespace fitgrad::autograd
