// The interrupt flag and the threads that act on it (interrupt.h).
#include "tensor/interrupt.h"

#include <csignal>
#include <string>

namespace fitgrad {
namespace detail {

std::atomic<int> g_interrupt{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler stores the flag");

namespace {
thread_local int t_scopes = 0;    // live InterruptScopes on this thread
thread_local int t_deferred = 0;  // live deferring DeferInterrupts on this thread
}  // namespace

// Never while an exception unwinds: a destructor that dispatches an op must not throw.
bool acts_on_interrupts() {
  return t_scopes > 0 && t_deferred == 0 && std::uncaught_exceptions() == 0;
}

void throw_interrupted(int signal) { throw Interrupted(signal); }

}  // namespace detail

const char* Interrupted::what() const noexcept { return "interrupted"; }

void note_interrupt(int signal) noexcept {
  detail::g_interrupt.store(signal, std::memory_order_relaxed);
}

void clear_interrupt() noexcept { detail::g_interrupt.store(0, std::memory_order_relaxed); }

InterruptScope::InterruptScope() { ++detail::t_scopes; }
InterruptScope::~InterruptScope() { --detail::t_scopes; }

DeferInterrupts::DeferInterrupts(bool defer) : defer_(defer) {
  if (defer_) ++detail::t_deferred;
}
DeferInterrupts::~DeferInterrupts() {
  if (defer_) --detail::t_deferred;
}

const char* signal_name(int signal) {
  if (signal == SIGINT) return "SIGINT";
  if (signal == SIGTERM) return "SIGTERM";
  thread_local std::string name;
  name = "signal " + std::to_string(signal);
  return name.c_str();
}

}  // namespace fitgrad
