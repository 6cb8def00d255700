// Building the stacked timeline from the events (timeline.h).
#include "apps/memviz/timeline.h"

#include <algorithm>
#include <array>

#include "tensor/interrupt.h"

namespace fitgrad::apps {

// Note [Thinning keeps the highs and the peak]
// A trace of 100k events drawn point by point makes a page of megabytes of path data that
// no screen can resolve. Past kTimelinePoints events the x axis is cut into that many
// equal runs of events, and each run is drawn as the state after its event with the
// most allocated bytes: a spike between two samples cannot vanish, as it would with a
// plain stride. The run that holds the peak's event is drawn at that very event, so the
// peak's height and its breakdown by category are exact whatever the thinning. The page
// still holds every event, so hovering and the allocator state are never thinned.

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
  };
  return category >= 0 && category < kNumCategories ? kColours[size_t(category)]
                                                    : kUnattributedColour;
}

namespace {

// The event each sample shows: every event, or the highest of each run (and the peak).
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

Timeline build_timeline(const MemvizTrace& t, size_t max_points) {
  Timeline tl;
  tl.events = t.events.size();
  const auto peak_seq = t.peak["seq"].get<uint64_t>();
  if (!t.events.empty() && peak_seq >= t.events.front().seq && peak_seq <= t.events.back().seq)
    tl.peak_event = size_t(peak_seq - t.events.front().seq);
  choose_samples(t, max_points, tl);

  // See Note [Bytes from before the window].
  std::array<int64_t, kNumCategories> value{};
  std::array<bool, kNumCategories> known{};
  known.fill(t.dropped == 0);
  std::vector<std::array<int64_t, kNumCategories>> by_category;
  std::vector<int64_t> unattributed;
  size_t next = 0;
  auto apply = [&](const VizEvent& e) {
    value[size_t(e.category)] = e.category_after;
    known[size_t(e.category)] = true;
  };
  for (size_t i = 0; i < t.events.size() && next < tl.event.size(); ++i) {
    interruption_point();  // Note [Interruption points]
    const VizEvent& e = t.events[i];
    if (is_block_event(e.kind)) apply(e);
    // A retag moves a block in two events; between them its bytes are in no category,
    // so a sample there shows the pair done.
    if (e.kind == EventKind::retag_from && i + 1 < t.events.size() &&
        t.events[i + 1].kind == EventKind::retag_to)
      apply(t.events[i + 1]);
    if (tl.event[next] != i) continue;
    int64_t attributed = 0;
    for (int c = 0; c < kNumCategories; ++c)
      if (known[size_t(c)]) attributed += value[size_t(c)];
    std::array<int64_t, kNumCategories> sample{};
    for (int c = 0; c < kNumCategories; ++c)
      sample[size_t(c)] = known[size_t(c)] ? value[size_t(c)] : 0;
    by_category.push_back(sample);
    unattributed.push_back(std::max<int64_t>(0, e.allocated_after - attributed));
    tl.allocated.push_back(e.allocated_after);
    tl.reserved.push_back(e.reserved_after);
    ++next;
  }

  auto add_layer = [&](std::string name, std::string_view colour, std::vector<int64_t> bytes) {
    if (std::any_of(bytes.begin(), bytes.end(), [](int64_t b) { return b != 0; }))
      tl.layers.push_back({std::move(name), std::string(colour), std::move(bytes)});
  };
  add_layer(std::string(kUnattributedName), kUnattributedColour, std::move(unattributed));
  for (int c = 0; c < kNumCategories; ++c) {
    std::vector<int64_t> bytes;
    for (const auto& s : by_category) bytes.push_back(s[size_t(c)]);
    add_layer(std::string(category_name(Category(c))), category_colour(c), std::move(bytes));
  }
  return tl;
}

}  // namespace fitgrad::apps
