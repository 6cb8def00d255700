// Out-of-line failure path of FG_ASSERT, kept cold so the check itself stays small.
#include "tensor/error.h"

namespace fitgrad {

void internal_assert_fail(const char* expr, const char* file, int line,
                          const std::string& message) {
  std::string text = fmt::format("internal error: {} failed at {}:{}", expr, file, line);
  if (!message.empty()) text += ": " + message;
  throw InternalError(text);
}

}  // namespace fitgrad
