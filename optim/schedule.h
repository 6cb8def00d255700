// Learning-rate schedules with the semantics of Hugging Face transformers' get_scheduler:
// the learning rate of optimizer step k (0-based) is lr_at(k) = base_lr * lambda(k), with
// a linear warmup lambda(k) = k / max(1, warmup_steps) for k < warmup_steps (except
// "constant", which has none), then, with progress p = (k - warmup) / max(1, total - warmup):
//   linear                1 - p, floored at 0
//   cosine                0.5 (1 + cos(pi p)), floored at 0 (half a cosine wave)
//   cosine_with_restarts  0.5 (1 + cos(pi ((cycles p) mod 1))) for p < 1, else 0 (cycles 1)
//   polynomial            ((base_lr - lr_end) (1 - p)^power + lr_end) / base_lr, and
//                         lr_end / base_lr past total (power 1, lr_end 1e-7)
//   constant_with_warmup  1
//   constant              1 (no warmup)
//   inverse_sqrt          1 / sqrt((k + shift) / timescale), timescale = warmup or 10000 when
//                         warmup is 0, shift = timescale - warmup
// The training loop calls optimizer.set_lr(schedule.lr_at(optimizer.steps())) before each
// step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fitgrad::optim {

class LrSchedule {
 public:
  enum class Kind {
    linear,
    cosine,
    cosine_with_restarts,
    polynomial,
    constant,
    constant_with_warmup,
    inverse_sqrt
  };
  LrSchedule(Kind kind, double base_lr, int64_t warmup_steps, int64_t total_steps);

  // The learning rate of optimizer step `step` (0-based).
  double lr_at(int64_t step) const;
  Kind kind() const { return kind_; }
  std::string type() const;  // the Hugging Face name
  double base_lr() const { return base_lr_; }
  int64_t warmup_steps() const { return warmup_; }
  int64_t total_steps() const { return total_; }

 private:
  double lambda(int64_t step) const;
  Kind kind_;
  double base_lr_;
  int64_t warmup_;
  int64_t total_;
};

// Parses a Hugging Face --lr_scheduler_type. Throws "[lr_scheduler_type] unknown 'x'
// (known: ...)", or "... 'x' is not implemented yet" for a type transformers has and
// fitgrad does not.
LrSchedule make_lr_schedule(const std::string& type, double base_lr, int64_t warmup_steps,
                            int64_t total_steps);
// The types make_lr_schedule accepts.
std::vector<std::string> lr_schedule_names();

}  // namespace fitgrad::optim
