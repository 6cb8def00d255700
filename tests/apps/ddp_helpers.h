// What the data-parallel tests (ddp_test.cpp, ddp_faults_test.cpp) share: the built `fitgrad`
// binary, a fresh directory and a corpus for each test, a shell command's exit code, and the
// flags and logged losses of their small llama-tiny runs.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
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

}  // namespace fitgrad::ddp_test
