// What `fitgrad memviz` draws, as data: the samples of the stacked timeline, its layers,
// the marks and OOMs, and the allocator's blocks at the peak. timeline.h builds them from
// every event of a trace; trace_summary.h builds them while the events stream by, for a
// trace too long to keep (Note [Traces past the kept bound are summarised]).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensor/memory/ledger.h"

namespace fitgrad::io {

// A mark or an OOM at event index `event` of the window.
struct VizMark {
  size_t event = 0;
  bool oom = false;
  std::string label;
};

// One drawn sample: it stands for the events first .. (the next sample's first) - 1 and
// shows the state after event `event`.
struct TimelineSample {
  size_t first = 0, event = 0;
  int64_t allocated = 0, reserved = 0;
  int64_t unattributed = 0;  // Note [Bytes from before the window]
  std::array<int64_t, kNumCategories> by_category{};
};

// One band of the stack: a category, or the unattributed bytes.
struct TimelineLayer {
  std::string name;
  std::string colour;
  std::vector<int64_t> bytes;  // one value per sample
};

struct Timeline {
  size_t events = 0;  // the x axis runs over the event indices 0 .. events
  // Sample k stands for the events first[k] .. first[k + 1] - 1 (the last up to
  // `events`) and shows the state after event event[k].
  std::vector<size_t> first, event;
  std::vector<int64_t> allocated, reserved;
  std::vector<TimelineLayer> layers;  // bottom first; only layers that are ever non-zero
  std::vector<VizMark> marks;         // in event order
  std::optional<size_t> peak_event;   // the peak's event, when the window holds it
  std::optional<size_t> peak_sample;  // the sample that shows it
};

// The allocator at the peak: its segments and live blocks, replayed from the window (a
// segment made before the window is known only by its blocks, and its size is then the
// end of its last one).
struct VizSegment {
  uint64_t id = 0, size = 0;
  std::string addr;  // empty when made before the window
  bool known = false;
};
struct VizBlock {
  uint64_t segment = 0, offset = 0, size = 0, seq = 0;  // seq: the event that made it
  int category = -1;
  std::string label;
};
struct VizPeakState {
  std::vector<VizSegment> segments;  // by id
  std::vector<VizBlock> blocks;      // by segment, then offset
};

// A trace too long to keep, as the page and the SVG need it.
struct TraceSummary {
  Timeline timeline;
  std::optional<VizPeakState> peak_state;  // absent when the peak's event passed unrecognised
};

// The timeline of `samples` (in event order) over `events` events: the layers that are
// ever non-zero, bottom first, the unattributed band below the categories.
Timeline timeline_from_samples(size_t events, const std::vector<TimelineSample>& samples,
                               std::vector<VizMark> marks, std::optional<size_t> peak_event,
                               std::optional<size_t> peak_sample);

}  // namespace fitgrad::io
