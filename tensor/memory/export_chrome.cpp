// The Chrome trace-event export of the ledger's event trace, for Perfetto
// (ui.perfetto.dev) and chrome://tracing. It draws:
//
//   - one counter track per category that appears in the trace (bytes live),
//   - the counter tracks "allocated" and "reserved" (all-pool bytes),
//   - an instant event for every user mark and every OOM,
//   - an instant event for every alloc, free, retag and segment event, on a thread of its
//     own, and one for the peak, whose args carry what `fitgrad memviz` draws,
//   - process and thread names, so the tracks are labelled with the device.
//
// See Note [Counter tracks from the totals after each event] and Note [Chrome trace
// args carry the ledger].
#include <algorithm>
#include <array>
#include <optional>

#include "tensor/interrupt.h"
#include "tensor/memory/export.h"
#include "tensor/memory/scope.h"

namespace fitgrad {

using nlohmann::json;

// Note [Counter tracks from the totals after each event]
// Every event in the ledger carries the totals after it (allocated, reserved, and the
// bytes of its own category), so a counter sample is the value after the event and
// never a sum the exporter keeps. That makes a window of the ring, whose older events
// were dropped, draw exact tracks from its first event on; summing sizes would start
// every track at zero and be wrong by whatever was live before the window. A sample is
// written only when the value changes, which keeps the trace a fraction of the events.

// Note [Chrome trace args carry the ledger]
// The counter tracks draw the totals, but a viewer of the allocator (apps/memviz) needs
// each block: its address, segment, offset, size, category and label. Rather than a third
// file, every event's instant carries its memory.json event object (less the null
// fields) in its args, the process_name metadata carries the trace window's counts, and
// an instant named "peak" carries peak_report_json. Perfetto shows args as they are, so
// the trace still opens there, and a click on an instant reads the block it names.

namespace {

// One process for the device, one thread under it that carries marks and OOMs, and one
// that carries the allocator's block and segment events.
constexpr int kPid = 1;
constexpr int kTid = 1;
constexpr int kAllocatorTid = 2;

// A counter track that emits a sample only when its value changes.
class CounterTrack {
 public:
  explicit CounterTrack(std::string name) : name_(std::move(name)) {}

  void sample(json& events, double ts, int64_t value) {
    if (last_ == value) return;
    last_ = value;
    events.push_back({{"ph", "C"},
                      {"name", name_},
                      {"pid", kPid},
                      {"tid", kTid},
                      {"ts", ts},
                      {"args", {{"bytes", value}}}});
  }

 private:
  std::string name_;
  std::optional<int64_t> last_;
};

json metadata(std::string_view kind, std::string name, int tid = kTid, json args = json::object()) {
  args["name"] = std::move(name);
  return {{"ph", "M"}, {"name", std::string(kind)}, {"pid", kPid}, {"tid", tid},
          {"ts", 0},   {"args", std::move(args)}};
}

// Process-scoped, so chrome://tracing draws a line across all tracks of the device.
json instant(double ts, std::string name, std::string_view cat, json args) {
  return {{"ph", "i"},
          {"s", "p"},
          {"name", std::move(name)},
          {"cat", std::string(cat)},
          {"pid", kPid},
          {"tid", kTid},
          {"ts", ts},
          {"args", std::move(args)}};
}

// The event's memory.json object less its null fields, merged into `args`.
json with_event(json args, const MemoryEvent& e) {
  const json fields = detail::event_json(e);
  for (const auto& [key, value] : fields.items())
    if (!value.is_null()) args[key] = value;
  return args;
}

// Thread-scoped on the allocator-events thread, named after the event's kind.
json allocator_instant(double ts, const MemoryEvent& e) {
  return {{"ph", "i"},
          {"s", "t"},
          {"name", std::string(event_kind_name(e.kind))},
          {"cat", "allocator"},
          {"pid", kPid},
          {"tid", kAllocatorTid},
          {"ts", ts},
          {"args", with_event(json::object(), e)}};
}

}  // namespace

json chrome_trace_json(const CachingAllocator& a) {
  const std::vector<MemoryEvent> events = a.events();
  const std::string device = a.device().str();
  json out = json::array();
  // See Note [Exports read separate copies]: counts come from the retained events.
  const uint64_t total = events.empty() ? a.total_events() : events.back().seq + 1;
  out.push_back(
      metadata("process_name", fmt::format("fitgrad memory ({})", device), kTid,
               {{"device", device}, {"total_events", total}, {"dropped", total - events.size()}}));
  out.push_back(metadata("thread_name", "marks and OOMs"));
  out.push_back(metadata("thread_name", "allocator events", kAllocatorTid));
  CounterTrack allocated("allocated");
  CounterTrack reserved("reserved");
  std::array<std::optional<CounterTrack>, kNumCategories> categories;
  // The peak instant goes where its event is, so the events stay in time order; a peak
  // before the window (its event dropped) opens it, one after the last event closes it.
  const json peak = peak_report_json(a);
  const auto peak_seq = peak["seq"].get<uint64_t>();
  const double peak_ts = double(peak["time_ns"].get<int64_t>()) / 1e3;
  bool peak_written = false;
  auto write_peak = [&](double ts) {
    out.push_back(instant(ts, "peak", "peak", peak));
    peak_written = true;
  };
  double last_ts = peak_ts;
  for (const MemoryEvent& e : events) {
    interruption_point();                       // Note [Interruption points]: each event written
    const double ts = double(e.time_ns) / 1e3;  // microseconds
    if (!peak_written && peak_seq < e.seq) write_peak(std::min(peak_ts, ts));
    last_ts = ts;
    allocated.sample(out, ts, e.allocated_after);
    reserved.sample(out, ts, e.reserved_after);
    switch (e.kind) {
      case EventKind::alloc:
      case EventKind::free:
      case EventKind::retag_from:
      case EventKind::retag_to: {
        auto& track = categories[size_t(e.category)];
        if (!track) track.emplace(std::string(category_name(e.category)));
        track->sample(out, ts, e.category_after);
        out.push_back(allocator_instant(ts, e));
        break;
      }
      case EventKind::mark:
        out.push_back(instant(
            ts, label_text(e.label), "mark",
            with_event({{"allocated", e.allocated_after}, {"reserved", e.reserved_after}}, e)));
        break;
      case EventKind::oom:
        out.push_back(instant(ts, "OOM", "oom",
                              with_event({{"requested", e.requested},
                                          {"rounded", e.size},
                                          {"category", std::string(category_name(e.category))},
                                          {"label", label_text(e.label)},
                                          {"allocated", e.allocated_after},
                                          {"reserved", e.reserved_after}},
                                         e)));
        break;
      case EventKind::segment_alloc:
      case EventKind::segment_free:
      case EventKind::segment_map:
      case EventKind::segment_unmap:  // the "reserved" track draws the totals
        out.push_back(allocator_instant(ts, e));
        break;
    }
    if (!peak_written && e.seq == peak_seq) write_peak(ts);
  }
  if (!peak_written) write_peak(std::max(peak_ts, last_ts));
  return {{"traceEvents", std::move(out)}, {"displayTimeUnit", "ms"}};
}

void write_chrome_trace(const CachingAllocator& a, const std::string& path) {
  detail::write_json_file(chrome_trace_json(a), path, "Chrome trace");
}

}  // namespace fitgrad
