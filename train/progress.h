// What a training run shows while it runs: on a terminal, a live progress bar redrawn in
// place after every step (step, the last logged loss, learning rate, tokens/s, current/peak memory, ETA);
// otherwise (a pipe, a log file, CI) a plain log line per logging step instead, so logs
// stay readable. Evaluation results and messages go between the bar redraws.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

namespace fitgrad::train {

struct StepInfo {
  int64_t step = 0;  // steps done
  int64_t total = 0;
  // The mean loss of the latest logging interval (Note [Loss on the device] in
  // train/train_step.h: losses are read only at logging steps); NaN shows as "-" (before
  // the first logging step, and always in a dry run).
  double loss = 0;
  double learning_rate = 0;
  double tokens_per_second = 0;
  int64_t memory_allocated = 0;  // bytes
  int64_t memory_peak = 0;
  double seconds_left = 0;
};

class Progress {
 public:
  // mode: "bar", "plain" or "auto" (bar when `out` is stderr and stderr is a terminal).
  Progress(std::ostream& out, const std::string& mode, bool out_is_stderr);
  ~Progress();

  // After every step; `logging_step` says whether this step is a logging step (a plain
  // line is written only then).
  void step(const StepInfo& info, bool logging_step);
  // A line of its own (evaluation results, checkpoints), clearing the bar first.
  void message(const std::string& text);
  // Ends the bar's line.
  void finish();

 private:
  std::string render(const StepInfo& info) const;
  std::ostream& out_;
  bool live_ = false;
  bool bar_drawn_ = false;
  std::string last_;
};

}  // namespace fitgrad::train
