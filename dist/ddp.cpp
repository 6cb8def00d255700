// DDP's buckets and their reduction from the gradient hooks (ddp.h, Note [DDP buckets]).
#include "dist/ddp.h"

#include <fmt/format.h>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"

namespace fitgrad::dist {

// What the hooks reach: they stay on the parameters after the GradBuckets is gone, and hold
// neither it nor a parameter (a hook holding its parameter would keep it alive).
struct GradBuckets::Shared {
  GradBuckets* owner = nullptr;
  bool armed = false;
  std::vector<bool> ready;  // per parameter, in this backward
};

GradBuckets::GradBuckets(ProcessGroup& group,
                         const std::vector<std::pair<std::string, Tensor>>& params,
                         const DdpOptions& options)
    : group_(group), shared_(std::make_shared<Shared>()) {
  FG_CHECK(options.bucket_cap_bytes >= 1 && options.first_bucket_bytes >= 1,
           "[ddp] bucket caps must be positive, got {} and {} bytes", options.bucket_cap_bytes,
           options.first_bucket_bytes);
  for (const auto& entry : params) params_.push_back(entry.second);
  bucket_of_.assign(params_.size(), 0);
  dropped_.assign(params_.size(), false);
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    const int64_t cap =
        buckets_.size() == 1 ? options.first_bucket_bytes : options.bucket_cap_bytes;
    // An integer leaf (int8 codes) has a floating gradient (autograd::set_requires_float_grad)
    // in the compute dtype, which its bucket averages in f32.
    const DType grad_dtype = is_floating(p.dtype()) ? p.dtype() : DType::f32;
    if (buckets_.empty() || buckets_.back().dtype != grad_dtype || bytes >= cap) {
      buckets_.emplace_back();
      buckets_.back().dtype = grad_dtype;
      bytes = 0;
    }
    Bucket& b = buckets_.back();
    b.params.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += p.numel();
    bytes += p.numel() * int64_t(element_size(grad_dtype));
    bucket_of_[k] = buckets_.size() - 1;
  }
  for (Bucket& b : buckets_) b.pending = b.params.size();
  shared_->owner = this;
  shared_->ready.assign(params_.size(), false);
  for (size_t k = 0; k < params_.size(); ++k)
    autograd::add_grad_hook(
        params_[k], [shared = shared_, k](const Tensor&, const autograd::GradHookContext& c) {
          if (c.is_last_micro_batch && shared->owner && shared->armed) shared->owner->ready(k);
        });
}

GradBuckets::~GradBuckets() {
  shared_->owner = nullptr;
  // Note [Aborting a group] in process_group.h: a failed step's all-reduces that are still
  // pending must not hold up this rank's end.
  size_t pending = 0;
  for (const auto& work : orphans_) pending += work->done() ? 0 : 1;
  if (pending > 0)
    group_.abort(fmt::format(
        "[ddp] a failed step left {} all-reduce(s) in flight when its buckets ended; the group "
        "was aborted so that this rank does not wait for peers that may never join them",
        pending));
}

void GradBuckets::arm() {
  shared_->armed = true;
  shared_->ready.assign(params_.size(), false);
  for (Bucket& b : buckets_) b.pending = b.params.size();
  next_ = retired_ = 0;
}

// Note [Orphaned all-reduces]
// After an exception in the step, nothing is waited for (a peer may never join the collective),
// but an all-reduce in flight may still write its bucket's buffer. Gloo's group holds the
// tensor until its collective ends; NCCL's Work is the buffer's only holder (the card writes
// it from the group's stream). So the Works in flight are kept here, with their buffers, until
// these buckets end, and the allocator cannot hand those bytes to another tensor meanwhile
// (issue 46). What they hold is at most kBucketsInFlight buffers per failed step. When the
// buckets end with one still pending, they abort the group first (Note [Aborting a group] in
// process_group.h), so the buckets must end before their group (train/train_run.h's order).
void GradBuckets::disarm() {
  shared_->armed = false;
  for (Bucket& b : buckets_) {
    if (b.work) orphans_.push_back(std::move(b.work));
    b.flat = Tensor();
    b.work.reset();
  }
}

void GradBuckets::drop_after_packing(std::vector<bool> dropped) {
  FG_CHECK(dropped.size() == params_.size(), "[ddp] {} drop marks for {} parameters",
           dropped.size(), params_.size());
  dropped_ = std::move(dropped);
}

void GradBuckets::ready(size_t param) {
  if (shared_->ready[param]) return;
  shared_->ready[param] = true;
  --buckets_[bucket_of_[param]].pending;
  launch_ready();
}

void GradBuckets::launch_ready() {
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) {
    launch(next_++);
    // Note [DDP buckets]: at most kBucketsInFlight buffers live at once.
    while (next_ - retired_ > kBucketsInFlight) retire(retired_++);
  }
}

void GradBuckets::launch(size_t index) {
  autograd::NoGradGuard no_grad;
  Bucket& b = buckets_[index];
  const Device device = params_[b.params.front()].device();
  {
    const MemoryContextScope scope(
        {Category::collective, intern_label(fmt::format("ddp.bucket.{}", index))});
    b.flat = Tensor::empty({b.numel}, b.dtype, device);  // (numel)
  }
  for (size_t j = 0; j < b.params.size(); ++j) {
    const Tensor& p = params_[b.params[j]];
    Tensor slot = b.flat.narrow(0, b.offsets[j], p.numel());
    const Tensor g = autograd::grad(p);
    if (g.defined())
      slot.copy_(g.reshape({p.numel()}));
    else
      slot.fill_(0.0);  // not reached by this rank's backward (Note [DDP buckets])
    if (dropped_[b.params[j]]) autograd::clear_grad(p);
  }
  b.work = group_.all_reduce_async(b.flat, ReduceOp::avg);
}

void GradBuckets::retire(size_t index) {
  autograd::NoGradGuard no_grad;
  Bucket& b = buckets_[index];
  b.work->wait();
  for (size_t j = 0; j < b.params.size(); ++j) {
    if (dropped_[b.params[j]]) continue;
    const Tensor& p = params_[b.params[j]];
    const Tensor reduced = b.flat.narrow(0, b.offsets[j], p.numel()).reshape(p.shape());
    Tensor g = autograd::grad(p);
    if (g.defined()) {
      g.copy_(reduced);
    } else {
      const MemoryContextScope scope({Category::gradient, intern_label("ddp.grad")});
      autograd::set_grad(p, reduced.clone());
    }
  }
  b.flat = Tensor();
  b.work.reset();
}

void GradBuckets::finish() {
  FG_CHECK(shared_->armed, "[ddp] finish() without arm()");
  for (; next_ < buckets_.size(); ++next_) launch(next_);
  for (; retired_ < buckets_.size(); ++retired_) retire(retired_);
  shared_->armed = false;
}

}  // namespace fitgrad::dist
