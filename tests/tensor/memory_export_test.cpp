// Tests of the memory exports (tensor/memory/export.h). Each test runs a scripted
// sequence of allocations on a private allocator and checks the exports against byte
// counts worked out by hand from the allocator policy: requests round up to 512 B, the
// small pool (<= 1 MiB) cuts 2 MiB segments, a large request below 10 MiB gets a
// 20 MiB segment, and a larger one a segment of its size rounded up to 2 MiB.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tensor/memory/bytes.h"
#include "tensor/memory/export.h"
#include "tensor/memory/scope.h"

namespace fitgrad {
namespace {

using nlohmann::json;

constexpr int64_t KiB = 1024;
constexpr int64_t MiB = 1024 * 1024;

// The script, with what the policy makes of each request:
//   mark "step 0 / forward"
//   w1   parameter   model.embed.weight    3 MiB       -> 3 MiB, new 20 MiB segment 0 @ 0
//   w2   parameter   model.head.weight     1000 B      -> 1 KiB, new 2 MiB segment 1 @ 0
//   act  activation  model.layers.0/silu   5 MiB + 1   -> 5 MiB + 512, segment 0 @ 3 MiB
//   tmp  temporary   matmul                12 MiB      -> 12 MiB, new 12 MiB segment 2
//        (the peak: 20 MiB + 1536 allocated in 34 MiB reserved)
//   mark "step 0 / backward"
//   free tmp                               (segment 2 becomes cached and free)
//   g    gradient    model.head.weight.grad 200 B      -> 512 B, segment 1 @ 1 KiB
//   free act
//   empty_cache                            (releases segment 2 only)
constexpr int64_t kW1 = 3 * MiB, kW2 = 1 * KiB, kAct = 5 * MiB + 512, kTmp = 12 * MiB, kG = 512;
constexpr int64_t kPeak = kW1 + kW2 + kAct + kTmp;
constexpr int64_t kPeakReserved = 20 * MiB + 2 * MiB + 12 * MiB;
constexpr int64_t kFinalAllocated = kW1 + kW2 + kG;
constexpr int64_t kFinalReserved = 20 * MiB + 2 * MiB;

void run_script(CachingAllocator& a) {
  a.mark("step 0 / forward");
  Allocation w1, w2, act, tmp, g;
  {
    CategoryScope cat(Category::parameter);
    LabelScope model("model");
    {
      LabelScope l("embed.weight");
      w1 = a.allocate(3 * MiB);
    }
    LabelScope l("head.weight");
    w2 = a.allocate(1000);
  }
  {
    CategoryScope cat(Category::activation);
    LabelScope l("model.layers.0");
    OpScope op("silu");
    act = a.allocate(5 * MiB + 1);
  }
  {
    CategoryScope cat(Category::temporary);
    OpScope op("matmul");
    tmp = a.allocate(12 * MiB);
  }
  a.mark("step 0 / backward");
  a.free(tmp);
  {
    CategoryScope cat(Category::gradient);
    LabelScope l("model.head.weight.grad");
    g = a.allocate(200);
  }
  a.free(act);
  a.empty_cache();
  // w1, w2 and g stay live; the allocator's destructor takes them back.
}

json stat(int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
  return {{"current", current}, {"peak", peak}, {"allocated", allocated}, {"freed", freed}};
}

// Unique per process, test and parameter, so parallel ctest processes never share a file
// (IsaPaths.* runs the same tests in other processes at the same time).
std::filesystem::path temp_path(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = fmt::format("{}_{}", info->test_suite_name(), info->name());
  std::replace(test.begin(), test.end(), '/', '_');
  return std::filesystem::temp_directory_path() /
         fmt::format("fitgrad_{}_{}_{}", ::getpid(), test, name);
}

json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// The ledger converts its clock ticks to nanoseconds with a rate calibrated at each
// read, so two exports of the same state agree on everything but the times.
json without_times(json j) {
  if (j.is_object()) {
    j.erase("time_ns");
    j.erase("ts");
  }
  if (j.is_structured())
    for (json& child : j) child = without_times(std::move(child));
  return j;
}

class ExportScript : public ::testing::TestWithParam<bool> {  // true: cpu, false: meta
 protected:
  ExportScript()
      : a_(GetParam() ? Device::cpu() : Device::meta(),
           GetParam() ? make_host_source() : make_virtual_source()) {
    run_script(a_);
  }
  CachingAllocator a_;
};

TEST_P(ExportScript, JsonStatsMatchTheScript) {
  // Round trip through text, as a reader of the file would see it.
  const json j = json::parse(memory_snapshot_json(a_).dump());
  EXPECT_EQ(j["schema"], kMemorySnapshotSchema);
  EXPECT_EQ(j["device"], GetParam() ? "cpu" : "meta");
  EXPECT_TRUE(j["capacity"].is_null());
  const json& s = j["stats"];
  EXPECT_EQ(s["allocated_bytes"]["all"], stat(kFinalAllocated, kPeak, kPeak + kG, kAct + kTmp));
  EXPECT_EQ(s["allocated_bytes"]["small_pool"], stat(kW2 + kG, kW2 + kG, kW2 + kG, 0));
  EXPECT_EQ(s["allocated_bytes"]["large_pool"],
            stat(kW1, kW1 + kAct + kTmp, kW1 + kAct + kTmp, kAct + kTmp));
  EXPECT_EQ(s["active_bytes"], s["allocated_bytes"]);
  const int64_t asked = 3 * MiB + 1000 + (5 * MiB + 1) + 12 * MiB + 200;
  EXPECT_EQ(s["requested_bytes"]["all"],
            stat(3 * MiB + 1000 + 200, asked - 200, asked, 5 * MiB + 1 + 12 * MiB));
  EXPECT_EQ(s["reserved_bytes"]["all"],
            stat(kFinalReserved, kPeakReserved, kPeakReserved, 12 * MiB));
  EXPECT_EQ(s["reserved_bytes"]["small_pool"], stat(2 * MiB, 2 * MiB, 2 * MiB, 0));
  EXPECT_EQ(s["reserved_bytes"]["large_pool"], stat(20 * MiB, 32 * MiB, 32 * MiB, 12 * MiB));
  EXPECT_EQ(s["segment"]["all"], stat(2, 3, 3, 1));
  EXPECT_EQ(s["allocation"]["all"], stat(3, 4, 5, 2));
  // Free pieces of partly used segments: 17 MiB in segment 0, 2 MiB - 1536 in segment 1.
  EXPECT_EQ(s["inactive_split_bytes"]["all"]["current"], 17 * MiB + 2 * MiB - 1536);
  EXPECT_EQ(s["inactive_split"]["all"]["current"], 2);
  EXPECT_EQ(s["num_segment_allocs"], 3);
  EXPECT_EQ(s["num_segment_frees"], 1);
  EXPECT_EQ(s["num_ooms"], 0);
  EXPECT_EQ(s["num_alloc_retries"], 0);

  EXPECT_EQ(j["by_category"]["parameter"], json({{"current", kW1 + kW2}, {"peak", kW1 + kW2}}));
  EXPECT_EQ(j["by_category"]["activation"], json({{"current", 0}, {"peak", kAct}}));
  EXPECT_EQ(j["by_category"]["temporary"], json({{"current", 0}, {"peak", kTmp}}));
  EXPECT_EQ(j["by_category"]["gradient"], json({{"current", kG}, {"peak", kG}}));
  EXPECT_EQ(j["by_category"]["data"], json({{"current", 0}, {"peak", 0}}));
  EXPECT_EQ(j["by_category"].size(), size_t(kNumCategories));
  EXPECT_EQ(j["by_label"], json::parse(R"([
      {"label": "model.embed.weight", "bytes": 3145728},
      {"label": "model.head.weight", "bytes": 1024},
      {"label": "model.head.weight.grad", "bytes": 512}])"));
}

TEST_P(ExportScript, JsonSegmentsAreCoveredByTheirBlocks) {
  const json j = memory_snapshot_json(a_);
  const json& segs = j["segments"];
  ASSERT_EQ(segs.size(), 2u);
  std::set<uint64_t> addresses;
  for (const json& seg : segs) {
    const std::string addr = seg["address"];
    ASSERT_EQ(addr.rfind("0x", 0), 0u) << addr;
    addresses.insert(std::stoull(addr, nullptr, 16));
    uint64_t next = 0;
    for (const json& b : seg["blocks"]) {
      EXPECT_EQ(b["offset"].get<uint64_t>(), next) << "gap or overlap in segment " << seg["id"];
      next += b["size"].get<uint64_t>();
      EXPECT_EQ(b["category"].is_null(), !b["allocated"].get<bool>());
      EXPECT_EQ(b["label"].is_null(), !b["allocated"].get<bool>());
    }
    EXPECT_EQ(next, seg["size"].get<uint64_t>()) << "segment " << seg["id"];
  }
  EXPECT_EQ(addresses.size(), 2u);
  if (!GetParam()) {
    EXPECT_EQ(*addresses.begin(), uint64_t(1) << 56);  // the meta range starts there
  }

  EXPECT_EQ(segs[0]["id"], 0);
  EXPECT_EQ(segs[0]["pool"], "large");
  EXPECT_EQ(segs[0]["size"], 20 * MiB);
  EXPECT_EQ(segs[0]["blocks"], json::parse(R"([
      {"offset": 0, "size": 3145728, "requested": 3145728, "allocated": true,
       "category": "parameter", "label": "model.embed.weight"},
      {"offset": 3145728, "size": 17825792, "requested": 0, "allocated": false,
       "category": null, "label": null}])"));
  EXPECT_EQ(segs[1]["id"], 1);
  EXPECT_EQ(segs[1]["pool"], "small");
  EXPECT_EQ(segs[1]["size"], 2 * MiB);
  EXPECT_EQ(segs[1]["blocks"], json::parse(R"([
      {"offset": 0, "size": 1024, "requested": 1000, "allocated": true,
       "category": "parameter", "label": "model.head.weight"},
      {"offset": 1024, "size": 512, "requested": 200, "allocated": true,
       "category": "gradient", "label": "model.head.weight.grad"},
      {"offset": 1536, "size": 2095616, "requested": 0, "allocated": false,
       "category": null, "label": null}])"));
}

TEST_P(ExportScript, JsonTraceReplaysToTheFinalState) {
  const json trace = memory_snapshot_json(a_)["trace"];
  EXPECT_EQ(trace["total_events"], 13);
  EXPECT_EQ(trace["dropped"], 0);
  std::vector<std::string> kinds;
  int64_t allocated = 0;
  std::map<std::string, int64_t> by_category;
  for (const json& e : trace["events"]) {
    EXPECT_EQ(e["seq"], kinds.size());
    kinds.push_back(e["kind"].get<std::string>());
    if (e["kind"] == "alloc") allocated += e["size"].get<int64_t>();
    if (e["kind"] == "free") allocated -= e["size"].get<int64_t>();
    EXPECT_EQ(e["allocated_after"], allocated);
    if (e["kind"] == "alloc" || e["kind"] == "free") {
      const auto cat = e["category"].get<std::string>();
      by_category[cat] += (e["kind"] == "alloc" ? 1 : -1) * e["size"].get<int64_t>();
      EXPECT_EQ(e["category_after"], by_category[cat]);
    } else {
      EXPECT_TRUE(e["category_after"].is_null()) << e;
      EXPECT_TRUE(e["offset"].is_null()) << e;
    }
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"mark", "segment_alloc", "alloc", "segment_alloc",
                                             "alloc", "alloc", "segment_alloc", "alloc", "mark",
                                             "free", "alloc", "free", "segment_free"}));
  const json& events = trace["events"];
  EXPECT_EQ(events[0]["label"], "step 0 / forward");
  EXPECT_TRUE(events[0]["addr"].is_null());
  EXPECT_EQ(events[6]["size"], 12 * MiB);  // the segment for tmp, exactly its size
  EXPECT_TRUE(events[6]["category"].is_null());
  EXPECT_EQ(events[7]["label"], "matmul");
  EXPECT_EQ(events[7]["requested"], 12 * MiB);
  EXPECT_EQ(events[12]["reserved_after"], kFinalReserved);
  EXPECT_EQ(allocated, kFinalAllocated);
}

TEST_P(ExportScript, WrittenFilesParseBackUnchanged) {
  const auto snap_path = temp_path("snapshot.json");
  const auto trace_path = temp_path("trace.json");
  write_memory_json(a_, snap_path.string());
  write_chrome_trace(a_, trace_path.string());
  EXPECT_EQ(without_times(read_json(snap_path)), without_times(memory_snapshot_json(a_)));
  EXPECT_EQ(without_times(read_json(trace_path)), without_times(chrome_trace_json(a_)));
  std::filesystem::remove(snap_path);
  std::filesystem::remove(trace_path);
}

// Replays the counter samples of a Chrome trace: track name -> the values in order.
std::map<std::string, std::vector<int64_t>> counter_samples(const json& trace) {
  std::map<std::string, std::vector<int64_t>> tracks;
  double last_ts = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "M") continue;
    EXPECT_TRUE(e["ts"].is_number());
    EXPECT_GE(e["ts"].get<double>(), last_ts) << "events out of time order";
    last_ts = e["ts"].get<double>();
    if (e["ph"] != "C") continue;
    EXPECT_EQ(e["args"].size(), 1u) << e;
    tracks[e["name"].get<std::string>()].push_back(e["args"]["bytes"].get<int64_t>());
  }
  return tracks;
}

TEST_P(ExportScript, ChromeTraceHasOneCounterTrackPerCategory) {
  const json trace = json::parse(chrome_trace_json(a_).dump());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  std::set<int> pids;
  for (const json& e : trace["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids.size(), 1u) << "every track belongs to the one device process";

  const auto tracks = counter_samples(trace);
  using V = std::vector<int64_t>;
  const std::map<std::string, V> expected = {
      {"allocated", V{0, kW1, kW1 + kW2, kW1 + kW2 + kAct, kPeak, kW1 + kW2 + kAct,
                      kW1 + kW2 + kAct + kG, kFinalAllocated}},
      {"reserved", V{0, 20 * MiB, 22 * MiB, kPeakReserved, kFinalReserved}},
      {"parameter", V{kW1, kW1 + kW2}},
      {"activation", V{kAct, 0}},
      {"temporary", V{kTmp, 0}},
      {"gradient", V{kG}},
  };
  EXPECT_EQ(tracks, expected);
  // The last sample of each category track is the ledger's current value.
  const auto cats = a_.by_category();
  for (const auto& [name, values] : tracks) {
    if (name != "allocated" && name != "reserved") {
      EXPECT_EQ(values.back(), cats[size_t(parse_category(name))].current) << name;
    }
  }

  std::vector<std::string> instants;
  std::map<std::string, std::string> names;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == "i" && e["cat"] == "mark") instants.push_back(e["name"].get<std::string>());
    if (e["ph"] == "M") names[e["name"].get<std::string>()] = e["args"]["name"].get<std::string>();
  }
  EXPECT_EQ(instants, (std::vector<std::string>{"step 0 / forward", "step 0 / backward"}));
  EXPECT_NE(names["process_name"].find(GetParam() ? "cpu" : "meta"), std::string::npos);
  EXPECT_FALSE(names["thread_name"].empty());
}

TEST_P(ExportScript, PeakReportNamesWhatHeldThePeak) {
  const json p = peak_report_json(a_);
  EXPECT_EQ(p["allocated"], kPeak);
  EXPECT_EQ(p["reserved"], kPeakReserved);
  EXPECT_EQ(p["cached_free"], kPeakReserved - kPeak);  // tmp's later free does not count
  EXPECT_EQ(p["mark"], "step 0 / forward");
  EXPECT_EQ(p["by_category"].size(), 3u);
  EXPECT_EQ(p["by_category"][0]["category"], "temporary");
  EXPECT_EQ(p["by_category"][0]["bytes"], kTmp);
  EXPECT_EQ(p["by_category"][1]["category"], "activation");
  EXPECT_EQ(p["by_category"][2]["bytes"], kW1 + kW2);
  double total_percent = 0;
  for (const json& c : p["by_category"]) total_percent += c["percent"].get<double>();
  EXPECT_NEAR(total_percent, 100.0, 1e-9);
  ASSERT_EQ(p["top_labels"].size(), 4u);
  EXPECT_EQ(p["top_labels"][0]["label"], "matmul");
  EXPECT_EQ(p["top_labels"][0]["bytes"], kTmp);
  EXPECT_EQ(p["top_labels"][1]["label"], "model.layers.0/silu");
  EXPECT_EQ(p["other_labels"]["count"], 0);
  EXPECT_EQ(without_times(memory_snapshot_json(a_)["peak"]), without_times(p));

  const std::string text = peak_report(a_);
  EXPECT_NE(text.find("peak allocated:           " + format_bytes(kPeak)), std::string::npos)
      << text;
  EXPECT_NE(text.find("reserved at the peak:     34.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("cached but free at peak:  " + format_bytes(kPeakReserved - kPeak)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mark in force:            step 0 / forward"), std::string::npos) << text;
  // 12 MiB of 20 MiB + 1536 B is 59.996 %.
  const std::string top = text.substr(text.find("Top labels"));
  EXPECT_NE(top.find("12.00 MiB   60.0%  matmul"), std::string::npos) << text;
}

// The first cells of the summary row named `name`, `below` lines further down.
std::vector<std::string> summary_row(const std::string& summary, std::string_view name,
                                     int below = 0) {
  std::istringstream in(summary);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(' '));
    s.erase(s.find_last_not_of(' ') + 1);
    return s;
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i].substr(0, lines[i].find('|'))) != name) continue;
    std::vector<std::string> cells;
    std::istringstream row(lines[i + size_t(below)]);
    for (std::string cell; std::getline(row, cell, '|');) cells.push_back(trim(cell));
    cells.erase(cells.begin());  // the name
    return cells;
  }
  ADD_FAILURE() << "no row '" << name << "' in\n" << summary;
  return {};
}

TEST_P(ExportScript, SummaryShowsTheScriptNumbers) {
  const std::string s = memory_summary(a_);
  using V = std::vector<std::string>;
  EXPECT_EQ(summary_row(s, "Metric"), (V{"Current", "Peak", "Total alloc", "Total freed"}));
  EXPECT_EQ(summary_row(s, "Allocated memory"),
            (V{format_bytes(kFinalAllocated), format_bytes(kPeak), format_bytes(kPeak + kG),
               format_bytes(kAct + kTmp)}));
  EXPECT_EQ(summary_row(s, "Allocated memory", 1), (V{"1.50 KiB", "1.50 KiB", "1.50 KiB", "0 B"}));
  EXPECT_EQ(summary_row(s, "Allocated memory", 2),
            (V{"3.00 MiB", format_bytes(kW1 + kAct + kTmp), format_bytes(kW1 + kAct + kTmp),
               format_bytes(kAct + kTmp)}));
  EXPECT_EQ(summary_row(s, "Reserved memory"),
            (V{"22.00 MiB", "34.00 MiB", "34.00 MiB", "12.00 MiB"}));
  EXPECT_EQ(summary_row(s, "Segments"), (V{"2", "3", "3", "1"}));
  EXPECT_EQ(summary_row(s, "Segments", 1), (V{"1", "1", "1", "0"}));
  EXPECT_EQ(summary_row(s, "Allocations"), (V{"3", "4", "5", "2"}));
  EXPECT_EQ(summary_row(s, "Inactive split blocks"), (V{"2", "2", "5", "3"}));
  EXPECT_EQ(summary_row(s, "Out of memory errors"), V{"0"});
  EXPECT_EQ(summary_row(s, "Segment allocs"), V{"3"});
  EXPECT_EQ(summary_row(s, "Segment frees"), V{"1"});
  EXPECT_EQ(summary_row(s, "parameter"), (V{format_bytes(kW1 + kW2), format_bytes(kW1 + kW2)}));
  EXPECT_EQ(summary_row(s, "temporary"), (V{"0 B", "12.00 MiB"}));
  EXPECT_EQ(summary_row(s, "quantized_weight"), (V{"0 B", "0 B"}));
  EXPECT_NE(s.find("capacity unlimited"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(ExportDevices, ExportScript, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "cpu" : "meta"; });

TEST(ExportTrace, WindowOfTheRingStillDrawsExactTracks) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  a.set_trace_capacity(5);
  run_script(a);
  const json trace = memory_snapshot_json(a)["trace"];
  EXPECT_EQ(trace["total_events"], 13);
  EXPECT_EQ(trace["dropped"], 8);
  ASSERT_EQ(trace["events"].size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(trace["events"][i]["seq"], 8 + i);

  // Seen in the window: the backward mark, free tmp, alloc g, free act, the segment free.
  using V = std::vector<int64_t>;
  const std::map<std::string, V> expected = {
      {"allocated", V{kPeak, kW1 + kW2 + kAct, kW1 + kW2 + kAct + kG, kFinalAllocated}},
      {"reserved", V{kPeakReserved, kFinalReserved}},
      {"temporary", V{0}},
      {"gradient", V{kG}},
      {"activation", V{0}},
  };
  EXPECT_EQ(counter_samples(chrome_trace_json(a)), expected);
}

TEST(ExportTrace, OutOfMemoryShowsInEveryExport) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  a.set_capacity(4 * MiB);
  const Allocation small = a.allocate(1 * MiB);  // small pool: one 2 MiB segment
  {
    CategoryScope cat(Category::activation);
    LabelScope l("big");
    // A 20 MiB segment would pass the capacity; freeing the cache frees nothing.
    EXPECT_THROW(a.allocate(3 * MiB), OutOfMemory);
  }
  const json j = memory_snapshot_json(a);
  EXPECT_EQ(j["capacity"], 4 * MiB);
  EXPECT_EQ(j["stats"]["num_ooms"], 1);
  EXPECT_EQ(j["stats"]["num_alloc_retries"], 1);
  const json& oom = j["trace"]["events"].back();
  EXPECT_EQ(oom["kind"], "oom");
  EXPECT_EQ(oom["requested"], 3 * MiB);
  EXPECT_EQ(oom["category"], "activation");
  EXPECT_EQ(oom["label"], "big");
  EXPECT_TRUE(oom["addr"].is_null());
  EXPECT_EQ(oom["allocated_after"], 1 * MiB);

  std::vector<json> instants;
  const json chrome = chrome_trace_json(a);
  for (const json& e : chrome["traceEvents"])
    if (e["ph"] == "i" && e["cat"] == "oom") instants.push_back(e);
  ASSERT_EQ(instants.size(), 1u);
  EXPECT_EQ(instants[0]["name"], "OOM");
  EXPECT_EQ(instants[0]["args"]["requested"], 3 * MiB);
  EXPECT_EQ(instants[0]["args"]["label"], "big");

  const std::string s = memory_summary(a);
  EXPECT_EQ(summary_row(s, "Out of memory errors"), std::vector<std::string>{"1"});
  EXPECT_EQ(summary_row(s, "Alloc retries"), std::vector<std::string>{"1"});
  EXPECT_NE(s.find("capacity 4.00 MiB"), std::string::npos) << s;
  a.free(small);
}

TEST(ExportPeak, ListsTopLabelsAndSumsTheRest) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  std::vector<Allocation> live;
  int64_t total = 0;
  for (int i = 0; i < 25; ++i) {
    LabelScope l(fmt::format("block.{:02}", i));
    live.push_back(a.allocate(size_t(i + 1) * 512));
    total += (i + 1) * 512;
  }
  for (const Allocation& x : live) a.free(x);  // the peak stays at the full set

  const json p = peak_report_json(a);
  EXPECT_EQ(p["allocated"], total);
  EXPECT_EQ(p["cached_free"], 2 * MiB - total);  // all 25 fit one small segment
  EXPECT_TRUE(p["mark"].is_null());
  ASSERT_EQ(p["top_labels"].size(), kPeakReportLabels);
  for (size_t k = 0; k < kPeakReportLabels; ++k) {
    const int i = 24 - int(k);
    EXPECT_EQ(p["top_labels"][k]["label"], fmt::format("block.{:02}", i));
    EXPECT_EQ(p["top_labels"][k]["bytes"], (i + 1) * 512);
  }
  EXPECT_EQ(p["other_labels"]["count"], 5);
  EXPECT_EQ(p["other_labels"]["bytes"], 512 * (1 + 2 + 3 + 4 + 5));
  EXPECT_NE(peak_report(a).find("(5 more labels)"), std::string::npos) << peak_report(a);
}

TEST(ExportPeak, FreshAllocatorReportsNothing) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  const json p = peak_report_json(a);
  EXPECT_EQ(p["allocated"], 0);
  EXPECT_TRUE(p["top_labels"].empty());
  const std::string text = peak_report(a);
  EXPECT_NE(text.find("nothing was allocated"), std::string::npos) << text;
  EXPECT_EQ(text.find("nan"), std::string::npos) << text;
  EXPECT_TRUE(chrome_trace_json(a)["traceEvents"].size() == 4u)
      << "only the three name records and the peak";
}

TEST(ExportPeak, UnlabelledBytesAreNamed) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  const Allocation x = a.allocate(100);
  const json p = peak_report_json(a);
  ASSERT_EQ(p["top_labels"].size(), 1u);
  EXPECT_EQ(p["top_labels"][0]["label"], "");
  EXPECT_EQ(p["top_labels"][0]["bytes"], 512);
  EXPECT_EQ(p["by_category"][0]["category"], "other");
  const std::string text = peak_report(a);
  EXPECT_NE(text.find("512 B  100.0%  (no label)"), std::string::npos) << text;
  a.free(x);
}

TEST(ExportFiles, UnwritablePathIsAMemoryError) {
  CachingAllocator a(Device::meta(), make_virtual_source());
  const std::string path = "/nonexistent-fitgrad-dir/snapshot.json";
  try {
    write_memory_json(a, path);
    FAIL() << "expected fitgrad::Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("[memory] ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_chrome_trace(a, path), Error);
}

}  // namespace
}  // namespace fitgrad
