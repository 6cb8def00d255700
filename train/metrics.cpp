// metrics.jsonl and loss_curve.svg (metrics.h).
#include "train/metrics.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/atomic_file.h"
#include "io/json_file.h"
#include "tensor/error.h"

namespace fitgrad::train {

void write_file_atomic(const std::string& path, const std::string& text) {
  io::write_file_atomic(path, text, fmt::format("[train {}]", path));
}

MetricsLog::MetricsLog(std::string path, std::vector<nlohmann::json> history,
                       const std::string& tensorboard_dir)
    : path_(std::move(path)), history_(std::move(history)) {
  std::string text;
  for (const auto& r : history_) text += io::json_text(r) + "\n";
  write_file_atomic(path_, text);
  if (!tensorboard_dir.empty()) events_ = std::make_unique<io::TfEventsWriter>(tensorboard_dir);
}

// Note [Metrics in TensorBoard]
// With --report_to tensorboard each record of metrics.jsonl is also one event of a TensorBoard
// event file (io/tfevents.h) in --logging_dir (<output_dir>/runs by default, as transformers'
// logging_dir): the record's step, the wall time of the append, and its numbers under the tags
// transformers' TensorBoardCallback gives them (train/loss, train/learning_rate, ..., and
// eval/loss for eval_loss). A resumed run starts a new event file beside the old ones; its
// first steps, logged again after the checkpoint, then appear twice, as they do in
// transformers' runs.
io::Scalars tensorboard_scalars(const nlohmann::json& record) {
  io::Scalars out;
  for (const auto& [key, value] : record.items()) {
    if (key == "step" || !value.is_number()) continue;
    out.emplace_back(key.starts_with("eval_") ? "eval/" + key.substr(5) : "train/" + key,
                     value.get<double>());
  }
  return out;
}

// One write(2) per record; a short write (a full disk) is cut back to the previous end, so
// the file never holds half a line, and the error says why.
void MetricsLog::append(const nlohmann::json& record) {
  const std::string line = io::json_text(record) + "\n";
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  FG_CHECK(fd >= 0, "[train {}] cannot open to append a metrics record: {}", path_,
           std::strerror(errno));
  const off_t before = ::lseek(fd, 0, SEEK_END);
  const ssize_t n = ::write(fd, line.data(), line.size());
  const int err = errno;
  if (n != ssize_t(line.size())) {
    const bool cut = before >= 0 && ::ftruncate(fd, before) == 0;
    ::close(fd);
    throw Error(fmt::format("[train {}] cannot append a metrics record: {}{}", path_,
                            n < 0 ? std::strerror(err) : "a short write (is the disk full?)",
                            cut ? "; the file ends at the previous record" : ""));
  }
  ::close(fd);
  if (events_)
    events_->scalars(record.value("step", int64_t(0)), io::unix_time_now(),
                     tensorboard_scalars(record));
  history_.push_back(record);
}

namespace {

struct Series {
  std::vector<std::pair<double, double>> points;  // (step, loss)
};

Series collect(const std::vector<nlohmann::json>& history, const char* key) {
  Series s;
  for (const auto& r : history)
    if (r.contains(key) && r.contains("step") && r[key].is_number()) {
      double v = r[key].get<double>();
      if (std::isfinite(v)) s.points.emplace_back(r["step"].get<double>(), v);
    }
  return s;
}

// A "nice" tick spacing (1, 2 or 5 times a power of ten) giving about `n` ticks over span.
double tick_step(double span, int n) {
  double raw = span / n;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string loss_curve_svg(const std::vector<nlohmann::json>& history, const std::string& title) {
  const double W = 720, H = 420, left = 64, right = 20, top = 40, bottom = 48;
  Series train = collect(history, "loss"), eval = collect(history, "eval_loss");
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool any = !train.points.empty() || !eval.points.empty();
  if (any) {
    x0 = y0 = INFINITY;
    x1 = y1 = -INFINITY;
    for (const Series* s : {&train, &eval})
      for (auto [x, y] : s->points) {
        x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
      }
    x0 = std::min(x0, 0.0);
    if (x1 <= x0) x1 = x0 + 1;
    double pad = (y1 - y0) * 0.05;
    if (pad == 0) pad = std::max(std::abs(y1) * 0.05, 0.05);
    y0 = std::max(0.0, y0 - pad), y1 += pad;
  }
  auto sx = [&](double x) { return left + (x - x0) / (x1 - x0) * (W - left - right); };
  auto sy = [&](double y) { return H - bottom - (y - y0) / (y1 - y0) * (H - top - bottom); };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
      W, H, W, H, W / 2, escape(title));
  svg += fmt::format(
      "<g stroke=\"#444\" stroke-width=\"1\">"
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>"
      "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{1}\"/></g>\n",
      left, H - bottom, W - right, top);
  double xs = tick_step(x1 - x0, 6), ys = tick_step(y1 - y0, 5);
  for (double x = std::ceil(x0 / xs) * xs; x <= x1 + 1e-9; x += xs)
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        sx(x), top, H - bottom, H - bottom + 16, x);
  for (double y = std::ceil(y0 / ys) * ys; y <= y1 + 1e-9; y += ys)
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        left, sy(y), W - right, left - 6, sy(y) + 4, y);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">step</text>\n",
                     (left + W - right) / 2, H - 10);
  svg += fmt::format(
      "<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0})\">"
      "loss (nats/token)</text>\n",
      (top + H - bottom) / 2);
  auto polyline = [&](const Series& s, const char* color) {
    if (s.points.empty()) return;
    svg +=
        fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"", color);
    for (auto [x, y] : s.points) svg += fmt::format("{:.1f},{:.1f} ", sx(x), sy(y));
    svg += "\"/>\n";
  };
  polyline(train, "#1f77b4");
  polyline(eval, "#d62728");
  for (auto [x, y] : eval.points)
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"#d62728\"/>\n", sx(x),
                       sy(y));
  svg += fmt::format(
      "<g><line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#1f77b4\" stroke-width=\"2\"/>"
      "<text x=\"{3}\" y=\"{4}\">train loss</text>"
      "<line x1=\"{0}\" y1=\"{5}\" x2=\"{2}\" y2=\"{5}\" stroke=\"#d62728\" stroke-width=\"2\"/>"
      "<text x=\"{3}\" y=\"{6}\">validation loss</text></g>\n",
      W - right - 150, top + 12, W - right - 126, W - right - 120, top + 16, top + 30, top + 34);
  if (!any)
    svg +=
        fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">no losses logged yet</text>\n",
                    W / 2, H / 2);
  svg += "</svg>\n";
  return svg;
}

}  // namespace fitgrad::train
