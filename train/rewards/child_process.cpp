// run_child (child_process.h, Note [Running a child program]).
#include "train/rewards/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::train::rewards {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kErrTail = 4096;

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The program's path as execvp would find it; throws when there is none.
std::string resolve_program(const std::string& name, const std::string& what) {
  FG_CHECK(!name.empty(), "{}: the command is empty", what);
  if (name.find('/') != std::string::npos) {
    FG_CHECK(is_executable_file(name), "{}: '{}' is not an executable file", what, name);
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t colon = std::min(dirs.find(':', start), dirs.size());
    std::string dir = dirs.substr(start, colon - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    start = colon + 1;
  }
  throw Error(fmt::format("{}: '{}' is not found on PATH", what, name));
}

// A pipe or socket pair whose ends close on exec.
void make_pair(int fds[2], bool socket, const std::string& what) {
  const int rc =
      socket ? ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) : ::pipe2(fds, O_CLOEXEC);
  FG_CHECK(rc == 0, "{}: cannot make a pipe ({})", what, std::strerror(errno));
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The child's side of fork(): only async-signal-safe calls until exec.
[[noreturn]] void exec_child(const std::string& program, char* const* args, int in, int out,
                             int err, int report, pid_t parent) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took hold
  ::dup2(in, 0);
  ::dup2(out, 1);
  ::dup2(err, 2);
  ::signal(SIGPIPE, SIG_DFL);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execv(program.c_str(), args);
  const int e = errno;
  [[maybe_unused]] const ssize_t w = ::write(report, &e, sizeof e);
  ::_exit(127);
}

// Kills the child's process group and reaps the child; returns its wait status.
int kill_and_reap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

ChildResult run_child(const std::vector<std::string>& argv, const std::string& input,
                      std::chrono::milliseconds timeout, size_t out_limit,
                      const std::string& what) {
  FG_CHECK(!argv.empty(), "{}: the command is empty", what);
  const std::string program = resolve_program(argv[0], what);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  int in[2], out[2], err[2], report[2];
  make_pair(in, true, what);
  make_pair(out, false, what);
  make_pair(err, false, what);
  make_pair(report, false, what);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(program, args.data(), in[1], out[1], err[1], report[1], parent);
  for (int* fd : {&in[1], &out[1], &err[1], &report[1]}) close_fd(*fd);
  if (pid < 0) {
    for (int* fd : {&in[0], &out[0], &err[0], &report[0]}) close_fd(*fd);
    throw Error(fmt::format("{}: cannot start a process ({})", what, std::strerror(errno)));
  }
  // Did exec succeed? The report pipe closes on exec, or carries exec's errno.
  int exec_errno = 0;
  ssize_t got;
  while ((got = ::read(report[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  close_fd(report[0]);
  if (got > 0) {
    for (int* fd : {&in[0], &out[0], &err[0]}) close_fd(*fd);
    kill_and_reap(pid);
    throw Error(fmt::format("{}: cannot run '{}' ({})", what, program, std::strerror(exec_errno)));
  }

  ChildResult result;
  int to_child = in[0], from_out = out[0], from_err = err[0];
  for (int fd : {to_child, from_out, from_err}) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  size_t written = 0;
  if (input.empty()) {
    ::shutdown(to_child, SHUT_WR);
    close_fd(to_child);
  }
  const auto deadline = Clock::now() + timeout;
  auto fail_with = [&](auto&& after_kill) {
    for (int* fd : {&to_child, &from_out, &from_err}) close_fd(*fd);
    const int status = kill_and_reap(pid);
    result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    after_kill();
  };
  while (from_out >= 0 || from_err >= 0 || to_child >= 0) {
    if (const int sig = interrupt_received(); sig != 0) fail_with([&] { throw Interrupted(sig); });
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      fail_with([&] { result.timed_out = true; });
      return result;
    }
    pollfd fds[3];
    int n = 0;
    if (to_child >= 0) fds[n++] = {to_child, POLLOUT, 0};
    if (from_out >= 0) fds[n++] = {from_out, POLLIN, 0};
    if (from_err >= 0) fds[n++] = {from_err, POLLIN, 0};
    if (::poll(fds, nfds_t(n), int(std::min<int64_t>(left.count(), 100))) < 0) {
      FG_CHECK(errno == EINTR, "{}: poll failed ({})", what, std::strerror(errno));
      continue;
    }
    for (int i = 0; i < n; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == to_child) {
        const ssize_t w = ::send(to_child, input.data() + written, input.size() - written,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) written += size_t(w);
        if (w < 0 && errno != EAGAIN && errno != EINTR) result.input_cut = true;
        if (written == input.size() || result.input_cut) close_fd(to_child);
        continue;
      }
      char buf[65536];
      const ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (r <= 0) {
        close_fd(fds[i].fd == from_out ? from_out : from_err);
        continue;
      }
      if (fds[i].fd == from_out) {
        result.out.append(buf, size_t(r));
        if (result.out.size() > out_limit) {
          fail_with([&] { result.overflowed = true; });
          return result;
        }
      } else {
        result.err.append(buf, size_t(r));
        if (result.err.size() > 2 * kErrTail) result.err.erase(0, result.err.size() - kErrTail);
      }
    }
  }
  if (result.err.size() > kErrTail) result.err.erase(0, result.err.size() - kErrTail);
  // The outputs are closed: wait for the exit within what is left of the bound.
  int status = 0;
  while (true) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (const int sig = interrupt_received(); sig != 0) fail_with([&] { throw Interrupted(sig); });
    if (Clock::now() >= deadline) {
      fail_with([&] { result.timed_out = true; });
      return result;
    }
    ::usleep(2000);
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace fitgrad::train::rewards
