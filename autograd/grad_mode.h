// Grad mode: whether differentiable ops record nodes on the tape. Thread-local, like
// torch.no_grad(); a loader thread or an evaluation loop turns it off for itself.
#pragma once

namespace fitgrad::autograd {

bool grad_enabled();
void set_grad_enabled(bool enabled);

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool saved_;
};

// Sets grad mode to `enabled` for its lifetime (used by checkpoint's recompute).
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled);
  ~GradModeGuard();
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool saved_;
};

}  // namespace fitgrad::autograd
