// The fixture of the in-process `fitgrad train` tests (train_test.cpp, run_safety_test.cpp, ...):
// a fresh temporary root per test, pseudo-random text files, a small quick llama-tiny run,
// and readers for metrics.jsonl and for comparing two runs' losses.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tensor/error.h"
#include "train/trainer.h"

namespace fitgrad::apps::test_train {

using train::run_train;
using train::TrainArgs;
namespace fs = std::filesystem;

// That run_train(a) refuses with an error whose text holds `message`.
inline void expect_refused(const TrainArgs& a, const std::string& message) {
  std::ostringstream out, err;
  try {
    run_train(a, out, err);
    ADD_FAILURE() << "ran: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

class TrainFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            (std::string("fitgrad_train_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A text of `n` pseudo-random lowercase letters (fixed seed), repeated `times` times.
  std::string write_text(const std::string& name, size_t n, int times) {
    std::mt19937 rng(7);
    std::string unit;
    for (size_t i = 0; i < n; ++i) unit += char('a' + rng() % 26);
    std::string text;
    for (int i = 0; i < times; ++i) text += unit;
    return write_file(name, text);
  }
  std::string write_file(const std::string& name, const std::string& bytes) {
    fs::path p = root_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }

  // A small, quick llama-tiny run over `data` into root_/<out>.
  TrainArgs args(const std::string& data, const std::string& out) {
    TrainArgs a;
    a.model = "llama-tiny";
    a.data = data;
    a.output_dir = (root_ / out).string();
    a.seq_len = 32;
    a.per_device_train_batch_size = 4;
    a.per_device_eval_batch_size = 4;
    a.val_fraction = 0.2;
    a.learning_rate = 1e-2;
    a.max_steps = 6;
    a.logging_steps = 1;
    a.eval_steps = 1000;
    a.save_steps = 3;
    a.progress = "plain";
    return a;
  }

  int train(const TrainArgs& a) {
    std::ostringstream out, err;
    int code = run_train(a, out, err);
    last_out_ = out.str();
    last_err_ = err.str();
    return code;
  }

  static std::vector<nlohmann::json> metrics(const std::string& dir) {
    std::vector<nlohmann::json> rows;
    std::ifstream in(fs::path(dir) / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
    return rows;
  }
  // Trains `base` into root_/base and the same run changed by `change` into root_/variant;
  // returns their output directories.
  std::pair<std::string, std::string> train_both(TrainArgs base,
                                                 const std::function<void(TrainArgs&)>& change) {
    base.output_dir = (root_ / "base").string();
    base.save_steps = 0;
    TrainArgs variant = base;
    variant.output_dir = (root_ / "variant").string();
    change(variant);
    EXPECT_EQ(train(base), 0);
    EXPECT_EQ(train(variant), 0);
    return {base.output_dir, variant.output_dir};
  }
  // The largest |loss difference| between two runs' metrics, which must log the same steps,
  // at least one of them with a loss (else any comparison of the two would pass).
  static double max_loss_difference(const std::string& dir_a, const std::string& dir_b) {
    auto a = metrics(dir_a), b = metrics(dir_b);
    EXPECT_EQ(a.size(), b.size());
    double max_diff = 0;
    size_t compared = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      EXPECT_EQ(a[i].contains("loss"), b[i].contains("loss")) << "metrics row " << i;
      if (!a[i].contains("loss") || !b[i].contains("loss")) continue;
      max_diff =
          std::max(max_diff, std::abs(a[i]["loss"].get<double>() - b[i]["loss"].get<double>()));
      ++compared;
    }
    EXPECT_GT(compared, 0u) << "no loss rows in " << dir_a << " and " << dir_b;
    return max_diff;
  }
  static std::string read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  fs::path root_;
  std::string last_err_;
  std::string last_out_;  // the last train()'s stdout
};

}  // namespace fitgrad::apps::test_train
