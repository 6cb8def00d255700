// Learning-rate schedules (see schedule.h).
#include "optim/schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include "tensor/error.h"

namespace fitgrad::optim {
namespace {

constexpr double kPolyLrEnd = 1e-7;
constexpr double kPolyPower = 1.0;
constexpr double kRestartCycles = 1.0;
constexpr int64_t kInverseSqrtTimescale = 10000;  // when there is no warmup

constexpr std::pair<const char*, LrSchedule::Kind> kKinds[] = {
    {"linear", LrSchedule::Kind::linear},
    {"cosine", LrSchedule::Kind::cosine},
    {"cosine_with_restarts", LrSchedule::Kind::cosine_with_restarts},
    {"polynomial", LrSchedule::Kind::polynomial},
    {"constant", LrSchedule::Kind::constant},
    {"constant_with_warmup", LrSchedule::Kind::constant_with_warmup},
    {"inverse_sqrt", LrSchedule::Kind::inverse_sqrt},
};

// Types transformers' get_scheduler knows that fitgrad does not have.
constexpr const char* kNotYet[] = {"reduce_lr_on_plateau", "cosine_with_min_lr",
                                   "warmup_stable_decay"};

}  // namespace

LrSchedule::LrSchedule(Kind kind, double base_lr, int64_t warmup_steps, int64_t total_steps)
    : kind_(kind), base_lr_(base_lr), warmup_(warmup_steps), total_(total_steps) {
  FG_CHECK(std::isfinite(base_lr) && base_lr >= 0,
           "[lr_scheduler_type] base learning rate must be >= 0, got {}", base_lr);
  FG_CHECK(warmup_steps >= 0 && total_steps >= 0,
           "[lr_scheduler_type] warmup ({}) and total ({}) steps must be >= 0", warmup_steps,
           total_steps);
  FG_CHECK(kind != Kind::polynomial || total_steps > warmup_steps,
           "[lr_scheduler_type] polynomial needs more total steps ({}) than warmup steps ({})",
           total_steps, warmup_steps);
  FG_CHECK(kind != Kind::polynomial || base_lr > kPolyLrEnd,
           "[lr_scheduler_type] polynomial decays to {}, so the learning rate must be larger, "
           "got {}",
           kPolyLrEnd, base_lr);
}

std::string LrSchedule::type() const {
  for (const auto& [name, kind] : kKinds)
    if (kind == kind_) return name;
  FG_ASSERT(false);
}

double LrSchedule::lr_at(int64_t step) const { return base_lr_ * lambda(step); }

double LrSchedule::lambda(int64_t step) const {
  const double k = double(step);
  if (kind_ == Kind::constant) return 1.0;
  if (step < warmup_) return k / double(std::max<int64_t>(1, warmup_));
  const double progress = double(step - warmup_) / double(std::max<int64_t>(1, total_ - warmup_));
  switch (kind_) {
    case Kind::linear:
      return std::max(0.0, double(total_ - step) / double(std::max<int64_t>(1, total_ - warmup_)));
    case Kind::cosine: return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
    case Kind::cosine_with_restarts:
      if (progress >= 1.0) return 0.0;
      return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi *
                                                 std::fmod(kRestartCycles * progress, 1.0))));
    case Kind::polynomial: {
      if (step > total_) return kPolyLrEnd / base_lr_;
      const double range = base_lr_ - kPolyLrEnd;
      const double remaining = 1.0 - double(step - warmup_) / double(total_ - warmup_);
      return (range * std::pow(remaining, kPolyPower) + kPolyLrEnd) / base_lr_;
    }
    case Kind::constant_with_warmup: return 1.0;
    case Kind::inverse_sqrt: {
      const int64_t timescale = warmup_ > 0 ? warmup_ : kInverseSqrtTimescale;
      const double shift = double(timescale - warmup_);
      return 1.0 / std::sqrt((k + shift) / double(timescale));
    }
    case Kind::constant: break;
  }
  FG_ASSERT(false);
}

LrSchedule make_lr_schedule(const std::string& type, double base_lr, int64_t warmup_steps,
                            int64_t total_steps) {
  for (const auto& [name, kind] : kKinds)
    if (type == name) return LrSchedule(kind, base_lr, warmup_steps, total_steps);
  for (const char* name : kNotYet)
    FG_CHECK(type != name, "[lr_scheduler_type] '{}' is not implemented yet (available: {})", type,
             fmt::join(lr_schedule_names(), ", "));
  throw Error(fmt::format("[lr_scheduler_type] unknown '{}' (known: {})", type,
                          fmt::join(lr_schedule_names(), ", ")));
}

std::vector<std::string> lr_schedule_names() {
  std::vector<std::string> names;
  for (const auto& [name, kind] : kKinds) names.emplace_back(name);
  return names;
}

}  // namespace fitgrad::optim
