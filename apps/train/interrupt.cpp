// SIGINT/SIGTERM to a flag (interrupt.h).
#include "apps/train/interrupt.h"

#include <csignal>

namespace fitgrad::apps {
namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_old_int, g_old_term;

void on_signal(int sig) {
  g_signal = sig;
  std::signal(sig, SIG_DFL);  // a second signal takes the default action
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

int InterruptGuard::received() { return g_signal; }

}  // namespace fitgrad::apps
