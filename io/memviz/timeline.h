// The stacked timeline of `fitgrad memviz`: live bytes by category after each event of
// the trace, thinned to at most a fixed number of samples for drawing, with the peak kept
// exact. The page (page.h) draws it in the browser and timeline_svg draws it as a static
// picture, from the same samples, so the two always agree.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "io/memviz/memviz_trace.h"

namespace fitgrad::io {

// At most this many samples are drawn; a trace with more events is thinned
// (Note [Thinning keeps the highs and the peak]).
inline constexpr size_t kTimelinePoints = 1200;

// The colour of a category on the page and in the SVG; the layer of bytes the window
// cannot attribute (Note [Bytes from before the window]) and free blocks have their own.
std::string_view category_colour(int category);
inline constexpr std::string_view kUnattributedName = "before the window";
inline constexpr std::string_view kUnattributedColour = "#bab0ac";
inline constexpr std::string_view kFreeColour = "#e4e4e4";

// The timeline of `t`: from its events when it kept them, thinned to `max_points`; else
// its summary's, built while it was read (Note [Traces past the kept bound are summarised]).
Timeline build_timeline(const MemvizTrace& t, size_t max_points = kTimelinePoints);

// A standalone SVG of the stacked timeline with the reserved line, the marks, the OOMs
// and the peak marker. The root element's data-plot ("x y width height") and data-ymax
// (bytes at the top of the plot) let a reader turn coordinates back into bytes.
std::string timeline_svg(const MemvizTrace& t, const Timeline& tl);

}  // namespace fitgrad::io
