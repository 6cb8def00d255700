// The JSON snapshot of an allocator (stats, segments and blocks, the event trace, the
// category and label tables, the peak) and the peak report as JSON. The layout is the
// contract with outside readers: docs/memory.md documents it field by field, and any
// change that could break a reader bumps kMemorySnapshotSchema.
#include <algorithm>
#include <fstream>
#include <limits>

#include "tensor/interrupt.h"
#include "tensor/memory/export.h"
#include "tensor/memory/json_dump.h"
#include "tensor/memory/scope.h"

namespace fitgrad {

using nlohmann::json;

namespace {

std::string hex(uint64_t addr) { return fmt::format("{:#x}", addr); }

json stat_json(const Stat& s) {
  return {{"current", s.current}, {"peak", s.peak}, {"allocated", s.allocated}, {"freed", s.freed}};
}

json stat_array_json(const StatArray& s) {
  return {{"all", stat_json(s[kAllPools])},
          {"small_pool", stat_json(s[kSmallPool])},
          {"large_pool", stat_json(s[kLargePool])}};
}

json stats_json(const MemoryStats& s) {
  return {{"allocation", stat_array_json(s.allocation)},
          {"segment", stat_array_json(s.segment)},
          {"active", stat_array_json(s.active)},
          {"inactive_split", stat_array_json(s.inactive_split)},
          {"allocated_bytes", stat_array_json(s.allocated_bytes)},
          {"reserved_bytes", stat_array_json(s.reserved_bytes)},
          {"active_bytes", stat_array_json(s.active_bytes)},
          {"inactive_split_bytes", stat_array_json(s.inactive_split_bytes)},
          {"requested_bytes", stat_array_json(s.requested_bytes)},
          {"num_alloc_retries", s.num_alloc_retries},
          {"num_ooms", s.num_ooms},
          {"num_segment_allocs", s.num_segment_allocs},
          {"num_segment_frees", s.num_segment_frees},
          {"num_segment_maps", s.num_segment_maps},
          {"num_segment_unmaps", s.num_segment_unmaps}};
}

// Note [Free blocks carry no owner]
// A free block keeps whatever category and label its last merge left in it, which
// names an allocation that no longer exists. The snapshot writes null for both, so a
// reader never attributes cached bytes to a module.
json block_json(const BlockInfo& b) {
  return {{"offset", b.offset},
          {"size", b.size},
          {"requested", b.requested},
          {"allocated", b.allocated},
          {"category", b.allocated ? json(std::string(category_name(b.category))) : json()},
          {"label", b.allocated ? json(label_text(b.label)) : json()}};
}

json segment_json(const SegmentInfo& s) {
  json blocks = json::array();
  for (const BlockInfo& b : s.blocks) blocks.push_back(block_json(b));
  return {{"id", s.id},
          {"address", hex(s.addr)},
          {"size", s.size},
          {"expandable", s.expandable},
          {"virtual_size", s.virtual_size},
          {"stream", s.stream},
          {"pool", s.small_pool ? "small" : "large"},
          {"blocks", std::move(blocks)}};
}

json trace_json(const CachingAllocator& a) {
  const std::vector<MemoryEvent> events = a.events();
  json list = json::array();
  for (const MemoryEvent& e : events) {
    interruption_point();  // Note [Interruption points]: each event written
    list.push_back(detail::event_json(e));
  }
  // See Note [Exports read separate copies]: counts come from the retained events.
  const uint64_t total = events.empty() ? a.total_events() : events.back().seq + 1;
  return {{"total_events", total}, {"dropped", total - events.size()}, {"events", std::move(list)}};
}

double percent_of(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * double(part) / double(whole) : 0.0;
}

}  // namespace

// Note [Trace fields that do not apply are null]
// Every event object has the same keys, so a reader needs no per-kind schema, but a
// field the kind does not define is null rather than a misleading zero: a segment has
// no category, a mark has no address, an OOM has no block. docs/memory.md has the table.
json detail::event_json(const MemoryEvent& e) {
  const bool block = e.kind == EventKind::alloc || e.kind == EventKind::free ||
                     e.kind == EventKind::retag_from || e.kind == EventKind::retag_to;
  const bool mapping = e.kind == EventKind::segment_map || e.kind == EventKind::segment_unmap;
  const bool segment =
      e.kind == EventKind::segment_alloc || e.kind == EventKind::segment_free || mapping;
  const bool oom = e.kind == EventKind::oom;
  const bool mark = e.kind == EventKind::mark;
  auto only = [](bool applies, json value) { return applies ? std::move(value) : json(); };
  return {{"seq", e.seq},
          {"time_ns", e.time_ns},
          {"kind", std::string(event_kind_name(e.kind))},
          {"category", only(block || oom, std::string(category_name(e.category)))},
          {"stream", only(block || segment || oom, e.stream)},
          {"label", only(block || oom || mark, label_text(e.label))},
          {"addr", only(block || segment, hex(e.addr))},
          {"size", only(!mark, e.size)},
          {"requested", only(block || oom, e.requested)},
          {"segment", only(block || segment, e.segment)},
          {"offset", only(block || mapping, e.offset)},
          {"allocated_after", e.allocated_after},
          {"reserved_after", e.reserved_after},
          {"category_after", only(block, e.category_after)}};
}

json peak_report_json(const CachingAllocator& a) {
  const PeakState p = a.peak();
  json categories = json::array();
  std::vector<int> order;
  for (int c = 0; c < kNumCategories; ++c)
    if (p.by_category[size_t(c)] > 0) order.push_back(c);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return p.by_category[size_t(x)] > p.by_category[size_t(y)];
  });
  for (int c : order) {
    const int64_t bytes = p.by_category[size_t(c)];
    categories.push_back({{"category", std::string(category_name(Category(c)))},
                          {"bytes", bytes},
                          {"percent", percent_of(bytes, p.allocated)}});
  }
  json labels = json::array();
  const size_t named = std::min(p.by_label.size(), kPeakReportLabels);
  int64_t rest_bytes = 0;
  for (size_t i = 0; i < p.by_label.size(); ++i) {
    const auto& [label, bytes] = p.by_label[i];
    if (i < named)
      labels.push_back({{"label", label_text(label)},
                        {"bytes", bytes},
                        {"percent", percent_of(bytes, p.allocated)}});
    else
      rest_bytes += bytes;
  }
  return {{"allocated", p.allocated},
          {"reserved", p.reserved},
          {"cached_free", p.reserved - p.allocated},
          {"seq", p.seq},
          {"time_ns", p.time_ns},
          {"mark", p.last_mark != 0 ? json(label_text(p.last_mark)) : json()},
          {"by_category", std::move(categories)},
          {"top_labels", std::move(labels)},
          {"other_labels",
           {{"count", p.by_label.size() - named},
            {"bytes", rest_bytes},
            {"percent", percent_of(rest_bytes, p.allocated)}}}};
}

json memory_snapshot_json(const CachingAllocator& a) {
  const MemorySnapshot snap = a.snapshot();
  json segments = json::array();
  for (const SegmentInfo& s : snap.segments) segments.push_back(segment_json(s));
  const auto categories = a.by_category();
  json by_category = json::object();
  for (int c = 0; c < kNumCategories; ++c) {
    const Stat& s = categories[size_t(c)];
    by_category[std::string(category_name(Category(c)))] = {{"current", s.current},
                                                            {"peak", s.peak}};
  }
  json by_label = json::array();
  for (const auto& [label, bytes] : a.by_label())
    by_label.push_back({{"label", label_text(label)}, {"bytes", bytes}});
  const bool unlimited = snap.capacity == std::numeric_limits<size_t>::max();
  return {{"schema", kMemorySnapshotSchema},
          {"device", snap.device},
          {"capacity", unlimited ? json() : json(snap.capacity)},
          {"stats", stats_json(snap.stats)},
          {"segments", std::move(segments)},
          {"trace", trace_json(a)},
          {"by_category", std::move(by_category)},
          {"by_label", std::move(by_label)},
          {"peak", peak_report_json(a)}};
}

void write_memory_json(const CachingAllocator& a, const std::string& path) {
  detail::write_json_file(memory_snapshot_json(a), path, "memory snapshot");
}

void detail::write_json_file(const json& doc, const std::string& path, std::string_view what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  FG_CHECK(out.is_open(), "[memory] cannot open '{}' to write the {}", path, what);
  // Note [Interruption points]; a label's bytes that are not UTF-8 (a path's) are written with
  // U+FFFD, as every record of a run is (Note [Invalid UTF-8 in written JSON] in io/json_file.h).
  out << dump_interruptibly(doc, json::error_handler_t::replace) << '\n';
  out.close();
  FG_CHECK(!out.fail(), "[memory] writing the {} to '{}' failed", what, path);
}

}  // namespace fitgrad
