// The input of `fitgrad memviz`: the allocator's event trace and its peak report, read from
// a Chrome trace that fitgrad wrote (memory_trace.json: its instants carry each event's
// fields, Note [Chrome trace args carry the ledger] in tensor/memory/export_chrome.cpp) or
// from a memory.json snapshot (docs/memory.md). Both read into the same MemvizTrace, so
// the page and the SVG never know which file they came from.
#pragma once

#include <cstdint>
#include <istream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/memviz/timeline_types.h"
#include "tensor/memory/ledger.h"

namespace fitgrad::io {

// One event of the trace, as docs/memory.md's trace table defines it. `category` is -1
// where the kind has none (segments, marks); `label` is the mark text for a mark.
struct VizEvent {
  uint64_t seq = 0;
  int64_t time_ns = 0;
  EventKind kind = EventKind::alloc;
  int category = -1;
  std::string label;
  uint64_t size = 0;  // 0 for a mark
  uint64_t segment = 0;
  uint64_t offset = 0;
  std::string addr;  // hex; empty for marks and OOMs
  int64_t allocated_after = 0;
  int64_t reserved_after = 0;
  int64_t category_after = 0;  // block events only
};

// A window of up to this many events is kept whole (the allocator's default ring, so every
// trace `fitgrad train` writes by default); a longer one is summarised as it is read
// (Note [Traces past the kept bound are summarised]).
inline constexpr size_t kKeptEvents = size_t(1) << 17;

struct MemvizTrace {
  std::string source;  // the file it was read from, as given
  std::string format;  // "Chrome trace" or "memory.json snapshot"
  std::string device;
  uint64_t total_events = 0;
  uint64_t dropped = 0;    // older events the ring no longer held
  uint64_t window = 0;     // the events the trace holds: total_events - dropped
  uint64_t first_seq = 0;  // the first of them (total_events when there are none)
  // The window's events, oldest first, consecutive seq; empty when there are more than
  // the reader kept, and then `summary` holds what the page and the SVG draw.
  std::vector<VizEvent> events;
  std::optional<TraceSummary> summary;
  nlohmann::json peak;  // peak_report_json, exact whatever the window
};

bool is_block_event(EventKind k);

// Reads a parsed document; `source` names it in errors. Throws fitgrad::Error
// "[memviz] <source>: ..." saying what is wrong when the document is neither format or
// an event lacks a field. The events must come in seq order, as fitgrad writes them.
MemvizTrace memviz_trace_from_json(const nlohmann::json& doc, const std::string& source);
// Reads and parses `path`, event by event, keeping the events when the window has at most
// `kept_events` (else summarising them); throws fitgrad::Error naming it when it cannot be
// read, is not JSON, or is not a trace memviz can draw.
MemvizTrace read_memviz_trace(const std::string& path, size_t kept_events = kKeptEvents);
// The same from a stream; `source` names it in errors.
MemvizTrace read_memviz_trace(std::istream& in, const std::string& source,
                              size_t kept_events = kKeptEvents);

}  // namespace fitgrad::io
