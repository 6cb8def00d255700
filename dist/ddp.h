// Data parallelism's gradient reduction (DDP): the trained parameters' gradients, grouped in
// buckets, averaged across the ranks of a process group while the backward still runs.
//
// Note [DDP buckets]
// As PyTorch's DistributedDataParallel: the parameters are taken in the reverse of their
// registration order (roughly the order the backward finishes their gradients) and packed
// into buckets of one dtype, the first closed at 1 MiB and the others at the cap
// (--ddp_bucket_cap_mb, 25 MiB by default), a bucket closing once its bytes reach its cap.
// During the backward of the last micro-batch (arm() .. finish()) each parameter's gradient
// hook marks it ready; when a bucket's last parameter is ready its gradients are copied into
// a flat buffer (Category::collective, "ddp.bucket.<i>") and its all-reduce (avg) starts on
// the group's worker, overlapping the rest of the backward. Buckets start strictly in index
// order, the same order on every rank (a ready bucket waits for the ones before it), so the
// ranks' collectives pair up. At most kBucketsInFlight (2) buffers live at once: starting a
// third waits for the oldest and copies its averages back into the gradients, whose values
// are final, and frees it; so the collective buffers hold two buckets, not a second copy of
// every gradient (PyTorch avoids the copy altogether by making the gradients views of the
// bucket buffers). finish() starts what is left (a parameter this backward did not reach
// contributes zeros) and retires every bucket in order: the optimizer, the clipping and the
// loss scaler then see the reduced gradients, equal on every rank.
//
// Averaging makes N ranks with micro-batches of B rows the same step as one process with N·B
// rows: each rank's loss is the mean over its B·T tokens, and the mean of N such means is the
// mean over the N·B·T tokens (every row has T targets). Earlier micro-batches of a gradient
// accumulation only accumulate locally; the reduction runs once, on the last one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dist/process_group.h"
#include "tensor/tensor.h"

namespace fitgrad::dist {

// Buckets whose all-reduce may be in flight at once (Note [DDP buckets]).
inline constexpr size_t kBucketsInFlight = 2;

struct DdpOptions {
  int64_t bucket_cap_bytes = int64_t(25) << 20;
  int64_t first_bucket_bytes = int64_t(1) << 20;
};

class GradBuckets {
 public:
  // `params`: the trained parameters, in registration order. Installs their gradient hooks.
  GradBuckets(ProcessGroup& group, const std::vector<std::pair<std::string, Tensor>>& params,
              const DdpOptions& options);
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Before the last micro-batch's backward: from now each final gradient is reduced.
  void arm();
  // After it: every bucket reduced and copied back into the gradients.
  void finish();
  // After an exception in the step: the hooks stop reducing, nothing is waited for, and the
  // all-reduces in flight are kept with their buffers (Note [Orphaned all-reduces] in ddp.cpp).
  void disarm();
  // Those kept so far.
  size_t orphaned_works() const { return orphans_.size(); }
  // ZeRO stage 2 (Note [ZeRO by whole parameters] in dist/zero.h): the gradient of each
  // parameter marked here (by the constructor's index) is dropped once its bucket is packed,
  // and finish() gives it no reduced gradient.
  void drop_after_packing(std::vector<bool> dropped);

  size_t num_buckets() const { return buckets_.size(); }
  // The parameters (indices into the constructor's list) of bucket b, in bucket order.
  const std::vector<size_t>& bucket_params(size_t b) const { return buckets_[b].params; }

 private:
  struct Bucket {
    std::vector<size_t> params;
    std::vector<int64_t> offsets;  // of each parameter in the flat buffer
    int64_t numel = 0;
    DType dtype = DType::f32;
    size_t pending = 0;  // parameters not ready yet in this backward
    Tensor flat;         // (numel) while in flight
    std::shared_ptr<Work> work;
  };
  struct Shared;

  void ready(size_t param);
  void launch_ready();
  void launch(size_t b);
  // Waits for bucket b's all-reduce, copies its averages into the gradients (not the
  // dropped ones) and frees its buffer.
  void retire(size_t b);

  ProcessGroup& group_;
  std::vector<Tensor> params_;
  std::vector<size_t> bucket_of_;
  std::vector<bool> dropped_;  // by parameter: ZeRO stage 2 drops its gradient
  std::vector<Bucket> buckets_;
  size_t next_ = 0;                             // the next bucket to launch
  size_t retired_ = 0;                          // the next bucket to wait for and copy back
  std::vector<std::shared_ptr<Work>> orphans_;  // Note [Orphaned all-reduces]
  std::shared_ptr<Shared> shared_;
};

}  // namespace fitgrad::dist
