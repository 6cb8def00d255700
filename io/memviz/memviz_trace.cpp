// Reading memory_trace.json or memory.json into a MemvizTrace (memviz_trace.h). Every
// field the page draws is checked here, so a file that is not what it claims gives one
// fitgrad::Error naming the file, the event and the field, and never a crash in the page.
#include "io/memviz/memviz_trace.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "io/memviz/streamed_json.h"
#include "io/memviz/timeline.h"
#include "io/memviz/trace_summary.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::io {

using nlohmann::json;

namespace {

// Where a field is read, for the error: the file, then the event or section.
struct Where {
  const std::string& source;
  std::string what;
};

[[noreturn]] void fail(const Where& w, const std::string& message) {
  throw Error(
      fmt::format("[memviz] {}: {}{}", w.source, w.what.empty() ? "" : w.what + ": ", message));
}

const json& field(const json& obj, const char* key, const Where& w) {
  if (!obj.is_object()) fail(w, fmt::format("expected an object, got {}", obj.dump()));
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) fail(w, fmt::format("'{}' is missing", key));
  return *it;
}

uint64_t get_u64(const json& obj, const char* key, const Where& w) {
  const json& v = field(obj, key, w);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
    fail(w, fmt::format("'{}' must be a non-negative integer, got {}", key, v.dump()));
  return v.get<uint64_t>();
}

int64_t get_i64(const json& obj, const char* key, const Where& w) {
  const json& v = field(obj, key, w);
  if (!v.is_number_integer())
    fail(w, fmt::format("'{}' must be an integer, got {}", key, v.dump()));
  return v.get<int64_t>();
}

// An optional string field: "" when absent or null, an error naming the key when it holds
// another type (never nlohmann's "type must be string" without the key).
std::string optional_string(const json& obj, const char* key, const Where& w) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return "";
  if (!it->is_string()) fail(w, fmt::format("'{}' must be a string, got {}", key, it->dump()));
  return it->get<std::string>();
}

const std::string& get_string(const json& obj, const char* key, const Where& w) {
  const json& v = field(obj, key, w);
  if (!v.is_string()) fail(w, fmt::format("'{}' must be a string, got {}", key, v.dump()));
  return v.get_ref<const std::string&>();
}

int category_index(const std::string& name, const Where& w) {
  for (int c = 0; c < kNumCategories; ++c)
    if (category_name(Category(c)) == name) return c;
  fail(w, fmt::format("'{}' is not a memory category", name));
}

EventKind event_kind(const std::string& name, const Where& w) {
  for (int k = 0; k <= int(EventKind::segment_unmap); ++k)
    if (event_kind_name(EventKind(k)) == name) return EventKind(k);
  fail(w, fmt::format("'{}' is not an event kind", name));
}

// One event object: memory.json's trace event, or the args of a Chrome trace instant
// (the same fields, less the null ones).
VizEvent read_event(const json& e, Where w) {
  VizEvent v;
  v.seq = get_u64(e, "seq", w);
  w.what = fmt::format("{} (seq {})", w.what, v.seq);
  v.time_ns = get_i64(e, "time_ns", w);
  v.kind = event_kind(get_string(e, "kind", w), w);
  const bool block = is_block_event(v.kind);
  const bool mapping = v.kind == EventKind::segment_map || v.kind == EventKind::segment_unmap;
  const bool segment =
      v.kind == EventKind::segment_alloc || v.kind == EventKind::segment_free || mapping;
  const bool oom = v.kind == EventKind::oom;
  if (block || oom) v.category = category_index(get_string(e, "category", w), w);
  if (block || oom || v.kind == EventKind::mark) v.label = get_string(e, "label", w);
  if (v.kind != EventKind::mark) v.size = get_u64(e, "size", w);
  if (block || segment) {
    v.segment = get_u64(e, "segment", w);
    v.addr = get_string(e, "addr", w);
  }
  if (block || mapping) v.offset = get_u64(e, "offset", w);
  if (block) {
    v.category_after = get_i64(e, "category_after", w);
  }
  v.allocated_after = get_i64(e, "allocated_after", w);
  v.reserved_after = get_i64(e, "reserved_after", w);
  return v;
}

// The fields of peak_report_json that the page shows, checked so the page can trust them.
void check_peak(const json& p, const Where& w) {
  get_i64(p, "allocated", w);
  get_i64(p, "reserved", w);
  get_i64(p, "cached_free", w);
  get_u64(p, "seq", w);
  get_i64(p, "time_ns", w);
  if (const auto it = p.find("mark"); it == p.end() || !(it->is_null() || it->is_string()))
    fail(w, "'mark' must be a string or null");
  auto rows = [&](const char* key, const char* name_key) {
    const json& list = field(p, key, w);
    if (!list.is_array()) fail(w, fmt::format("'{}' must be an array", key));
    for (const json& row : list) {
      get_string(row, name_key, w);
      get_i64(row, "bytes", w);
      if (!field(row, "percent", w).is_number()) fail(w, "'percent' must be a number");
    }
  };
  rows("by_category", "category");
  for (const json& row : p["by_category"]) category_index(row["category"].get<std::string>(), w);
  rows("top_labels", "label");
  const json& rest = field(p, "other_labels", w);
  get_u64(rest, "count", w);
  get_i64(rest, "bytes", w);
}

// The events of either format, read one at a time (from a document, or as they are parsed:
// Note [memviz streams its events]), then the records around them. The events are kept
// while there are at most `kept` of them, and summarised all along
// (Note [Traces past the kept bound are summarised]).
class TraceBuilder {
 public:
  TraceBuilder(const std::string& source, size_t kept)
      : source_(source), kept_(kept), summary_(kTimelinePoints) {}

  void chrome_event(const json& e, size_t i) {
    interruption_point();  // Note [Interruption points]
    const Where w{source_, fmt::format("traceEvents[{}]", i)};
    if (!e.is_object()) fail(w, "a trace event must be an object");
    const std::string ph = optional_string(e, "ph", w);
    const std::string cat = optional_string(e, "cat", w);
    if (ph == "M" && optional_string(e, "name", w) == "process_name" && e.contains("args") &&
        e["args"].contains("total_events"))
      info_ = e["args"];
    if (ph != "i") return;
    if (cat == "allocator" || cat == "mark" || cat == "oom") {
      take(read_event(field(e, "args", w), w));
    } else if (cat == "peak") {
      peak_ = field(e, "args", w);
      expect_peak(peak_, w);
    }
  }

  // `so_far`: the document before the events, which holds memory.json's peak.
  void snapshot_event(const json& e, size_t i, const json& so_far) {
    interruption_point();  // Note [Interruption points]
    if (i == 0 && so_far.is_object() && so_far.contains("peak"))
      expect_peak(so_far["peak"], {source_, "the peak report"});
    take(read_event(e, {source_, fmt::format("trace.events[{}]", i)}));
  }

  // The trace of `doc`, whose event arrays hold the events not yet read (all of them, or
  // none when they were streamed).
  MemvizTrace finish(const json& doc) {
    if (!doc.is_object())
      fail({source_, ""}, "expected a JSON object (memory_trace.json or memory.json)");
    if (doc.contains("traceEvents")) return finish_chrome(doc);
    if (doc.contains("schema") && doc.contains("trace")) return finish_snapshot(doc);
    fail({source_, ""},
         "neither a Chrome trace (no 'traceEvents') nor a memory.json snapshot (no 'schema' "
         "and 'trace')");
  }

 private:
  void expect_peak(const json& peak, const Where& w) {
    if (peak.is_object() && peak.contains("seq")) summary_.expect_peak(get_u64(peak, "seq", w));
  }

  void take(VizEvent v) {
    if (summary_.events() > 0 && v.seq != last_seq_ + 1)
      fail({source_, ""},
           fmt::format("the events are not consecutive: seq {} follows seq {}", v.seq, last_seq_));
    last_seq_ = v.seq;
    summary_.add(v);
    if (summary_.events() <= kept_) {
      events_.push_back(std::move(v));
    } else if (!events_.empty()) {
      std::vector<VizEvent>().swap(events_);
    }
  }

  MemvizTrace finish_chrome(const json& doc) {
    const json& list = doc["traceEvents"];
    if (!list.is_array()) fail({source_, ""}, "'traceEvents' must be an array");
    for (size_t i = 0; i < list.size(); ++i) chrome_event(list[i], i);
    if (!info_ || peak_.is_null())
      fail({source_, ""},
           "a Chrome trace without fitgrad's allocator events (no process_name with the "
           "trace's counts, or no 'peak' instant): it was written by another program or an "
           "older fitgrad; export it again, or give memory.json");
    MemvizTrace t;
    t.source = source_;
    t.format = "Chrome trace";
    const Where w{source_, "the process_name record"};
    t.device = get_string(*info_, "device", w);
    t.total_events = get_u64(*info_, "total_events", w);
    t.dropped = get_u64(*info_, "dropped", w);
    t.peak = std::move(peak_);
    return finished(std::move(t));
  }

  MemvizTrace finish_snapshot(const json& doc) {
    MemvizTrace t;
    t.source = source_;
    t.format = "memory.json snapshot";
    const Where top{source_, ""};
    t.device = get_string(doc, "device", top);
    const json& trace = field(doc, "trace", top);
    t.total_events = get_u64(trace, "total_events", {source_, "trace"});
    t.dropped = get_u64(trace, "dropped", {source_, "trace"});
    const json& events = field(trace, "events", {source_, "trace"});
    if (!events.is_array()) fail({source_, "trace"}, "'events' must be an array");
    for (size_t i = 0; i < events.size(); ++i) snapshot_event(events[i], i, doc);
    t.peak = field(doc, "peak", top);
    return finished(std::move(t));
  }

  // The events or their summary, once the peak report is checked.
  MemvizTrace finished(MemvizTrace t) {
    check_peak(t.peak, {source_, "the peak report"});
    t.window = summary_.events();
    t.first_seq = t.window > 0 ? last_seq_ + 1 - t.window : t.total_events;
    if (t.window > kept_)
      t.summary = summary_.finish(t.peak["seq"].get<uint64_t>());
    else
      t.events = std::move(events_);
    return t;
  }

  const std::string& source_;
  size_t kept_;
  TraceSummarizer summary_;
  uint64_t last_seq_ = 0;
  std::vector<VizEvent> events_;
  std::optional<json> info_;
  json peak_;
};

// The checks of a whole trace, whichever format it came from.
MemvizTrace checked(MemvizTrace t) {
  const std::string& source = t.source;
  const bool counts_agree = t.dropped <= t.total_events && t.total_events - t.dropped == t.window &&
                            (t.window == 0 || t.first_seq + t.window == t.total_events);
  if (!counts_agree)
    fail({source, ""},
         fmt::format("{} events, but the trace says {} in all of which {} were dropped", t.window,
                     t.total_events, t.dropped));
  // A peak recorded at an event the trace does not reach: the trace was cut or edited after
  // its peak report was written, and a page drawn from it would mark a peak it cannot show.
  const uint64_t peak_seq = t.peak["seq"].get<uint64_t>();
  if (t.total_events > 0 && peak_seq >= t.total_events)
    fail({source, "the peak report"},
         fmt::format("the peak is at event #{}, past the trace's last event #{}: the trace was "
                     "cut or edited after its peak was recorded",
                     peak_seq, t.total_events - 1));
  return t;
}

}  // namespace

bool is_block_event(EventKind k) {
  return k == EventKind::alloc || k == EventKind::free || k == EventKind::retag_from ||
         k == EventKind::retag_to;
}

MemvizTrace memviz_trace_from_json(const json& doc, const std::string& source) {
  TraceBuilder builder(source, kKeptEvents);
  MemvizTrace t;
  try {
    t = builder.finish(doc);
  } catch (const json::exception& e) {  // a field of another type than the format says
    fail({source, ""}, e.what());
  }
  return checked(std::move(t));
}

MemvizTrace read_memviz_trace(std::istream& in, const std::string& source, size_t kept_events) {
  // Note [memviz streams its events]: each event is read as it is parsed.
  TraceBuilder builder(source, kept_events);
  const auto on_event = [&](size_t format, const json& e, size_t i, const json& so_far) {
    try {
      format == 0 ? builder.chrome_event(e, i) : builder.snapshot_event(e, i, so_far);
    } catch (const json::exception& error) {
      fail({source, ""}, error.what());
    }
  };
  json doc;
  try {
    doc = parse_streamed_json(in, {{"traceEvents"}, {"trace", "events"}}, on_event);
  } catch (const json::parse_error& e) {
    throw Error(fmt::format("[memviz] {}: not JSON ({})", source, e.what()));
  }
  MemvizTrace t;
  try {
    t = builder.finish(doc);
  } catch (const json::exception& e) {
    fail({source, ""}, e.what());
  }
  return checked(std::move(t));
}

MemvizTrace read_memviz_trace(const std::string& path, size_t kept_events) {
  std::ifstream in(path, std::ios::binary);
  FG_CHECK(in.is_open(), "[memviz] cannot open '{}': {}", path, std::strerror(errno));
  return read_memviz_trace(in, path, kept_events);
}

}  // namespace fitgrad::io
