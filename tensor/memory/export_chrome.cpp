// The Chrome trace-event export of the ledger's event trace, for Perfetto
// (ui.perfetto.dev) and chrome://tracing. It draws:
//
//   - one counter track per category that appears in the trace (bytes live),
//   - the counter tracks "allocated" and "reserved" (all-pool bytes),
//   - an instant event for every user mark and every OOM,
//   - process and thread names, so the tracks are labelled with the device.
//
// See Note [Counter tracks from the totals after each event].
#include <array>
#include <optional>

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

namespace {

// One process for the device, one thread under it that carries marks and OOMs.
constexpr int kPid = 1;
constexpr int kTid = 1;

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

json metadata(std::string_view kind, std::string name) {
  return {{"ph", "M"}, {"name", std::string(kind)},          {"pid", kPid}, {"tid", kTid},
          {"ts", 0},   {"args", {{"name", std::move(name)}}}};
}

// Process-scoped, so chrome://tracing draws a line across all tracks of the device.
json instant(double ts, std::string name, json args) {
  return {{"ph", "i"},   {"s", "p"}, {"name", std::move(name)}, {"pid", kPid},
          {"tid", kTid}, {"ts", ts}, {"args", std::move(args)}};
}

}  // namespace

json chrome_trace_json(const CachingAllocator& a) {
  const std::vector<MemoryEvent> events = a.events();
  const std::string device = a.device().str();
  json out = json::array();
  out.push_back(metadata("process_name", fmt::format("fitgrad memory ({})", device)));
  out.push_back(metadata("thread_name", "marks and OOMs"));
  CounterTrack allocated("allocated");
  CounterTrack reserved("reserved");
  std::array<std::optional<CounterTrack>, kNumCategories> categories;
  for (const MemoryEvent& e : events) {
    const double ts = double(e.time_ns) / 1e3;  // microseconds
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
        break;
      }
      case EventKind::mark:
        out.push_back(instant(ts, label_text(e.label),
                              {{"allocated", e.allocated_after}, {"reserved", e.reserved_after}}));
        break;
      case EventKind::oom:
        out.push_back(instant(ts, "OOM",
                              {{"requested", e.requested},
                               {"rounded", e.size},
                               {"category", std::string(category_name(e.category))},
                               {"label", label_text(e.label)},
                               {"allocated", e.allocated_after},
                               {"reserved", e.reserved_after}}));
        break;
      case EventKind::segment_alloc:
      case EventKind::segment_free: break;  // drawn by the "reserved" track
    }
  }
  return {{"traceEvents", std::move(out)}, {"displayTimeUnit", "ms"}};
}

void write_chrome_trace(const CachingAllocator& a, const std::string& path) {
  detail::write_json_file(chrome_trace_json(a), path, "Chrome trace");
}

}  // namespace fitgrad
