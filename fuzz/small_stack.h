// Runs one fuzz input on a thread of its own with a bounded stack (kFuzzStack), so that an
// input which recurses past fitgrad's depth bounds (Note [JSON nesting bound] in
// io/json_depth.h, Note [Jinja nesting bound] in data/jinja_expr_parser.cpp, Note [Jinja
// render bounds] in data/jinja_render.cpp) overflows it and AddressSanitizer reports a
// stack overflow, as a crash. The bound is 64 MiB: the deepest rendering the bounds admit
// (2,000 nested steps) takes 1 to 2 MiB in a release build, well within a main thread's usual
// 8 MiB, and AddressSanitizer's frames are several times larger (8 MiB overflowed); any
// recursion without a bound still runs past 64 MiB at once.
#pragma once

#include <pthread.h>

#include <cstddef>
#include <cstdlib>
#include <type_traits>

namespace fitgrad::fuzz {

inline constexpr size_t kFuzzStack = size_t(64) << 20;

// Calls fn() on a thread with a kFuzzStack stack and waits for it; an exception that escapes
// fn is a bug (abort, which libFuzzer reports).
template <class Fn>
void on_small_stack(Fn&& fn) {
  struct Call {
    std::remove_reference_t<Fn>* fn;
    static void* run(void* p) {
      try {
        (*static_cast<Call*>(p)->fn)();
      } catch (...) {
        std::abort();
      }
      return nullptr;
    }
  } call{&fn};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kFuzzStack);
  pthread_t thread;
  if (pthread_create(&thread, &attr, &Call::run, &call) != 0) std::abort();
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

}  // namespace fitgrad::fuzz
