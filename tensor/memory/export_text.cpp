// The text exports: memory_summary (the stats table, after torch.cuda.memory_summary())
// and peak_report (what held memory at the peak). Both are for people, so byte counts
// go through format_bytes; programs should read memory_snapshot_json instead.
#include <limits>
#include <string_view>

#include "tensor/memory/bytes.h"
#include "tensor/memory/export.h"

namespace fitgrad {

namespace {

// One row: a name column, then up to four right-aligned cells, split by '|'.
constexpr int kNameWidth = 26;
constexpr int kCellWidth = 13;
constexpr int kRuleWidth = 1 + kNameWidth + 2 + 4 * (kCellWidth + 2);

void rule(std::string& out, char c) {
  out.append(size_t(kRuleWidth), c);
  out += '\n';
}

void row(std::string& out, std::string_view name, std::initializer_list<std::string> cells) {
  out += fmt::format(" {:<{}} ", name, kNameWidth);
  for (const std::string& cell : cells) out += fmt::format("|{:>{}} ", cell, kCellWidth);
  // Cells are right-aligned, so trailing blanks carry nothing.
  while (out.back() == ' ') out.pop_back();
  out += '\n';
}

// A stat in all pools, then in the small and large pools apart.
void stat_rows(std::string& out, std::string_view name, const StatArray& s, bool bytes) {
  auto cell = [bytes](int64_t v) { return bytes ? format_bytes(v) : fmt::format("{}", v); };
  static constexpr std::pair<StatPool, std::string_view> kPools[] = {
      {kAllPools, ""}, {kSmallPool, "  from small pool"}, {kLargePool, "  from large pool"}};
  for (const auto& [pool, pool_name] : kPools) {
    const Stat& st = s[size_t(pool)];
    row(out, pool == kAllPools ? name : pool_name,
        {cell(st.current), cell(st.peak), cell(st.allocated), cell(st.freed)});
  }
}

std::string label_or_none(const nlohmann::json& text) {
  const auto& s = text.get_ref<const std::string&>();
  return s.empty() ? "(no label)" : s;
}

}  // namespace

std::string memory_summary(const CachingAllocator& a) {
  const MemoryStats s = a.stats();
  const size_t capacity = a.capacity();
  const bool unlimited = capacity == std::numeric_limits<size_t>::max();
  std::string out;
  rule(out, '=');
  out += fmt::format(" fitgrad memory summary: {}, capacity {}\n", a.device().str(),
                     unlimited ? std::string("unlimited") : format_bytes(int64_t(capacity)));
  rule(out, '=');
  row(out, "Metric", {"Current", "Peak", "Total alloc", "Total freed"});
  rule(out, '-');
  stat_rows(out, "Allocated memory", s.allocated_bytes, true);
  stat_rows(out, "Active memory", s.active_bytes, true);
  stat_rows(out, "Requested memory", s.requested_bytes, true);
  stat_rows(out, "Reserved memory", s.reserved_bytes, true);
  stat_rows(out, "Inactive split memory", s.inactive_split_bytes, true);
  rule(out, '-');
  stat_rows(out, "Allocations", s.allocation, false);
  stat_rows(out, "Active allocations", s.active, false);
  stat_rows(out, "Segments", s.segment, false);
  stat_rows(out, "Inactive split blocks", s.inactive_split, false);
  rule(out, '-');
  row(out, "Out of memory errors", {fmt::format("{}", s.num_ooms)});
  row(out, "Alloc retries", {fmt::format("{}", s.num_alloc_retries)});
  row(out, "Segment allocs", {fmt::format("{}", s.num_segment_allocs)});
  row(out, "Segment frees", {fmt::format("{}", s.num_segment_frees)});
  // Note [Expandable segments]: the mode, its maps and unmaps, and each segment's mapping.
  if (a.mode() == AllocatorMode::expandable || s.num_segment_maps > 0 || s.num_segment_unmaps > 0) {
    row(out, "Allocator mode", {std::string(allocator_mode_name(a.mode()))});
    row(out, "Segment maps", {fmt::format("{}", s.num_segment_maps)});
    row(out, "Segment unmaps", {fmt::format("{}", s.num_segment_unmaps)});
    for (const SegmentInfo& seg : a.snapshot().segments)
      if (seg.expandable)
        row(out, fmt::format("Expandable #{} mapped, range", seg.id),
            {format_bytes(int64_t(seg.size)), format_bytes(int64_t(seg.virtual_size))});
  }
  rule(out, '-');
  // Each category's own peak; the breakdown at the overall peak is in peak_report.
  row(out, "Live bytes by category", {"Current", "Peak"});
  const auto categories = a.by_category();
  for (int c = 0; c < kNumCategories; ++c) {
    const Stat& st = categories[size_t(c)];
    row(out, category_name(Category(c)), {format_bytes(st.current), format_bytes(st.peak)});
  }
  rule(out, '=');
  return out;
}

std::string peak_report(const CachingAllocator& a) {
  const nlohmann::json p = peak_report_json(a);
  const auto allocated = p["allocated"].get<int64_t>();
  std::string out = fmt::format("Memory at the peak on {}\n", a.device().str());
  out += fmt::format("  peak allocated:           {} (event #{}, {:.3f} ms after start)\n",
                     format_bytes(allocated), p["seq"].get<uint64_t>(),
                     double(p["time_ns"].get<int64_t>()) / 1e6);
  out +=
      fmt::format("  reserved at the peak:     {}\n", format_bytes(p["reserved"].get<int64_t>()));
  out += fmt::format("  cached but free at peak:  {}\n",
                     format_bytes(p["cached_free"].get<int64_t>()));
  out += fmt::format("  mark in force:            {}\n",
                     p["mark"].is_null() ? std::string("(none)") : p["mark"].get<std::string>());
  if (allocated == 0) {
    out += "  nothing was allocated\n";
    return out;
  }
  auto line = [&out](const nlohmann::json& bytes, const nlohmann::json& percent,
                     std::string_view what) {
    out += fmt::format("  {:>12} {:>6.1f}%  {}\n", format_bytes(bytes.get<int64_t>()),
                       percent.get<double>(), what);
  };
  out += "By category (share of peak allocated):\n";
  for (const auto& c : p["by_category"])
    line(c["bytes"], c["percent"], c["category"].get<std::string>());
  out += "Top labels (share of peak allocated):\n";
  for (const auto& l : p["top_labels"]) line(l["bytes"], l["percent"], label_or_none(l["label"]));
  const auto& rest = p["other_labels"];
  if (rest["count"].get<size_t>() > 0)
    line(rest["bytes"], rest["percent"],
         fmt::format("({} more labels)", rest["count"].get<size_t>()));
  return out;
}

}  // namespace fitgrad
