// Reading a trace for the memory page (io/memviz/): files streamed event by event read as
// their documents, a trace past the kept bound is summarised within its bound and agrees with
// the whole trace, and malformed inputs name their file and the problem.
#include "io/memviz/memviz_trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <streambuf>
#include <tuple>

#include "io/memviz/page.h"
#include "io/memviz/streamed_json.h"
#include "io/memviz/timeline.h"
#include "io/memviz/trace_summary.h"
#include "tensor/error.h"
#include "tensor/memory/export.h"
#include "tests/io/memviz_fixture.h"

namespace fitgrad::io {
namespace {

using namespace memviz_test;

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
  std::vector<Allocation> noise = small_temporaries(a_);
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

}  // namespace
}  // namespace fitgrad::io
