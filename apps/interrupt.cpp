// SIGINT/SIGTERM to the interrupt flag (interrupt.h).
#include "apps/interrupt.h"

#include <csignal>

#include "tensor/interrupt.h"

namespace fitgrad::apps {
namespace {

struct sigaction g_old_int, g_old_term;

void on_signal(int sig) {
  note_interrupt(sig);
  std::signal(sig, SIG_DFL);  // a second signal takes the default action
}

}  // namespace

SignalHandlers::SignalHandlers() {
  clear_interrupt();
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
}

SignalHandlers::~SignalHandlers() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

}  // namespace fitgrad::apps
