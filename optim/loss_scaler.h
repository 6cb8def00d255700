// The dynamic loss scaler of fp16 training, with torch.amp.GradScaler's semantics, so that
// a recipe's scale trajectory and skipped steps carry over unchanged.
//
// Note [Dynamic loss scaling]
// The loss is multiplied by `scale` before backward, so small fp16 gradients do not flush
// to zero. Before clipping and the optimizer step, unscale_and_check multiplies every
// gradient by inv_scale = float(1 / double(scale)), as GradScaler.unscale_ does, and reports
// whether any gradient holds an inf or a NaN. update(found_inf) then moves the scale:
//   found_inf:  scale *= backoff_factor (0.5), and the run of clean steps restarts;
//   otherwise:  one more clean step; after growth_interval (2000) of them in a row,
//               scale *= growth_factor (2), unless that product is not finite, and the run
//               restarts.
// A step with found_inf is skipped by the caller (no optimizer update) and counted. The
// scale starts at init_scale = 2^16. state_dict holds "scale" (f32, as GradScaler's
// _scale) and "growth_tracker" (i64), so a resume continues the same trajectory. On meta
// there are no values: unscale_and_check allocates what it would and reports no inf.
//
// Note [The loss scaler's one read]
// The squares of all gradients sum into one double on their device and the host reads it
// once per step to decide the skip: the one host read of an fp16 step outside logging (Note
// [Host reads] in tensor/host_reads.h). GradScaler makes the same read (its optimizer step
// asks found_inf.item()). Skipping on the device would need every optimizer kernel, and the
// step counters of their bias corrections, to obey a device flag; not done.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::optim {

struct LossScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerOptions& options = {});

  float scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  // Multiplies every defined gradient of `params` (autograd::grad) by inv_scale in place and
  // returns whether any held an inf or a NaN before (Note [Dynamic loss scaling]).
  bool unscale_and_check(const std::vector<Tensor>& params) const;
  // Moves the scale after a step (Note [Dynamic loss scaling]).
  void update(bool found_inf);

  // {"scale": f32 scalar, "growth_tracker": i64 scalar}; load checks both and names a bad one.
  std::map<std::string, Tensor> state_dict() const;
  void load_state_dict(const std::map<std::string, Tensor>& state);

 private:
  LossScalerOptions options_;
  float scale_;
  int64_t growth_tracker_ = 0;
};

}  // namespace fitgrad::optim
