// The metrics of a training run: one JSON object per line in <output_dir>/metrics.jsonl,
// and the loss curve drawn from them as a self-contained SVG picture; with --report_to
// tensorboard, the same records as TensorBoard events.
//
// Every record has "step"; a training record adds "loss", "learning_rate", "grad_norm",
// "tokens_per_second", "epoch", "memory_allocated" and "memory_peak" (bytes); an
// evaluation record adds "eval_loss" and "eval_perplexity". The records are also the
// `log_history` of a checkpoint's trainer_state.json, so a resumed run rewrites the file
// from that history and then appends: the file always describes one trajectory.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/tfevents.h"

namespace fitgrad::train {

class MetricsLog {
 public:
  // Starts <path> afresh with `history` (empty for a new run). A non-empty `tensorboard_dir`
  // also gets a TensorBoard event file (Note [Metrics in TensorBoard] in metrics.cpp).
  MetricsLog(std::string path, std::vector<nlohmann::json> history = {},
             const std::string& tensorboard_dir = "");

  // Appends one record to the file (flushed), to the event file and to the history.
  void append(const nlohmann::json& record);
  const std::vector<nlohmann::json>& history() const { return history_; }
  // The event file, or "" without one.
  std::string tensorboard_file() const { return events_ ? events_->path() : ""; }

 private:
  std::string path_;
  std::vector<nlohmann::json> history_;
  std::unique_ptr<io::TfEventsWriter> events_;
};

// A record's scalars under TensorBoard's tags: "eval_loss" -> "eval/loss", any other number
// -> "train/<key>"; "step" is the event's step, not a scalar.
io::Scalars tensorboard_scalars(const nlohmann::json& record);

// The training loss (a line) and the evaluation loss (a line with dots) against the step,
// with axes, ticks and a legend, as SVG text. Records without either key are skipped.
std::string loss_curve_svg(const std::vector<nlohmann::json>& history, const std::string& title);

// Writes `text` to `path` atomically (Note [Atomic file writes] in io/atomic_file.h);
// throws fitgrad::Error naming the path.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace fitgrad::train
