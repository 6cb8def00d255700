// What the data-parallel tests (ddp_test.cpp, ddp_faults_test.cpp) share: the built `fitgrad`
// binary, a fresh directory and a corpus for each test, a shell command's exit code, the
// flags and logged losses of their small llama-tiny runs, and ranks started by hand.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fitgrad::ddp_test {

namespace fs = std::filesystem;
using nlohmann::json;

inline const std::string kCli = FITGRAD_CLI;

// A fresh directory for one test.
inline fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("dp_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A text corpus of `words` pseudo-random words.
inline fs::path write_corpus(const fs::path& dir, int words = 6000) {
  const fs::path p = dir / "data.txt";
  std::ofstream out(p);
  uint32_t x = 12345;
  for (int i = 0; i < words; ++i) {
    x = x * 1664525u + 1013904223u;
    const int len = 1 + int((x >> 8) % 4);
    for (int c = 0; c < len; ++c) out << char('a' + (x >> (12 + 3 * c)) % 10);
    out << (i % 12 == 11 ? '\n' : ' ');
  }
  return p;
}

// Runs a shell command; its exit code (128 + signal when killed).
inline int shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The training records of metrics.jsonl: (loss, grad_norm) per logged step.
inline std::vector<std::pair<double, double>> losses(const fs::path& dir) {
  std::vector<std::pair<double, double>> out;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);
    if (j.contains("loss")) out.emplace_back(j["loss"], j.value("grad_norm", 0.0));
  }
  return out;
}

inline std::string train_flags(const fs::path& data, int64_t batch, int64_t accum, int steps) {
  return "--model llama-tiny --data " + data.string() +
         " --seq_len 16 --per_device_train_batch_size " + std::to_string(batch) +
         " --gradient_accumulation_steps " + std::to_string(accum) + " --max_steps " +
         std::to_string(steps) +
         " --learning_rate 1e-3 --logging_steps 1 --eval_strategy no --progress plain "
         "--ddp_bucket_cap_mb 1";
}

// Starts `fitgrad train` as rank `rank` of `world` with the launcher's variables set by hand
// (another launcher's way), its output into `log`. Without a store the rank uses the default
// one under `tmpdir` (Note [Rendezvous stores]).
inline pid_t start_rank(int rank, int world, const fs::path& store, const std::string& flags,
                        const fs::path& log, const fs::path& tmpdir = {}) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("RANK", std::to_string(rank).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
    ::setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
    ::setenv("MASTER_ADDR", "127.0.0.1", 1);
    ::setenv("MASTER_PORT", "29500", 1);
    if (store.empty())
      ::unsetenv("FITGRAD_STORE");
    else
      ::setenv("FITGRAD_STORE", ("file:" + store.string()).c_str(), 1);
    if (!tmpdir.empty()) ::setenv("TMPDIR", tmpdir.c_str(), 1);
    const std::string command = "exec " + kCli + " train " + flags + " > " + log.string() + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits for `pid` at most `limit`; its exit code, or -1 when it is still running.
inline int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

// Returns once rank 0 of the job writing into dir / "out" logged a step (training is under
// way); fails after 2 minutes with the job's log.
inline void wait_until_training(const fs::path& dir, const std::string& log = "rank0.log") {
  const auto start = std::chrono::steady_clock::now();
  while (!fs::exists(dir / "out" / "metrics.jsonl") || losses(dir / "out").empty()) {
    ASSERT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(120))
        << read_text(dir / log);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace fitgrad::ddp_test
