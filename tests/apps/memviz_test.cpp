// Tests of `fitgrad memviz` (apps/memviz/): a scripted allocation sequence with marks runs
// on a private meta allocator; its Chrome trace is exported, read back and drawn, and the
// page's embedded data, the page's replay input and the SVG's geometry are checked against
// the allocator's own peak report and snapshot. Malformed inputs must name their file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <streambuf>
#include <tuple>

#include "apps/memviz/command.h"
#include "io/memviz/memviz_trace.h"
#include "io/memviz/page.h"
#include "io/memviz/streamed_json.h"
#include "io/memviz/timeline.h"
#include "io/memviz/trace_summary.h"
#include "tensor/error.h"
#include "tensor/memory/export.h"
#include "tensor/memory/raw_source.h"
#include "tensor/memory/scope.h"

namespace fitgrad::apps {

using io::build_timeline;
using io::kKeptEvents;
using io::kPageDataId;
using io::kTimelinePoints;
using io::kUnattributedName;
using io::memviz_page;
using io::memviz_trace_from_json;
using io::MemvizTrace;
using io::parse_streamed_json;
using io::read_memviz_trace;
using io::Timeline;
using io::timeline_svg;
using io::TimelineLayer;
using io::TraceSummarizer;
using io::TraceSummary;
using io::VizBlock;
using io::VizEvent;
using io::VizMark;
namespace {

using nlohmann::json;

constexpr int64_t MiB = 1024 * 1024;

// Two steps of a toy model: parameters, then per step activations, a temporary that makes
// the peak in step 2's forward, gradients (one adopted from a temporary by a retag) and
// optimizer state, with a mark for each phase.
void run_steps(CachingAllocator& a) {
  std::vector<Allocation> params, state;
  {
    CategoryScope cat(Category::parameter);
    for (int i = 0; i < 3; ++i) {
      LabelScope l(fmt::format("layers.{}.weight", i));
      params.push_back(a.allocate(size_t(4 + i) * MiB));
    }
  }
  std::vector<Allocation> grads;
  for (int step = 1; step <= 2; ++step) {
    a.mark(fmt::format("step {} / forward", step));
    std::vector<Allocation> acts;
    {
      CategoryScope cat(Category::activation);
      for (int i = 0; i < 3; ++i) {
        LabelScope l(fmt::format("layers.{}", i));
        OpScope op("matmul");
        acts.push_back(a.allocate(size_t(step) * 3 * MiB + 777));
      }
    }
    Allocation tmp;
    {
      CategoryScope cat(Category::temporary);
      OpScope op("softmax");
      tmp = a.allocate(size_t(step) * 9 * MiB);
    }
    a.free(tmp);
    a.mark(fmt::format("step {} / backward", step));
    for (int i = 2; i >= 0; --i) {
      a.free(acts[size_t(i)]);
      if (step > 1) continue;
      Allocation g;
      {
        CategoryScope cat(Category::temporary);
        g = a.allocate(size_t(4 + i) * MiB);
      }
      a.retag(g, Category::gradient, intern_label(fmt::format("layers.{}.weight.grad", i)));
      grads.push_back(g);
    }
    a.mark(fmt::format("step {} / optimizer", step));
    if (step == 1) {
      CategoryScope cat(Category::optimizer_state);
      LabelScope l("adam.exp_avg");
      state.push_back(a.allocate(5 * MiB));
    }
  }
  {
    CategoryScope cat(Category::data);
    LabelScope l("batch");
    state.push_back(a.allocate(64 * 1024));
  }
  // The live blocks stay: the snapshot at the end must show them.
}

class MemvizTest : public ::testing::Test {
 protected:
  MemvizTest() : a_(Device::meta(), make_virtual_source()) { run_steps(a_); }

  std::filesystem::path temp_path(const std::string& name) const {
    return std::filesystem::temp_directory_path() /
           fmt::format("fitgrad_memviz_{}_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name(), name);
  }
  void write(const std::filesystem::path& p, const std::string& text) const {
    std::ofstream(p, std::ios::binary) << text;
  }

  CachingAllocator a_;
};

// The JSON the page embeds, parsed back.
json page_data(const std::string& page) {
  const std::string open = fmt::format("<script type=\"application/json\" id=\"{}\">", kPageDataId);
  const size_t begin = page.find(open);
  EXPECT_NE(begin, std::string::npos);
  const size_t start = begin + open.size();
  const size_t end = page.find("</script>", start);
  EXPECT_NE(end, std::string::npos);
  return json::parse(page.substr(start, end - start));
}

// The ledger's bytes per category at the peak.
std::map<std::string, int64_t> peak_by_category(const json& peak) {
  std::map<std::string, int64_t> out;
  for (const json& c : peak["by_category"]) out[c["category"]] = c["bytes"].get<int64_t>();
  return out;
}

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
  // Thousands of small events after the parameters, then a spike and more events.
  std::vector<Allocation> noise;
  {
    CategoryScope cat(Category::temporary);
    for (int i = 0; i < 3000; ++i) {
      noise.push_back(a_.allocate(size_t(1 + i % 7) * 4096));
      if (i % 3 == 2) {
        a_.free(noise.front());
        noise.erase(noise.begin());
      }
    }
  }
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
TEST_F(MemvizTest, StreamedFilesReadAsTheirDocuments) {
  for (const json& doc : {chrome_trace_json(a_), memory_snapshot_json(a_)}) {
    const auto p = temp_path("streamed.json");
    write(p, doc.dump());
    const MemvizTrace streamed = read_memviz_trace(p.string());
    const MemvizTrace whole = memviz_trace_from_json(doc, p.string());
    std::filesystem::remove(p);
    EXPECT_EQ(streamed.format, whole.format);
    EXPECT_EQ(streamed.total_events, whole.total_events);
    EXPECT_EQ(streamed.peak, whole.peak);
    ASSERT_EQ(streamed.events.size(), whole.events.size());
    ASSERT_GT(whole.events.size(), 10u);
    for (size_t i = 0; i < whole.events.size(); ++i) {
      const VizEvent &x = streamed.events[i], &y = whole.events[i];
      EXPECT_EQ(std::tie(x.seq, x.kind, x.label, x.size, x.addr, x.allocated_after),
                std::tie(y.seq, y.kind, y.label, y.size, y.addr, y.allocated_after))
          << whole.format << " event " << i;
    }
  }
  // Only the chosen arrays are streamed; the rest of the document is kept.
  std::istringstream in(R"({"a": [1, {"b": [2]}], "x": {"a": [3]}, "c": [[4], 5]})");
  std::vector<std::string> seen;
  const json rest = parse_streamed_json(
      in, {{"a"}, {"c"}}, [&](size_t path, const json& e, size_t i, const json&) {
        seen.push_back(fmt::format("{}:{}:{}", path, i, e.dump()));
      });
  EXPECT_EQ(seen, (std::vector<std::string>{"0:0:1", R"(0:1:{"b":[2]})", "1:0:[4]", "1:1:5"}));
  EXPECT_EQ(rest, json::parse(R"({"a": [], "x": {"a": [3]}, "c": []})"));
}

// Note [Traces past the kept bound are summarised]: the summariser holds at most
// kTimelinePoints samples however many events pass, and the peak's sample is exact.
TEST(MemvizSummaryTest, SamplesStayWithinTheBoundForAMillionEvents) {
  TraceSummarizer summary(kTimelinePoints);
  constexpr size_t kEvents = 1000000, kPeak = 654320;  // an alloc
  summary.expect_peak(kPeak);
  int64_t live = 0;
  size_t most = 0;
  for (size_t i = 0; i < kEvents; ++i) {
    VizEvent e;
    e.seq = i;
    e.kind = i % 2 == 0 ? EventKind::alloc : EventKind::free;
    e.category = int(Category::activation);
    e.size = i == kPeak ? 1 << 20 : 4096;
    live += e.kind == EventKind::alloc ? int64_t(e.size) : -live;
    e.allocated_after = e.category_after = live;
    summary.add(e);
    most = std::max(most, summary.samples());
  }
  EXPECT_LE(most, kTimelinePoints);
  const TraceSummary s = summary.finish(kPeak);
  const Timeline& tl = s.timeline;
  EXPECT_EQ(tl.events, kEvents);
  EXPECT_LE(tl.event.size(), kTimelinePoints);
  EXPECT_GT(tl.event.size(), kTimelinePoints / 2);
  ASSERT_TRUE(tl.peak_sample);
  EXPECT_EQ(tl.event[*tl.peak_sample], kPeak);
  EXPECT_EQ(tl.allocated[*tl.peak_sample], 1 << 20);
  for (size_t k = 1; k < tl.first.size(); ++k) {
    EXPECT_LT(tl.first[k - 1], tl.first[k]);
    EXPECT_LE(tl.first[k - 1], tl.event[k - 1]);
    EXPECT_LT(tl.event[k - 1], tl.first[k]);
  }
  ASSERT_TRUE(s.peak_state);
  ASSERT_EQ(s.peak_state->blocks.size(), 1u);
  EXPECT_EQ(s.peak_state->blocks[0].size, 1u << 20);
}

// A Chrome trace in fitgrad's format made as it is read, so the test never holds its text:
// alloc/free pairs of 4 KiB activations, a mark every 1000 events, and a 1 MiB temporary
// live for two events that makes the peak.
class GeneratedTrace : public std::streambuf {
 public:
  GeneratedTrace(uint64_t events, uint64_t peak_at) : events_(events), temp_at_(peak_at) {
    // A dry run finds the peak, the first event with the most allocated bytes.
    State s;
    for (uint64_t i = 0; i < events_; ++i) {
      step(s, i);
      if (s.allocated() > peak_bytes_) {
        peak_bytes_ = s.allocated();
        peak_seq_ = i;
        peak_activation_ = s.activation;
      }
    }
    chunk_ = fmt::format(
        R"({{"traceEvents": [{{"ph": "M", "name": "process_name", "pid": 1, "args": {{"name": "g", )"
        R"("device": "cpu", "total_events": {}, "dropped": 0}}}})",
        events_);
    setg(chunk_.data(), chunk_.data(), chunk_.data() + chunk_.size());
  }
  uint64_t peak_seq() const { return peak_seq_; }
  int64_t peak_bytes() const { return peak_bytes_; }

 protected:
  int_type underflow() override {
    chunk_.clear();
    if (next_ < events_) {
      const uint64_t i = next_++;
      const std::string kind = step(state_, i);
      const int64_t alloc = state_.allocated();
      if (kind == "segment_alloc")
        chunk_ = fmt::format(
            R"(, {{"ph": "i", "cat": "allocator", "name": "x", "args": {{"seq": {}, "time_ns": {}, )"
            R"("kind": "segment_alloc", "size": {}, "segment": 0, "addr": "0x1000", )"
            R"("allocated_after": 0, "reserved_after": {}}}}})",
            i, i, kReserved, kReserved);
      else if (kind == "mark")
        chunk_ = fmt::format(
            R"(, {{"ph": "i", "cat": "mark", "name": "m", "args": {{"seq": {}, "time_ns": {}, )"
            R"("kind": "mark", "label": "mark {}", "allocated_after": {}, "reserved_after": {}}}}})",
            i, i, i, alloc, kReserved);
      else
        chunk_ = fmt::format(
            R"(, {{"ph": "i", "cat": "allocator", "name": "x", "args": {{"seq": {}, "time_ns": {}, )"
            R"("kind": "{}", "category": "{}", "label": "{}", "size": {}, "segment": 0, )"
            R"("offset": {}, "addr": "0x1", "allocated_after": {}, "reserved_after": {}, )"
            R"("category_after": {}}}}})",
            i, i, kind, state_.last_temp ? "temporary" : "activation",
            state_.last_temp ? "softmax" : "act", state_.last_temp ? kTemp : kAct,
            state_.last_temp ? kTempOffset : 0, alloc, kReserved,
            state_.last_temp ? state_.temporary : state_.activation);
      if (i == peak_seq_)
        chunk_ += fmt::format(
            R"(, {{"ph": "i", "cat": "peak", "name": "peak", "args": {{"allocated": {}, )"
            R"("reserved": {}, "cached_free": {}, "seq": {}, "time_ns": {}, "mark": null, )"
            R"("by_category": [{{"category": "temporary", "bytes": {}, "percent": 1}}{}], )"
            R"("top_labels": [], "other_labels": {{"count": 0, "bytes": 0}}}}}})",
            peak_bytes_, kReserved, kReserved - peak_bytes_, i, i, kTemp,
            peak_activation_ > 0
                ? fmt::format(R"(, {{"category": "activation", "bytes": {}, "percent": 1}})",
                              peak_activation_)
                : "");
    } else if (!ended_) {
      ended_ = true;
      chunk_ = "]}";
    } else {
      return traits_type::eof();
    }
    setg(chunk_.data(), chunk_.data(), chunk_.data() + chunk_.size());
    return traits_type::to_int_type(chunk_[0]);
  }

 private:
  static constexpr int64_t kAct = 4096, kTemp = 1 << 20, kTempOffset = 1 << 21;
  static constexpr int64_t kReserved = int64_t(1) << 30;
  struct State {
    int64_t activation = 0, temporary = 0;
    bool last_temp = false;
    int64_t allocated() const { return activation + temporary; }
  };
  // Event i's kind ("alloc", "free", "mark", "segment_alloc"), applied to `s`.
  std::string step(State& s, uint64_t i) const {
    s.last_temp = false;
    if (i == 0) return "segment_alloc";
    if (i % 1000 == 0) return "mark";
    if (i == temp_at_ || i == temp_at_ + 2) {
      s.last_temp = true;
      s.temporary = i == temp_at_ ? kTemp : 0;
      return i == temp_at_ ? "alloc" : "free";
    }
    s.activation = s.activation == 0 ? kAct : 0;
    return s.activation > 0 ? "alloc" : "free";
  }

  uint64_t events_, temp_at_, next_ = 0;
  uint64_t peak_seq_ = 0;
  int64_t peak_bytes_ = 0, peak_activation_ = 0;
  State state_;
  bool ended_ = false;
  std::string chunk_;
};

// A trace past kKeptEvents, streamed through the reader: it keeps no events, draws a
// bounded summary whose peak is exact, and knows the blocks live at the peak.
TEST(MemvizSummaryTest, ATracePastTheKeptBoundIsReadAsABoundedSummary) {
  const uint64_t events = kKeptEvents + 20000;
  GeneratedTrace text(events, 2 * events / 3);
  std::istream in(&text);
  const MemvizTrace t = read_memviz_trace(in, "generated.json");
  EXPECT_EQ(t.window, events);
  EXPECT_TRUE(t.events.empty()) << "the events are not kept";
  ASSERT_TRUE(t.summary);
  const Timeline tl = build_timeline(t);
  EXPECT_LE(tl.event.size(), kTimelinePoints);
  EXPECT_LE(tl.marks.size(), 2 * tl.event.size());
  EXPECT_GT(tl.marks.size(), 0u);
  ASSERT_TRUE(tl.peak_sample);
  const size_t k = *tl.peak_sample;
  EXPECT_EQ(tl.event[k], text.peak_seq());
  EXPECT_EQ(tl.allocated[k], text.peak_bytes());
  std::map<std::string, int64_t> stacked;
  for (const TimelineLayer& l : tl.layers)
    if (l.bytes[k] != 0) stacked[l.name] = l.bytes[k];
  EXPECT_EQ(stacked, peak_by_category(t.peak));
  ASSERT_TRUE(t.summary->peak_state);
  int64_t live = 0;
  for (const VizBlock& b : t.summary->peak_state->blocks) live += int64_t(b.size);
  EXPECT_EQ(live, text.peak_bytes());
  const json data = page_data(memviz_page(t));
  EXPECT_TRUE(data["events"].is_null());
  EXPECT_EQ(data["window"], events);
  EXPECT_EQ(data["peak_state"]["segments"].size(), 1u);
}

// A trace read whole and the same trace summarised agree where the summary is exact: the
// peak's sample, every sample's stack, the marks it keeps, and the blocks at the peak.
TEST_F(MemvizTest, SummaryAgreesWithTheWholeTrace) {
  std::vector<Allocation> noise;
  {
    CategoryScope cat(Category::temporary);
    for (int i = 0; i < 3000; ++i) {
      noise.push_back(a_.allocate(size_t(1 + i % 7) * 4096));
      if (i % 3 == 2) {
        a_.free(noise.front());
        noise.erase(noise.begin());
      }
    }
  }
  for (const json& doc : {chrome_trace_json(a_), memory_snapshot_json(a_)}) {
    const auto p = temp_path("summary.json");
    write(p, doc.dump());
    const MemvizTrace whole = read_memviz_trace(p.string());
    const MemvizTrace summed = read_memviz_trace(p.string(), 10);
    std::filesystem::remove(p);
    ASSERT_FALSE(whole.summary);
    ASSERT_TRUE(summed.summary) << summed.format;
    EXPECT_EQ(summed.window, whole.events.size());
    EXPECT_EQ(summed.first_seq, whole.events.front().seq);
    const Timeline tl = build_timeline(summed);
    EXPECT_LE(tl.event.size(), kTimelinePoints);
    ASSERT_TRUE(tl.peak_sample);
    const size_t k = *tl.peak_sample;
    EXPECT_EQ(whole.events.front().seq + tl.event[k], whole.peak["seq"].get<uint64_t>());
    std::map<std::string, int64_t> stacked;
    for (const TimelineLayer& l : tl.layers)
      if (l.bytes[k] != 0) stacked[l.name] = l.bytes[k];
    EXPECT_EQ(stacked, peak_by_category(whole.peak)) << summed.format;
    for (size_t s = 0; s < tl.event.size(); ++s) {
      const VizEvent& e = whole.events[tl.event[s]];
      EXPECT_EQ(tl.allocated[s], e.allocated_after) << s;
      int64_t sum = 0;
      for (const TimelineLayer& l : tl.layers) sum += l.bytes[s];
      EXPECT_EQ(sum, tl.allocated[s]) << "sample " << s;
    }
    for (const VizMark& m : tl.marks) {
      EXPECT_EQ(whole.events[m.event].label, m.label);
      EXPECT_EQ(whole.events[m.event].kind, EventKind::mark);
    }
    EXPECT_FALSE(tl.marks.empty());
    // The blocks at the peak, replayed from the whole trace.
    std::map<std::pair<uint64_t, uint64_t>, std::tuple<uint64_t, int, std::string>> expected, got;
    const size_t peak_event = *tl.peak_event;
    for (size_t i = 0; i <= peak_event; ++i) {
      const VizEvent& e = whole.events[i];
      if (e.kind == EventKind::alloc || e.kind == EventKind::retag_to)
        expected[{e.segment, e.offset}] = {e.size, e.category, e.label};
      if (e.kind == EventKind::free) expected.erase({e.segment, e.offset});
    }
    ASSERT_TRUE(summed.summary->peak_state) << summed.format;
    for (const VizBlock& b : summed.summary->peak_state->blocks)
      got[{b.segment, b.offset}] = {b.size, b.category, b.label};
    EXPECT_EQ(got, expected) << summed.format;
    EXPECT_NE(timeline_svg(summed, tl).find("<polygon class=\"layer\""), std::string::npos);
  }
  for (const Allocation& x : noise) a_.free(x);
}

TEST_F(MemvizTest, MalformedInputsNameTheFileAndTheProblem) {
  auto error_of = [&](const std::string& name, const std::string& text) {
    const auto p = temp_path(name);
    write(p, text);
    std::string message;
    try {
      read_memviz_trace(p.string());
    } catch (const Error& e) {
      message = e.what();
    }
    std::filesystem::remove(p);
    EXPECT_NE(message.find(p.string()), std::string::npos) << message;
    return message;
  };
  EXPECT_NE(error_of("a.json", "{\"traceEvents\": [").find("not JSON"), std::string::npos);
  EXPECT_NE(error_of("b.json", "[1, 2]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(error_of("c.json", R"({"traceEvents": [{"ph": "X", "name": "work", "ts": 1}]})")
                .find("without fitgrad's allocator events"),
            std::string::npos);
  EXPECT_NE(error_of("d.json", "{\"weights\": 1}").find("neither a Chrome trace"),
            std::string::npos);
  // A real trace with one field spoiled: the error names the event and the field.
  json trace = chrome_trace_json(a_);
  for (json& e : trace["traceEvents"])
    if (e.value("cat", "") == "allocator" && e["args"]["kind"] == "alloc") {
      e["args"]["size"] = "big";
      break;
    }
  const std::string spoiled = error_of("e.json", trace.dump());
  EXPECT_NE(spoiled.find("'size' must be a non-negative integer"), std::string::npos) << spoiled;
  EXPECT_NE(spoiled.find("traceEvents["), std::string::npos) << spoiled;
  json snap = memory_snapshot_json(a_);
  snap["trace"]["events"].erase(3);
  EXPECT_NE(error_of("f.json", snap.dump()).find("not consecutive"), std::string::npos);
  json no_peak = memory_snapshot_json(a_);
  no_peak["peak"].erase("by_category");
  EXPECT_NE(error_of("g.json", no_peak.dump()).find("'by_category' is missing"), std::string::npos);
  // Issue 31: a field of another JSON type names its key, and a peak past the trace's end
  // is an error, not a page drawn without comment.
  json ph_number = chrome_trace_json(a_);
  ph_number["traceEvents"][1]["ph"] = 5;
  EXPECT_NE(error_of("h.json", ph_number.dump()).find("'ph' must be a string, got 5"),
            std::string::npos);
  json late_peak = memory_snapshot_json(a_);
  const uint64_t events = late_peak["trace"]["total_events"].get<uint64_t>();
  late_peak["peak"]["seq"] = events + 10;
  EXPECT_NE(error_of("i.json", late_peak.dump())
                .find(fmt::format("the peak is at event #{}, past the trace's last event #{}",
                                  events + 10, events - 1)),
            std::string::npos);
  // ... whether the trace is kept or summarised.
  const auto late = temp_path("late.json");
  write(late, late_peak.dump());
  EXPECT_THROW(read_memviz_trace(late.string(), 5), Error);
  try {
    read_memviz_trace(late.string(), 5);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("past the trace's last event"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove(late);
  const std::string missing = temp_path("missing.json").string();
  EXPECT_THROW(
      {
        try {
          read_memviz_trace(missing);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(missing), std::string::npos);
          throw;
        }
      },
      Error);
}

TEST_F(MemvizTest, CommandWritesThePageAndTheSvg) {
  const auto trace = temp_path("memory_trace.json"), html = temp_path("out.html"),
             svg = temp_path("out.svg");
  write_chrome_trace(a_, trace.string());
  std::ostringstream out;
  run_memviz({trace.string(), html.string(), svg.string()}, out);
  EXPECT_NE(out.str().find("wrote " + html.string() + " and " + svg.string()), std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("(step 2 / forward)"), std::string::npos) << out.str();
  std::ifstream page(html), picture(svg);
  std::stringstream page_text, svg_text;
  page_text << page.rdbuf();
  svg_text << picture.rdbuf();
  EXPECT_EQ(page_data(page_text.str())["peak"]["allocated"], peak_report_json(a_)["allocated"]);
  EXPECT_EQ(svg_text.str().rfind("<svg", 0), 0u);
  EXPECT_THROW(run_memviz({trace.string(), "", ""}, out), Error);
  for (const auto& p : {trace, html, svg}) std::filesystem::remove(p);
}

}  // namespace
}  // namespace fitgrad::apps
