// The memory page (io/memviz/): a scripted allocation sequence with marks runs on a private
// meta allocator; its Chrome trace is exported, read back and drawn, and the page's embedded
// data, the page's replay input and the SVG's geometry are checked against the allocator's own
// peak report and snapshot.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "io/memviz/memviz_trace.h"
#include "io/memviz/page.h"
#include "io/memviz/timeline.h"
#include "tensor/memory/export.h"
#include "tests/io/memviz_fixture.h"

namespace fitgrad::io {
namespace {

using namespace memviz_test;

TEST_F(MemvizTest, PageIsSelfContained) {
  Allocation odd;
  {
    LabelScope l("</script><b onclick=alert(1)>");  // a label is any text
    odd = a_.allocate(1000);
  }
  const std::string page = memviz_page(memviz_trace_from_json(chrome_trace_json(a_), "t.json"));
  for (const char* external : {"http://", "https://", "src=", "<link", "@import", "url("})
    EXPECT_EQ(page.find(external), std::string::npos) << external;
  EXPECT_NE(page.find("<style>"), std::string::npos);
  EXPECT_NE(page.find("data-rendered"), std::string::npos);
  size_t closes = 0;
  for (size_t at = page.find("</script>"); at != std::string::npos;
       at = page.find("</script>", at + 1))
    ++closes;
  EXPECT_EQ(closes, 2u) << "only the data and the script end a <script>";
  const json labels = page_data(page)["labels"];
  EXPECT_NE(std::find(labels.begin(), labels.end(), "</script><b onclick=alert(1)>"), labels.end())
      << "the label survives the escaping: " << labels;
  a_.free(odd);
}

TEST_F(MemvizTest, EmbeddedDataHoldsTheLedgersPeakExactly) {
  const json peak = peak_report_json(a_);
  ASSERT_GT(peak["allocated"].get<int64_t>(), 30 * MiB);
  ASSERT_EQ(peak["mark"], "step 2 / forward");
  const json data =
      page_data(memviz_page(memviz_trace_from_json(chrome_trace_json(a_), "memory_trace.json")));
  EXPECT_EQ(data["peak"]["allocated"], peak["allocated"]);
  EXPECT_EQ(data["peak"]["reserved"], peak["reserved"]);
  EXPECT_EQ(data["peak"]["cached_free"], peak["cached_free"]);
  EXPECT_EQ(data["peak"]["by_category"], peak["by_category"]);
  EXPECT_EQ(data["peak"]["top_labels"], peak["top_labels"]);
  EXPECT_EQ(data["events"]["kind"].size(), a_.events().size());
  EXPECT_EQ(data["dropped"], 0);

  // The timeline's sample at the peak: its stack is the ledger's breakdown at the peak.
  const json& tl = data["timeline"];
  ASSERT_TRUE(data["peak"]["sample"].is_number());
  const size_t k = data["peak"]["sample"].get<size_t>();
  EXPECT_EQ(tl["event"][k], data["peak"]["event"]);
  EXPECT_EQ(tl["allocated"][k], peak["allocated"]);
  std::map<std::string, int64_t> stacked;
  for (const json& layer : tl["layers"])
    if (layer["bytes"][k].get<int64_t>() != 0) stacked[layer["name"]] = layer["bytes"][k];
  EXPECT_EQ(stacked, peak_by_category(peak));
  // Every sample's stack adds up to the allocated bytes after its event, and without
  // dropped events every byte has its category (a retag's two events included).
  for (const json& layer : tl["layers"]) EXPECT_NE(layer["name"], kUnattributedName);
  for (size_t s = 0; s < tl["event"].size(); ++s) {
    int64_t sum = 0;
    for (const json& layer : tl["layers"]) sum += layer["bytes"][s].get<int64_t>();
    EXPECT_EQ(sum, tl["allocated"][s].get<int64_t>()) << "sample " << s;
  }
}

// Replays the page's event columns as its script does, and compares the live blocks with
// the allocator's own snapshot at the end.
TEST_F(MemvizTest, EmbeddedEventsReplayToTheSnapshot) {
  const json data = page_data(memviz_page(memviz_trace_from_json(chrome_trace_json(a_), "t")));
  const json& ev = data["events"];
  auto kind = [&](size_t i) {
    return data["kinds"][ev["kind"][i].get<size_t>()].get<std::string>();
  };
  std::map<uint64_t, uint64_t> segments;                 // id -> size
  std::map<std::pair<uint64_t, uint64_t>, json> blocks;  // (segment, offset) -> block
  for (size_t i = 0; i < ev["kind"].size(); ++i) {
    const auto seg = ev["segment"][i].get<uint64_t>();
    const auto off = ev["offset"][i].get<uint64_t>();
    const std::string k = kind(i);
    if (k == "segment_alloc") segments[seg] = ev["size"][i].get<uint64_t>();
    if (k == "segment_free") segments.erase(seg);
    if (k == "alloc" || k == "retag_to")
      blocks[{seg, off}] = {{"size", ev["size"][i]},
                            {"category", data["categories"][ev["category"][i].get<size_t>()]},
                            {"label", data["labels"][ev["label"][i].get<size_t>()]}};
    if (k == "free") blocks.erase({seg, off});
  }
  const json snap = memory_snapshot_json(a_);
  std::map<uint64_t, uint64_t> snap_segments;
  std::map<std::pair<uint64_t, uint64_t>, json> snap_blocks;
  for (const json& s : snap["segments"]) {
    snap_segments[s["id"]] = s["size"];
    for (const json& b : s["blocks"])
      if (b["allocated"])
        snap_blocks[{s["id"], b["offset"]}] = {
            {"size", b["size"]}, {"category", b["category"]}, {"label", b["label"]}};
  }
  EXPECT_EQ(segments, snap_segments);
  EXPECT_EQ(blocks, snap_blocks);
  EXPECT_EQ(snap_blocks.at({0, 0})["label"], "layers.0.weight");  // a named block, at least
}

// In the expandable mode (Note [Expandable segments] in tensor/memory/caching_allocator.h)
// a segment grows by segment_map and shrinks by segment_unmap; the page's columns, replayed
// as its script does, give the mapped sizes of the allocator's snapshot.
TEST(MemvizExpandable, MappedSizesReplayToTheSnapshot) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  a.set_mode(AllocatorMode::expandable);
  run_steps(a);
  a.empty_cache();
  const json data = page_data(memviz_page(memviz_trace_from_json(chrome_trace_json(a), "t")));
  const json& ev = data["events"];
  std::map<uint64_t, uint64_t> segments;  // id -> size
  std::map<std::string, int> counts;
  for (size_t i = 0; i < ev["kind"].size(); ++i) {
    const auto seg = ev["segment"][i].get<uint64_t>();
    const auto size = ev["size"][i].get<uint64_t>();
    const std::string k = data["kinds"][ev["kind"][i].get<size_t>()].get<std::string>();
    ++counts[k];
    if (k == "segment_alloc") segments[seg] = size;
    if (k == "segment_map") segments[seg] += size;
    if (k == "segment_unmap") segments[seg] -= size;
    if (k == "segment_free") segments.erase(seg);
  }
  EXPECT_GT(counts["segment_map"], 0);
  EXPECT_GT(counts["segment_unmap"], 0);
  std::map<uint64_t, uint64_t> snap_segments;
  const json snap = memory_snapshot_json(a);
  for (const json& s : snap["segments"]) snap_segments[s["id"]] = s["size"];
  EXPECT_EQ(segments, snap_segments);
}

// The SVG's polygons, turned back into bytes with the plot box and scale on its root.
TEST_F(MemvizTest, SvgStacksAtThePeakEqualTheLedger) {
  const MemvizTrace t = memviz_trace_from_json(chrome_trace_json(a_), "t");
  const std::string svg = timeline_svg(t, build_timeline(t));
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      svg, m, std::regex(R"re(data-plot="(\S+) (\S+) (\S+) (\S+)" data-ymax="(\d+)")re")));
  const double y0 = std::stod(m[2]), h = std::stod(m[4]), ymax = std::stod(m[5]);
  auto bytes_at = [&](double y) { return (y0 + h - y) / h * ymax; };
  ASSERT_TRUE(std::regex_search(
      svg, m,
      std::regex(
          R"re(<g class="peak" data-seq="(\d+)" data-allocated="(\d+)" data-x="([\d.]+)")re")));
  const json peak = peak_report_json(a_);
  EXPECT_EQ(std::stoll(m[2]), peak["allocated"].get<int64_t>());
  const std::string peak_x = m[3];

  // Each layer's top edge at the peak's x is the cumulative stack there.
  const auto expected = peak_by_category(peak);
  const std::regex polygon(
      R"re(<polygon class="layer" data-category="([^"]+)" fill="[^"]+" points="([^"]+)")re");
  double previous_top = 0;
  std::map<std::string, int64_t> drawn;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), polygon);
       it != std::sregex_iterator(); ++it) {
    std::istringstream stream((*it)[2].str());
    std::vector<std::string> points;
    for (std::string xy; stream >> xy;) points.push_back(xy);
    // The top edge is the first half, left to right, two vertices per sample: the last
    // one at the peak's x starts the peak's sample (the one before ends the previous).
    std::optional<double> top;
    for (size_t i = 0; i < points.size() / 2; ++i) {
      const size_t comma = points[i].find(',');
      if (points[i].substr(0, comma) == peak_x) top = std::stod(points[i].substr(comma + 1));
    }
    ASSERT_TRUE(top) << "layer " << (*it)[1] << " has no vertex at the peak";
    const double cumulative = bytes_at(*top);
    const double layer_bytes = cumulative - previous_top;
    previous_top = cumulative;
    if (std::llround(layer_bytes / 1024) != 0) drawn[(*it)[1]] = std::llround(layer_bytes);
  }
  ASSERT_EQ(drawn.size(), expected.size());
  const double tolerance = ymax / h * 0.01;  // coordinates carry two decimals
  for (const auto& [category, bytes] : expected) {
    ASSERT_TRUE(drawn.count(category)) << category;
    EXPECT_NEAR(double(drawn[category]), double(bytes), 2 * tolerance) << category;
  }
  EXPECT_NEAR(previous_top, double(peak["allocated"].get<int64_t>()), tolerance);
  EXPECT_NE(svg.find(">step 2 / forward<"), std::string::npos) << "the marks are drawn";
}

TEST_F(MemvizTest, ChromeTraceAndSnapshotReadAlike) {
  const MemvizTrace chrome = memviz_trace_from_json(chrome_trace_json(a_), "memory_trace.json");
  const MemvizTrace snap = memviz_trace_from_json(memory_snapshot_json(a_), "memory.json");
  EXPECT_EQ(chrome.format, "Chrome trace");
  EXPECT_EQ(snap.format, "memory.json snapshot");
  EXPECT_EQ(chrome.device, "meta");
  EXPECT_EQ(chrome.total_events, a_.total_events());
  ASSERT_EQ(chrome.events.size(), snap.events.size());
  for (size_t i = 0; i < chrome.events.size(); ++i) {
    const VizEvent &c = chrome.events[i], &s = snap.events[i];
    EXPECT_EQ(c.seq, s.seq);
    EXPECT_EQ(c.kind, s.kind) << i;
    EXPECT_EQ(c.label, s.label) << i;
    EXPECT_EQ(c.size, s.size) << i;
    EXPECT_EQ(c.addr, s.addr) << i;
    EXPECT_EQ(c.offset, s.offset) << i;
    EXPECT_EQ(c.category_after, s.category_after) << i;
  }
  auto without_time = [](json p) {
    p.erase("time_ns");
    return p;
  };
  EXPECT_EQ(without_time(chrome.peak), without_time(snap.peak));
  // The instants Perfetto shows carry memory.json's event fields in their args.
  size_t allocator_instants = 0;
  const json trace = chrome_trace_json(a_);
  for (const json& e : trace["traceEvents"])
    if (e.value("cat", "") == "allocator") {
      ++allocator_instants;
      EXPECT_EQ(e["name"], e["args"]["kind"]);
      EXPECT_TRUE(e["args"].contains("addr") && e["args"].contains("segment")) << e;
    }
  EXPECT_GT(allocator_instants, 20u);
}

TEST_F(MemvizTest, ThinnedTimelineKeepsThePeakExact) {
  // Thousands of small events after the parameters.
  std::vector<Allocation> noise = small_temporaries(a_);
  const MemvizTrace t = memviz_trace_from_json(chrome_trace_json(a_), "t");
  ASSERT_GT(t.events.size(), 3000u);
  const Timeline tl = build_timeline(t, 100);
  EXPECT_LE(tl.event.size(), 100u);
  ASSERT_TRUE(tl.peak_sample);
  const size_t k = *tl.peak_sample;
  EXPECT_EQ(tl.allocated[k], t.peak["allocated"].get<int64_t>());
  std::map<std::string, int64_t> stacked;
  for (const TimelineLayer& l : tl.layers)
    if (l.bytes[k] != 0) stacked[l.name] = l.bytes[k];
  EXPECT_EQ(stacked, peak_by_category(t.peak));
  for (size_t s = 0; s < tl.event.size(); ++s)
    EXPECT_LE(tl.allocated[s], t.peak["allocated"].get<int64_t>()) << "no sample above the peak";
  for (const Allocation& x : noise) a_.free(x);
}

TEST_F(MemvizTest, DroppedEventsAreSaidAndTheStackStaysExact) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  a.set_trace_capacity(12);
  run_steps(a);
  const MemvizTrace t = memviz_trace_from_json(chrome_trace_json(a), "small_ring.json");
  EXPECT_GT(t.dropped, 0u);
  EXPECT_EQ(t.events.size(), 12u);
  const std::string page = memviz_page(t);
  const json data = page_data(page);
  EXPECT_EQ(data["dropped"], t.dropped);
  EXPECT_NE(page.find("id=\"dropped\""), std::string::npos);
  const Timeline tl = build_timeline(t);
  for (size_t s = 0; s < tl.event.size(); ++s) {
    int64_t sum = 0;
    for (const TimelineLayer& l : tl.layers) sum += l.bytes[s];
    EXPECT_EQ(sum, tl.allocated[s]) << "sample " << s;
  }
  EXPECT_EQ(tl.layers.front().name, kUnattributedName) << "bytes from before the window";
  EXPECT_NE(timeline_svg(t, tl).find("dropped the"), std::string::npos);
  // The peak report is the ledger's, exact though its event fell out of the ring.
  EXPECT_EQ(data["peak"]["allocated"], peak_report_json(a)["allocated"]);
}

// Note [memviz streams its events]: a file read event by event as it is parsed gives the
// trace the whole document gives, in both formats.

}  // namespace
}  // namespace fitgrad::io
