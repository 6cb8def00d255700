// The process-wide interrupt flag: a signal handler (apps/interrupt.h) records SIGINT or
// SIGTERM here, and the work of a command reads it at cheap points — each op dispatched,
// each layer built, each tensor loaded, each event rendered — through interruption_point(),
// which throws Interrupted on a thread that acts on signals at once.
//
// Note [Interruption points]
// A command must stop within about a second of SIGINT or SIGTERM wherever it is: building a
// model of 60,000 layers, planning one step of it, loading a file, rendering a trace. No
// single loop covers all of these, so the work reads one flag at many points instead; the
// read is one relaxed atomic load, and only when it finds a signal does it look further.
// The points throw only on a thread inside an InterruptScope (the command's own thread,
// apps/guard.h), never on a loader's worker, not inside a DeferInterrupts (a training run's
// step, which finishes and is saved: Note [Signals act within a batch]), and not while an
// exception unwinds (a destructor's op must not throw). Interrupted is not a
// fitgrad::Error, so no handler of bad input takes it for one; the command's guard turns
// it into exit code 128 + the signal and one line saying what the command did.
#pragma once

#include <atomic>
#include <exception>

namespace fitgrad {

class Interrupted : public std::exception {
 public:
  explicit Interrupted(int signal) : signal_(signal) {}
  int signal() const { return signal_; }
  const char* what() const noexcept override;

 private:
  int signal_;
};

namespace detail {
extern std::atomic<int> g_interrupt;  // the signal received, or 0
[[noreturn]] void throw_interrupted(int signal);
bool acts_on_interrupts();
}  // namespace detail

// Records `signal`; async-signal-safe (a lock-free atomic store).
void note_interrupt(int signal) noexcept;
// The signal received, or 0.
inline int interrupt_received() noexcept {
  return detail::g_interrupt.load(std::memory_order_relaxed);
}
void clear_interrupt() noexcept;

// Throws Interrupted when a signal was received and this thread acts on signals at once.
inline void interruption_point() {
  if (const int sig = interrupt_received(); sig != 0) [[unlikely]]
    if (detail::acts_on_interrupts()) detail::throw_interrupted(sig);
}

// While one lives, this thread's interruption points throw.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
};

// While one lives with `defer` true, this thread's interruption points do not throw: the
// caller reads interrupt_received() at the points where it can stop cleanly.
class DeferInterrupts {
 public:
  explicit DeferInterrupts(bool defer = true);
  ~DeferInterrupts();
  DeferInterrupts(const DeferInterrupts&) = delete;
  DeferInterrupts& operator=(const DeferInterrupts&) = delete;

 private:
  bool defer_;
};

// "SIGINT", "SIGTERM" or "signal N".
const char* signal_name(int signal);

}  // namespace fitgrad
