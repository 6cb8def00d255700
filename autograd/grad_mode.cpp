// The thread-local grad-mode flag.
#include "autograd/grad_mode.h"

namespace fitgrad::autograd {

namespace {
thread_local bool tls_grad_enabled = true;
}

bool grad_enabled() { return tls_grad_enabled; }
void set_grad_enabled(bool enabled) { tls_grad_enabled = enabled; }

NoGradGuard::NoGradGuard() : saved_(tls_grad_enabled) { tls_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { tls_grad_enabled = saved_; }

GradModeGuard::GradModeGuard(bool enabled) : saved_(tls_grad_enabled) {
  tls_grad_enabled = enabled;
}
GradModeGuard::~GradModeGuard() { tls_grad_enabled = saved_; }

}  // namespace fitgrad::autograd
