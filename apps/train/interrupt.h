// Ctrl-C and kill for a training run: SIGINT and SIGTERM only set a flag that the loop
// reads between steps, so the step in flight finishes, a checkpoint is saved and the run
// exits cleanly (130 for SIGINT, 143 for SIGTERM, the shell's convention). The handler
// then restores the default action, so a second Ctrl-C stops the process at once; the
// checkpoints on disk stay whole either way (Note [Atomic checkpoints]).
#pragma once

namespace fitgrad::apps {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handlers
  ~InterruptGuard();  // restores the previous ones
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  // The signal received since construction, or 0.
  static int received();
};

}  // namespace fitgrad::apps
