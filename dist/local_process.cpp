// process_runs and host_name (local_process.h).
#include "dist/local_process.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

namespace fitgrad::dist {

bool process_runs(int64_t pid) {
  if (pid <= 0) return false;
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  int64_t tgid = -1;
  char state = '?';
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("State:")) std::istringstream(line.substr(6)) >> state;
    if (line.starts_with("Tgid:")) std::istringstream(line.substr(5)) >> tgid;
  }
  if (tgid < 0) return ::kill(pid_t(pid), 0) == 0 || errno != ESRCH;  // Note [A pid is a process's]
  return tgid == pid && state != 'Z' && state != 'X';
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace fitgrad::dist
