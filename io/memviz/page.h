// The page of `fitgrad memviz`: one self-contained HTML file (inline CSS and script, no
// network access) that draws the stacked timeline, shows the event under the pointer,
// replays the events to show the allocator's segments and blocks at a chosen event, and
// tabulates the peak. The data sits in the page as JSON (memviz_page_data), and the
// script (page_assets.h) builds the view from it when the page loads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "io/memviz/memviz_trace.h"
#include "io/memviz/timeline.h"

namespace fitgrad::io {

// The id of the <script type="application/json"> element that holds the data.
inline constexpr const char* kPageDataId = "memviz-data";

// What the script reads: the trace's counts, every event in columns (labels interned),
// the thinned timeline, the peak report with the index of its event, and the colours.
// See Note [Page data in columns].
nlohmann::json memviz_page_data(const MemvizTrace& t, const Timeline& tl);

std::string memviz_page(const MemvizTrace& t);

// The page and the SVG of `t` written to files; each throws fitgrad::Error naming the
// path when it cannot be written.
void write_memviz_page(const MemvizTrace& t, const std::string& path);
void write_memviz_svg(const MemvizTrace& t, const std::string& path);

}  // namespace fitgrad::io
