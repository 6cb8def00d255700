// Running a user's program on bytes: its stdin fed, its stdout and stderr read, all at once
// (so a large input never deadlocks against a full output pipe), within a time bound, with no
// shell. reward_command.h runs a user's reward program through it.
//
// Note [Running a child program]
//   - The program is found as execvp would, but by this process before it forks (a name
//     without '/' is looked up on PATH, else the path is used); a program that is not there
//     or cannot run is an error before anything starts.
//   - The child runs in a process group of its own, so that killing the group also ends the
//     processes it started (a shell script's children would otherwise keep its output open),
//     and dies with this process (PR_SET_PDEATHSIG, SIGKILL), so it never outlives a parent
//     that was killed.
//   - Its stdin is one end of a socket pair, written with MSG_NOSIGNAL: a child that exits
//     without reading all of it gives EPIPE here, never a SIGPIPE that would kill the run.
//   - One thread polls the three descriptors in slices of at most 100 ms, writing and reading
//     as they are ready. At the time bound, or when SIGINT/SIGTERM reaches this process
//     (tensor/interrupt.h), the group is killed with SIGKILL and the child reaped; an
//     interrupt then throws Interrupted, so the command stops as Note [Interruption points]
//     says. The child is always reaped: no zombie is left.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace fitgrad::train::rewards {

struct ChildResult {
  std::string out;          // everything the child wrote to stdout
  std::string err;          // the last 4 KiB it wrote to stderr
  int exit_code = -1;       // its exit status, when it exited
  int signal = 0;           // the signal that ended it, or 0
  bool timed_out = false;   // killed at the time bound
  bool input_cut = false;   // it closed its stdin before reading all of it
  bool overflowed = false;  // killed for writing more than out_limit bytes to stdout
};

// Runs argv (argv[0] the program) with `input` on its stdin until it exits and its outputs
// close, until `timeout`, or until it has written more than `out_limit` bytes to stdout. Throws fitgrad::Error "<what> ..." when the program cannot be
// started (not found, not executable) and Interrupted on SIGINT/SIGTERM (Note [Running a
// child program]).
ChildResult run_child(const std::vector<std::string>& argv, const std::string& input,
                      std::chrono::milliseconds timeout, size_t out_limit, const std::string& what);

}  // namespace fitgrad::train::rewards
