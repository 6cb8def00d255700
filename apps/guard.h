// The one place where a command's exceptions become its exit code, so that no input ever
// ends a command in std::terminate (rc 134).
//
// Note [Every exception is caught]
// A fitgrad::Error already names its culprit ("[train] --seq_len ..."). Anything else that
// escapes a command is caught here too and printed as one line starting with the command:
// a std::filesystem::filesystem_error (a symlink loop, an unreadable directory) with the
// paths it carries, a std::system_error (a thread that cannot start) with its code, a
// std::bad_alloc as "out of host memory", and any other exception with its what(). Each
// exits 1, bad input's code; `fitgrad --help` states the codes.
#pragma once

#include <functional>
#include <ostream>

namespace fitgrad::apps {

inline constexpr int kExitBadInput = 1;

// Runs `body` and returns its exit code; on any exception, prints "error: ..." to `err`
// (after flushing `out`) and returns kExitBadInput. `command` names the subcommand.
int run_guarded(const char* command, std::ostream& out, std::ostream& err,
                const std::function<int()>& body);

}  // namespace fitgrad::apps
