// The input of `fitgrad memviz`: the allocator's event trace and its peak report, read from
// a Chrome trace that fitgrad wrote (memory_trace.json: its instants carry each event's
// fields, Note [Chrome trace args carry the ledger] in tensor/memory/export_chrome.cpp) or
// from a memory.json snapshot (docs/memory.md). Both read into the same MemvizTrace, so
// the page and the SVG never know which file they came from.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tensor/memory/ledger.h"

namespace fitgrad::apps {

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

struct MemvizTrace {
  std::string source;  // the file it was read from, as given
  std::string format;  // "Chrome trace" or "memory.json snapshot"
  std::string device;
  uint64_t total_events = 0;
  uint64_t dropped = 0;          // older events the ring no longer held
  std::vector<VizEvent> events;  // oldest first, consecutive seq
  nlohmann::json peak;           // peak_report_json, exact whatever the window
};

bool is_block_event(EventKind k);

// Reads a parsed document; `source` names it in errors. Throws fitgrad::Error
// "[memviz] <source>: ..." saying what is wrong when the document is neither format or
// an event lacks a field.
MemvizTrace memviz_trace_from_json(const nlohmann::json& doc, const std::string& source);
// Reads and parses `path`; throws fitgrad::Error naming it when it cannot be read, is not
// JSON, or is not a trace memviz can draw.
MemvizTrace read_memviz_trace(const std::string& path);

}  // namespace fitgrad::apps
