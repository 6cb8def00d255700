// Building the memviz page (page.h): the data as JSON, and the HTML around it.
#include "io/memviz/page.h"

#include <fmt/format.h>

#include <map>

#include "io/atomic_file.h"
#include "io/memviz/markup.h"
#include "io/memviz/page_assets.h"
#include "tensor/interrupt.h"
#include "tensor/memory/json_dump.h"

namespace fitgrad::io {

using nlohmann::json;

// Note [Page data in columns]
// The page replays every event to show the allocator at any of them, so it holds all the
// retained events, not the thinned timeline alone. As one object per event they would
// repeat a dozen key names each; as columns (one array per field, labels interned into
// one table) an event costs about 50 bytes, so the default ring of 131072 events makes a
// page of a few megabytes. Fields an event's kind lacks are 0, or -1 for a category or
// label. The script checks what it replays against the totals each event carries. A trace
// too long to keep (Note [Traces past the kept bound are summarised]) has no columns
// ("events" is null): the page draws its summary, hovers over samples and shows the
// allocator at the peak ("peak_state") instead of replaying.

json memviz_page_data(const MemvizTrace& t, const Timeline& tl) {
  json categories = json::array(), colours = json::object();
  for (int c = 0; c < kNumCategories; ++c) {
    categories.push_back(std::string(category_name(Category(c))));
    colours[std::string(category_name(Category(c)))] = std::string(category_colour(c));
  }
  colours[std::string(kUnattributedName)] = std::string(kUnattributedColour);
  colours["free"] = std::string(kFreeColour);
  json kinds = json::array();
  for (int k = 0; k <= int(EventKind::segment_unmap); ++k)
    kinds.push_back(std::string(event_kind_name(EventKind(k))));

  std::map<std::string, int> label_ids;
  json labels = json::array(), segment_addr = json::object();
  json time_ns = json::array(), kind = json::array(), category = json::array(),
       label = json::array(), size = json::array(), segment = json::array(), offset = json::array(),
       allocated = json::array(), reserved = json::array();
  for (const VizEvent& e : t.events) {
    interruption_point();  // Note [Interruption points]: each event rendered
    const bool has_label =
        is_block_event(e.kind) || e.kind == EventKind::oom || e.kind == EventKind::mark;
    int id = -1;
    if (has_label) {
      const auto [it, added] = label_ids.emplace(e.label, int(labels.size()));
      if (added) labels.push_back(e.label);
      id = it->second;
    }
    if (e.kind == EventKind::segment_alloc) segment_addr[std::to_string(e.segment)] = e.addr;
    time_ns.push_back(e.time_ns);
    kind.push_back(int(e.kind));
    category.push_back(e.category);
    label.push_back(id);
    size.push_back(e.size);
    segment.push_back(e.segment);
    offset.push_back(e.offset);
    allocated.push_back(e.allocated_after);
    reserved.push_back(e.reserved_after);
  }
  json marks = json::array();
  for (const VizMark& m : tl.marks)
    marks.push_back({{"event", m.event}, {"oom", m.oom}, {"label", m.label}});
  json peak_state;  // null unless summarised with the peak's blocks
  if (t.summary && t.summary->peak_state) {
    json segments = json::array(), blocks = json::array();
    for (const VizSegment& s : t.summary->peak_state->segments)
      segments.push_back({{"id", s.id}, {"size", s.size}, {"addr", s.addr}, {"known", s.known}});
    for (const VizBlock& b : t.summary->peak_state->blocks)
      blocks.push_back({{"segment", b.segment},
                        {"offset", b.offset},
                        {"size", b.size},
                        {"category", std::string(category_name(Category(b.category)))},
                        {"label", b.label},
                        {"seq", b.seq}});
    peak_state = {{"segments", std::move(segments)}, {"blocks", std::move(blocks)}};
  }
  json events;  // null when summarised
  if (!t.summary)
    events = {{"time_ns", std::move(time_ns)},   {"kind", std::move(kind)},
              {"category", std::move(category)}, {"label", std::move(label)},
              {"size", std::move(size)},         {"segment", std::move(segment)},
              {"offset", std::move(offset)},     {"allocated", std::move(allocated)},
              {"reserved", std::move(reserved)}};
  json layers = json::array();
  for (const TimelineLayer& l : tl.layers)
    layers.push_back({{"name", l.name}, {"colour", l.colour}, {"bytes", l.bytes}});
  json peak = t.peak;
  peak["event"] = tl.peak_event ? json(*tl.peak_event) : json();
  peak["sample"] = tl.peak_sample ? json(*tl.peak_sample) : json();
  return {{"source", t.source},
          {"format", t.format},
          {"device", t.device},
          {"total_events", t.total_events},
          {"dropped", t.dropped},
          {"window", t.window},
          {"first_seq", t.first_seq},
          {"categories", std::move(categories)},
          {"kinds", std::move(kinds)},
          {"colours", std::move(colours)},
          {"labels", std::move(labels)},
          {"segment_addr", std::move(segment_addr)},
          {"events", std::move(events)},
          {"marks", std::move(marks)},
          {"peak_state", std::move(peak_state)},
          {"timeline",
           {{"events", tl.events},
            {"first", tl.first},
            {"event", tl.event},
            {"allocated", tl.allocated},
            {"reserved", tl.reserved},
            {"layers", std::move(layers)}}},
          {"peak", std::move(peak)}};
}

std::string memviz_page(const MemvizTrace& t) {
  const Timeline tl = build_timeline(t);
  // A label may hold any bytes: invalid UTF-8 is replaced rather than thrown on, and
  // every '<' is escaped so no text can close the <script> element early.
  const std::string raw =
      dump_interruptibly(memviz_page_data(t, tl), json::error_handler_t::replace);
  std::string data;
  data.reserve(raw.size());
  for (char c : raw) {
    if (c == '<')
      data += "\\u003c";
    else
      data += c;
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<title>fitgrad memory: {} ({})</title>\n<style>\n{}</style>\n</head>\n"
      "<body data-rendered=\"0\">\n"
      "<header><h1>fitgrad memory</h1><p id=\"summary\"></p></header>\n"
      "<noscript><p class=\"warn\">This page draws with JavaScript; the same data is in "
      "the trace it was made from.</p></noscript>\n"
      "<p id=\"error\" class=\"warn\" hidden></p>\n"
      "<p id=\"dropped\" class=\"warn\" hidden></p>\n"
      "<p id=\"summarised\" class=\"warn\" hidden></p>\n"
      "<section>\n<h2>Live bytes by category</h2>\n<div id=\"legend\" class=\"legend\"></div>\n"
      "<svg id=\"timeline\" viewBox=\"0 0 1200 400\" role=\"img\" "
      "aria-label=\"stacked timeline of live bytes by category\"></svg>\n"
      "<p id=\"event-info\" class=\"info\">Point at the timeline to see an event; click to "
      "show the allocator there.</p>\n</section>\n"
      "<section>\n<h2>Allocator state</h2>\n<div class=\"controls\">"
      "<input type=\"range\" id=\"event-slider\" min=\"0\" max=\"0\" value=\"0\" "
      "aria-label=\"event\"> <button id=\"to-peak\" type=\"button\">peak</button> "
      "<span id=\"slider-label\"></span></div>\n"
      "<p id=\"state-summary\" class=\"info\"></p>\n<div id=\"state\"></div>\n</section>\n"
      "<section>\n<h2>At the peak</h2>\n<table id=\"peak-summary\"></table>\n"
      "<div class=\"tables\"><table id=\"peak-categories\"></table>"
      "<table id=\"peak-labels\"></table></div>\n</section>\n"
      "<div id=\"tooltip\" hidden></div>\n"
      "<script type=\"application/json\" id=\"{}\">{}</script>\n"
      "<script>\n{}</script>\n</body>\n</html>\n",
      markup_escape(t.device), markup_escape(t.source), kPageStyle, kPageDataId, data, kPageScript);
}

void write_memviz_page(const MemvizTrace& t, const std::string& path) {
  io::write_file_atomic(path, memviz_page(t), fmt::format("[memviz {}]", path));
}

void write_memviz_svg(const MemvizTrace& t, const std::string& path) {
  io::write_file_atomic(path, timeline_svg(t, build_timeline(t)), fmt::format("[memviz {}]", path));
}

}  // namespace fitgrad::io
