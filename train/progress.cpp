// The live bar and the plain log lines of a training run (progress.h).
#include "train/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "tensor/memory/bytes.h"

namespace fitgrad::train {
namespace {

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  auto t = int64_t(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

}  // namespace

Progress::Progress(std::ostream& out, const std::string& mode, bool out_is_stderr) : out_(out) {
  live_ = mode == "bar" || (mode == "auto" && out_is_stderr && isatty(STDERR_FILENO));
}

Progress::~Progress() { finish(); }

std::string Progress::render(const StepInfo& i) const {
  const std::string loss = std::isnan(i.loss) ? "-" : fmt::format("{:.4f}", i.loss);
  return fmt::format("loss {} | lr {:.2e} | {:.0f} tok/s | mem {} / peak {}", loss, i.learning_rate,
                     i.tokens_per_second, format_bytes(i.memory_allocated),
                     format_bytes(i.memory_peak));
}

void Progress::step(const StepInfo& i, bool logging_step) {
  if (live_) {
    const int width = 24;
    double frac = i.total > 0 ? double(i.step) / double(i.total) : 0;
    int filled = std::clamp(int(frac * width + 0.5), 0, width);
    std::string line = fmt::format("step {}/{} [{}{}] {:3.0f}% | {} | eta {}", i.step, i.total,
                                   std::string(filled, '#'), std::string(width - filled, '.'),
                                   100 * frac, render(i), duration(i.seconds_left));
    // Pad over the previous line's tail, so a shorter line leaves no residue.
    size_t n = line.size();
    if (last_.size() > n) line += std::string(last_.size() - n, ' ');
    out_ << "\r" << line << std::flush;
    last_ = line.substr(0, n);
    bar_drawn_ = true;
  } else if (logging_step) {
    out_ << fmt::format("step {}/{} | {} | eta {}\n", i.step, i.total, render(i),
                        duration(i.seconds_left))
         << std::flush;
  }
}

void Progress::message(const std::string& text) {
  if (bar_drawn_) {
    out_ << "\r" << std::string(last_.size(), ' ') << "\r";
    bar_drawn_ = false;
    last_.clear();
  }
  out_ << text << "\n" << std::flush;
}

void Progress::finish() {
  if (bar_drawn_) {
    out_ << "\n" << std::flush;
    bar_drawn_ = false;
    last_.clear();
  }
}

}  // namespace fitgrad::train
