// Runs tests of this test binary again in a fresh process of their own: for what happens only
// in a new process (a card's first use) or under another environment (FITGRAD_REQUIRE_CUDA).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

namespace fitgrad::testing {

// This binary filtered to `filter`, run through env(1) with `env_arguments` ("VAR=1",
// "-u VAR"): its exit code (128 + the signal when killed) and its output.
inline std::pair<int, std::string> run_self(const std::string& env_arguments,
                                            const std::string& filter) {
  namespace fs = std::filesystem;
  const fs::path log =
      fs::temp_directory_path() / ("run_self_" + std::to_string(::getpid()) + ".log");
  const std::string command = "env " + env_arguments + " " +
                              fs::read_symlink("/proc/self/exe").string() +
                              " --gtest_filter=" + filter + " > " + log.string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  fs::remove(log);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), text.str()};
}

}  // namespace fitgrad::testing
