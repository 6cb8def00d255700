// Building the stacked timeline from the events (timeline.h).
#include "io/memviz/timeline.h"

#include <algorithm>
#include <array>

#include "tensor/interrupt.h"

namespace fitgrad::io {

// Note [Thinning keeps the highs and the peak]
// A trace of 100k events drawn point by point makes a page of megabytes of path data that
// no screen can resolve. Past kTimelinePoints events the x axis is cut into that many
// equal runs of events, and each run is drawn as the state after its event with the
// most allocated bytes: a spike between two samples cannot vanish, as it would with a
// plain stride. The run that holds the peak's event is drawn at that very event, so the
// peak's height and its breakdown by category are exact whatever the thinning. The page
// still holds every event, so hovering and the allocator state are never thinned (a trace
// longer than that is summarised: Note [Traces past the kept bound are summarised]).

// Note [Bytes from before the window]
// Each block event carries its category's live bytes after it, so a category's value is
// known from its first event in the window on. When the ring dropped older events, a
// category with no event yet in the window has bytes the trace cannot name; they are
// drawn as one band, allocated minus the known categories, so the stack's top is always
// the exact allocated total. Without drops every category starts at zero and the band
// is empty.

std::string_view category_colour(int category) {
  static constexpr std::array<std::string_view, kNumCategories> kColours = {
      "#4e79a7",  // parameter
      "#f28e2b",  // gradient
      "#e15759",  // optimizer_state
      "#76b7b2",  // activation
      "#59a14f",  // temporary
      "#edc948",  // quantized_weight
      "#b07aa1",  // buffer
      "#ff9da7",  // data
      "#9c755f",  // other
      "#bab0ac",  // collective
  };
  return category >= 0 && category < kNumCategories ? kColours[size_t(category)]
                                                    : kUnattributedColour;
}

namespace {

// The event each sample shows (first and event of `tl`): every event, or the highest of
// each run (and the peak).
void choose_samples(const MemvizTrace& t, size_t max_points, Timeline& tl) {
  const size_t n = t.events.size();
  const size_t runs = std::min(n, std::max<size_t>(max_points, 1));
  for (size_t r = 0; r < runs; ++r) {
    const size_t lo = r * n / runs, hi = (r + 1) * n / runs;
    size_t best = lo;
    for (size_t i = lo + 1; i < hi; ++i)
      if (t.events[i].allocated_after > t.events[best].allocated_after) best = i;
    if (tl.peak_event && *tl.peak_event >= lo && *tl.peak_event < hi) {
      best = *tl.peak_event;
      tl.peak_sample = r;
    }
    tl.first.push_back(lo);
    tl.event.push_back(best);
  }
}

}  // namespace

Timeline timeline_from_samples(size_t events, const std::vector<TimelineSample>& samples,
                               std::vector<VizMark> marks, std::optional<size_t> peak_event,
                               std::optional<size_t> peak_sample) {
  Timeline tl;
  tl.events = events;
  tl.marks = std::move(marks);
  tl.peak_event = peak_event;
  tl.peak_sample = peak_sample;
  for (const TimelineSample& s : samples) {
    tl.first.push_back(s.first);
    tl.event.push_back(s.event);
    tl.allocated.push_back(s.allocated);
    tl.reserved.push_back(s.reserved);
  }
  auto add_layer = [&](std::string name, std::string_view colour, std::vector<int64_t> bytes) {
    if (std::any_of(bytes.begin(), bytes.end(), [](int64_t b) { return b != 0; }))
      tl.layers.push_back({std::move(name), std::string(colour), std::move(bytes)});
  };
  std::vector<int64_t> unattributed;
  for (const TimelineSample& s : samples) unattributed.push_back(s.unattributed);
  add_layer(std::string(kUnattributedName), kUnattributedColour, std::move(unattributed));
  for (int c = 0; c < kNumCategories; ++c) {
    std::vector<int64_t> bytes;
    for (const TimelineSample& s : samples) bytes.push_back(s.by_category[size_t(c)]);
    add_layer(std::string(category_name(Category(c))), category_colour(c), std::move(bytes));
  }
  return tl;
}

Timeline build_timeline(const MemvizTrace& t, size_t max_points) {
  if (t.summary) return t.summary->timeline;
  Timeline chosen;
  const auto peak_seq = t.peak["seq"].get<uint64_t>();
  if (!t.events.empty() && peak_seq >= t.events.front().seq && peak_seq <= t.events.back().seq)
    chosen.peak_event = size_t(peak_seq - t.events.front().seq);
  choose_samples(t, max_points, chosen);

  // See Note [Bytes from before the window].
  std::array<int64_t, kNumCategories> value{};
  std::array<bool, kNumCategories> known{};
  known.fill(t.dropped == 0);
  std::vector<TimelineSample> samples;
  std::vector<VizMark> marks;
  auto apply = [&](const VizEvent& e) {
    value[size_t(e.category)] = e.category_after;
    known[size_t(e.category)] = true;
  };
  for (size_t i = 0; i < t.events.size(); ++i) {
    interruption_point();  // Note [Interruption points]
    const VizEvent& e = t.events[i];
    if (e.kind == EventKind::mark || e.kind == EventKind::oom)
      marks.push_back({i, e.kind == EventKind::oom, e.label});
    if (is_block_event(e.kind)) apply(e);
    // A retag moves a block in two events; between them its bytes are in no category,
    // so a sample there shows the pair done.
    if (e.kind == EventKind::retag_from && i + 1 < t.events.size() &&
        t.events[i + 1].kind == EventKind::retag_to)
      apply(t.events[i + 1]);
    const size_t next = samples.size();
    if (next == chosen.event.size() || chosen.event[next] != i) continue;
    TimelineSample s;
    s.first = chosen.first[next];
    s.event = i;
    s.allocated = e.allocated_after;
    s.reserved = e.reserved_after;
    int64_t attributed = 0;
    for (size_t c = 0; c < size_t(kNumCategories); ++c) {
      s.by_category[c] = known[c] ? value[c] : 0;
      attributed += s.by_category[c];
    }
    s.unattributed = std::max<int64_t>(0, e.allocated_after - attributed);
    samples.push_back(s);
  }
  return timeline_from_samples(t.events.size(), samples, std::move(marks), chosen.peak_event,
                               chosen.peak_sample);
}

}  // namespace fitgrad::io
