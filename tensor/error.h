// Errors for fitgrad. User errors (bad shapes, bad files, too little memory) throw
// fitgrad::Error whose message starts with the op or file in brackets, for example
// "[matmul] shapes (4,8) and (9,2) do not align". Broken internal invariants use
// FG_ASSERT, which throws InternalError naming the source line: they are bugs, not input.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace fitgrad {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void internal_assert_fail(const char* expr, const char* file, int line,
                                       const std::string& message);

}  // namespace fitgrad

// FG_CHECK(cond, "[op] format {}", args...): throws fitgrad::Error when cond is false.
#define FG_CHECK(cond, ...)                                        \
  do {                                                             \
    if (!(cond)) throw ::fitgrad::Error(fmt::format(__VA_ARGS__)); \
  } while (0)

// FG_ASSERT(cond) or FG_ASSERT(cond, "format {}", args...): an internal invariant.
#define FG_ASSERT(cond, ...)                                                           \
  do {                                                                                 \
    if (!(cond))                                                                       \
      ::fitgrad::internal_assert_fail(#cond, __FILE__, __LINE__,                       \
                                      ::fitgrad::detail::assert_message(__VA_ARGS__)); \
  } while (0)

namespace fitgrad::detail {
inline std::string assert_message() { return {}; }
template <class... Args>
std::string assert_message(fmt::format_string<Args...> f, Args&&... args) {
  return fmt::format(f, std::forward<Args>(args)...);
}
}  // namespace fitgrad::detail
