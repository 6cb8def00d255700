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
//
// Note [A command stops when asked]
// The guard also installs the SIGINT/SIGTERM handlers (apps/interrupt.h) and makes the
// command's thread act on them at its interruption points (Note [Interruption points]): the
// Interrupted they throw ends here as one line, "[command] interrupted by SIGINT: stopped;
// <what it did>", on the error stream, and exit code 128 + the signal. `on_interrupt` says
// what the command did, or did not do, with its outputs (an interrupted command commits
// none: Note [All outputs or none]).
#pragma once

#include <functional>
#include <ostream>

namespace fitgrad::apps {

inline constexpr int kExitBadInput = 1;

// Runs `body` and returns its exit code; on any exception, prints "error: ..." to `err`
// (after flushing `out`) and returns kExitBadInput; on a signal, prints what the command
// did and returns 128 + the signal. `command` names the subcommand.
int run_guarded(const char* command, std::ostream& out, std::ostream& err,
                const std::function<int()>& body, const char* on_interrupt = "it wrote no file");

}  // namespace fitgrad::apps
