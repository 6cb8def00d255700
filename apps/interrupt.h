// Ctrl-C and kill for every command: SIGINT and SIGTERM only record the signal in the
// process-wide flag (tensor/interrupt.h), which the command's work reads at its
// interruption points (Note [Interruption points]); a training run reads it between steps
// instead, so the step in flight finishes and a checkpoint is saved (Note [Signals act
// within a batch]). Either way the command exits 128 + the signal (130 for SIGINT, 143 for
// SIGTERM, the shell's convention). The handler then restores the default action, so a
// second Ctrl-C stops the process at once; files on disk stay whole either way (Note
// [Atomic checkpoints], Note [All outputs or none]).
#pragma once

namespace fitgrad::apps {

// Installs the handlers for its lifetime and clears the flag; the previous handlers come
// back when it ends.
class SignalHandlers {
 public:
  SignalHandlers();
  ~SignalHandlers();
  SignalHandlers(const SignalHandlers&) = delete;
  SignalHandlers& operator=(const SignalHandlers&) = delete;
};

}  // namespace fitgrad::apps
