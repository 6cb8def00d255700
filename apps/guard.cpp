// Turning every exception of a command into one line and exit code 1 (see guard.h).
#include "apps/guard.h"

#include <fmt/format.h>

#include <filesystem>
#include <new>
#include <system_error>

#include "apps/interrupt.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::apps {

int run_guarded(const char* command, std::ostream& out, std::ostream& err,
                const std::function<int()>& body, const char* on_interrupt) {
  std::string message;
  const SignalHandlers handlers;
  const InterruptScope acts;  // Note [A command stops when asked]
  try {
    return body();
  } catch (const Interrupted& e) {
    out.flush();
    err << fmt::format("[{}] interrupted by {}: stopped; {}", command, signal_name(e.signal()),
                       on_interrupt)
        << std::endl;
    return 128 + e.signal();
  } catch (const Error& e) {
    message = e.what();
  } catch (const std::filesystem::filesystem_error& e) {
    std::string paths;
    for (const auto& p : {e.path1(), e.path2()})
      if (!p.empty()) paths += (paths.empty() ? "" : ", ") + p.string();
    message =
        fmt::format("[{}] {}: {}", command, paths.empty() ? "a file" : paths, e.code().message());
  } catch (const std::system_error& e) {
    message = fmt::format("[{}] {} ({})", command, e.what(), e.code().message());
  } catch (const std::bad_alloc&) {
    message = fmt::format("[{}] out of host memory", command);
  } catch (const std::exception& e) {
    message = fmt::format("[{}] {}", command, e.what());
  } catch (...) {
    message = fmt::format("[{}] an unknown exception", command);
  }
  out.flush();
  err << "error: " << message << std::endl;
  return kExitBadInput;
}

}  // namespace fitgrad::apps
