// The static SVG of the stacked timeline (timeline.h): one polygon per layer drawn as
// steps (a sample holds from its first event to the next sample's), the reserved bytes
// as a dashed line above, the marks and OOMs as vertical lines, and the peak marker.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "io/memviz/markup.h"
#include "io/memviz/timeline.h"
#include "tensor/interrupt.h"
#include "tensor/memory/bytes.h"

namespace fitgrad::io {

namespace {

constexpr double kWidth = 1200, kHeight = 470;
constexpr double kX = 90, kY = 40, kPlotW = 1070, kPlotH = 330;
// Mark labels closer than this many pixels to the last drawn one are left out (their
// lines stay), so a long run's marks do not print over each other.
constexpr double kMarkLabelGap = 14;

struct Plot {
  size_t events;
  double ymax;
  double x(size_t i) const { return kX + kPlotW * double(i) / double(std::max<size_t>(events, 1)); }
  double y(int64_t bytes) const { return kY + kPlotH - kPlotH * double(bytes) / ymax; }
};

// A "nice" step near span / n: 1, 2 or 5 times a power of ten of `unit`.
int64_t tick_step(double span, int n, double unit) {
  const double raw = std::max(span / n / unit, 1e-9);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * p) return std::max<int64_t>(1, std::llround(m * p * unit));
  return std::max<int64_t>(1, std::llround(10 * p * unit));
}

void axes(std::string& out, const Plot& p, const MemvizTrace& t) {
  double unit = 1;
  for (double u : {1024.0, 1048576.0, 1073741824.0, 1099511627776.0})
    if (p.ymax >= u) unit = u;
  const int64_t step = tick_step(p.ymax, 5, unit);
  for (int64_t b = 0; double(b) <= p.ymax; b += step) {
    out += fmt::format(R"(<line x1="{:.2f}" y1="{:.2f}" x2="{:.2f}" y2="{:.2f}" stroke="#ddd"/>)"
                       R"(<text x="{:.2f}" y="{:.2f}" text-anchor="end">{}</text>)"
                       "\n",
                       kX, p.y(b), kX + kPlotW, p.y(b), kX - 6, p.y(b) + 4, format_bytes(b));
  }
  const uint64_t first_seq = t.first_seq;
  for (int k = 0; k <= 4 && p.events > 0; ++k) {
    const size_t i = std::min(p.events - 1, p.events * size_t(k) / 4);
    out += fmt::format(R"(<text x="{:.2f}" y="{:.2f}" text-anchor="middle">#{}</text>)"
                       "\n",
                       p.x(i), kY + kPlotH + 16, first_seq + i);
  }
  out += fmt::format(
      R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#888"/>)"
      R"(<text x="{}" y="{}" text-anchor="middle" fill="#555">event number (seq)</text>)"
      "\n",
      kX, kY, kPlotW, kPlotH, kX + kPlotW / 2, kY + kPlotH + 32);
}

// One stacked band as a step polygon: its top edge left to right, its bottom edge back.
void layer_polygon(std::string& out, const Plot& p, const Timeline& tl, size_t layer) {
  const size_t n = tl.event.size();
  std::vector<int64_t> below(n, 0);
  for (size_t l = 0; l < layer; ++l)
    for (size_t k = 0; k < n; ++k) below[k] += tl.layers[l].bytes[k];
  auto end = [&](size_t k) { return k + 1 < n ? tl.first[k + 1] : tl.events; };
  std::string points;
  for (size_t k = 0; k < n; ++k) {
    const int64_t top = below[k] + tl.layers[layer].bytes[k];
    points += fmt::format("{:.2f},{:.2f} {:.2f},{:.2f} ", p.x(tl.first[k]), p.y(top), p.x(end(k)),
                          p.y(top));
  }
  for (size_t k = n; k-- > 0;)
    points += fmt::format("{:.2f},{:.2f} {:.2f},{:.2f} ", p.x(end(k)), p.y(below[k]),
                          p.x(tl.first[k]), p.y(below[k]));
  points.pop_back();
  out += fmt::format(R"(<polygon class="layer" data-category="{}" fill="{}" points="{}"/>)"
                     "\n",
                     markup_escape(tl.layers[layer].name), tl.layers[layer].colour, points);
}

void reserved_line(std::string& out, const Plot& p, const Timeline& tl) {
  const size_t n = tl.event.size();
  std::string points;
  for (size_t k = 0; k < n; ++k)
    points += fmt::format("{:.2f},{:.2f} {:.2f},{:.2f} ", p.x(tl.first[k]), p.y(tl.reserved[k]),
                          p.x(k + 1 < n ? tl.first[k + 1] : tl.events), p.y(tl.reserved[k]));
  if (points.empty()) return;
  points.pop_back();
  out += fmt::format(
      R"(<polyline class="reserved" fill="none" stroke="#333" stroke-dasharray="5,3" points="{}"/>)"
      "\n",
      points);
}

void marks(std::string& out, const Plot& p, const Timeline& tl) {
  double last_label = -1e9;
  for (const VizMark& m : tl.marks) {
    interruption_point();  // Note [Interruption points]
    const double x = p.x(m.event);
    out += fmt::format(
        R"(<line class="{}" x1="{:.2f}" y1="{}" x2="{:.2f}" y2="{}" stroke="{}" stroke-width="{}"/>)"
        "\n",
        m.oom ? "oom" : "mark", x, kY, x, kY + kPlotH, m.oom ? "#d00" : "#999", m.oom ? 2 : 0.6);
    if (x - last_label < kMarkLabelGap) continue;
    last_label = x;
    out += fmt::format(
        R"svg(<text x="{:.2f}" y="{}" transform="rotate(90 {:.2f} {})" font-size="10" fill="{}">{}</text>)svg"
        "\n",
        x + 2, kY + 4, x + 2, kY + 4, m.oom ? "#d00" : "#555",
        markup_escape(m.oom ? "OOM: " + m.label : m.label));
  }
}

void peak_marker(std::string& out, const Plot& p, const MemvizTrace& t, const Timeline& tl) {
  if (!tl.peak_sample) return;
  const size_t k = *tl.peak_sample;
  const double x = p.x(tl.first[k]);
  const auto bytes = t.peak["allocated"].get<int64_t>();
  const std::string mark = t.peak["mark"].is_string() ? t.peak["mark"].get<std::string>() : "";
  out += fmt::format(
      R"(<g class="peak" data-seq="{}" data-allocated="{}" data-x="{:.2f}">)"
      R"(<line x1="{:.2f}" y1="{}" x2="{:.2f}" y2="{}" stroke="#c00" stroke-width="1.5"/>)"
      R"(<circle cx="{:.2f}" cy="{:.2f}" r="4" fill="#c00"/>)"
      R"(<text x="{:.2f}" y="{}" fill="#c00" font-weight="bold">peak {}{}</text></g>)"
      "\n",
      t.peak["seq"].get<uint64_t>(), bytes, x, x, kY, x, kY + kPlotH, x, p.y(bytes), x + 6, kY - 6,
      format_bytes(bytes), markup_escape(mark.empty() ? "" : " (" + mark + ")"));
}

void legend(std::string& out, const Timeline& tl) {
  double x = kX;
  const double y = kHeight - 30;
  for (const TimelineLayer& l : tl.layers) {
    out += fmt::format(R"(<rect x="{:.1f}" y="{}" width="12" height="12" fill="{}"/>)"
                       R"(<text x="{:.1f}" y="{}">{}</text>)",
                       x, y, l.colour, x + 16, y + 11, markup_escape(l.name));
    x += 26 + 7.0 * double(l.name.size());
  }
  out += fmt::format(
      R"(<line x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}" stroke="#333" stroke-dasharray="5,3"/>)"
      R"(<text x="{:.1f}" y="{}">reserved</text>)"
      "\n",
      x, y + 6, x + 20, y + 6, x + 24, y + 11);
}

}  // namespace

std::string timeline_svg(const MemvizTrace& t, const Timeline& tl) {
  int64_t top = t.peak["allocated"].get<int64_t>();
  for (size_t k = 0; k < tl.event.size(); ++k)
    top = std::max({top, tl.allocated[k], tl.reserved[k]});
  const Plot p{tl.events, double(std::max<int64_t>(top, 1))};
  std::string out = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" )"
      R"(font-family="sans-serif" font-size="12" data-plot="{} {} {} {}" data-ymax="{}" )"
      R"(data-events="{}">)"
      "\n"
      R"(<rect width="100%" height="100%" fill="white"/>)"
      R"(<text x="{}" y="20" font-size="15" font-weight="bold">Live bytes by category: {} ({})</text>)"
      "\n",
      kWidth, kHeight, kWidth, kHeight, kX, kY, kPlotW, kPlotH, std::max<int64_t>(top, 1),
      tl.events, kX, markup_escape(t.device), markup_escape(t.source));
  axes(out, p, t);
  for (size_t l = 0; l < tl.layers.size(); ++l) layer_polygon(out, p, tl, l);
  reserved_line(out, p, tl);
  marks(out, p, tl);
  peak_marker(out, p, t, tl);
  legend(out, tl);
  if (t.dropped > 0)
    out += fmt::format(
        R"(<text x="{}" y="{}" fill="#a40">The trace ring dropped the {} oldest of {} events; the plot starts at event #{}.</text>)"
        "\n",
        kX, kHeight - 8, t.dropped, t.total_events, t.dropped);
  out += "</svg>\n";
  return out;
}

}  // namespace fitgrad::io
