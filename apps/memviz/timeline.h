// The stacked timeline of `fitgrad memviz`: live bytes by category after each event of
// the trace, thinned to at most a fixed number of samples for drawing, with the peak kept
// exact. The page (page.h) draws it in the browser and timeline_svg draws it as a static
// picture, from the same samples, so the two always agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/memviz/memviz_trace.h"

namespace fitgrad::apps {

// At most this many samples are drawn; a trace with more events is thinned
// (Note [Thinning keeps the highs and the peak]).
inline constexpr size_t kTimelinePoints = 1200;

// The colour of a category on the page and in the SVG; the layer of bytes the window
// cannot attribute (Note [Bytes from before the window]) and free blocks have their own.
std::string_view category_colour(int category);
inline constexpr std::string_view kUnattributedName = "before the window";
inline constexpr std::string_view kUnattributedColour = "#bab0ac";
inline constexpr std::string_view kFreeColour = "#e4e4e4";

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
  std::optional<size_t> peak_event;   // the peak's event, when the window holds it
  std::optional<size_t> peak_sample;  // the sample that shows it
};

Timeline build_timeline(const MemvizTrace& t, size_t max_points = kTimelinePoints);

// A standalone SVG of the stacked timeline with the reserved line, the marks, the OOMs
// and the peak marker. The root element's data-plot ("x y width height") and data-ymax
// (bytes at the top of the plot) let a reader turn coordinates back into bytes.
std::string timeline_svg(const MemvizTrace& t, const Timeline& tl);

}  // namespace fitgrad::apps
