// Summarising a trace while its events stream by (Note [Traces past the kept bound are
// summarised]): the thinned timeline, its marks and the allocator's blocks at the peak, in
// memory bounded by the number of samples and the live blocks, never by the events.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/memviz/memviz_trace.h"

namespace fitgrad::io {

class TraceSummarizer {
 public:
  // At most `max_points` samples, and at least half as many once the events outnumber them.
  explicit TraceSummarizer(size_t max_points);

  // The peak's seq, as soon as the reader meets it: the blocks live after that event are
  // kept, now when it was the last event added, or when it comes.
  void expect_peak(uint64_t seq);
  // The next event of the window; its seq follows the previous one's (the reader checks).
  void add(const VizEvent& e);
  size_t events() const { return events_; }
  // The summary of the events added; `peak_seq` is the peak report's.
  TraceSummary finish(uint64_t peak_seq);

  // The samples held now: never more than max_points.
  size_t samples() const { return buckets_.size(); }

 private:
  struct Bucket {
    TimelineSample sample;
    std::optional<VizMark> mark, oom;  // the first of each in the bucket
  };
  struct Pending {  // the last event, drawn once the next one is known
    size_t index = 0;
    EventKind kind = EventKind::alloc;
    int64_t allocated = 0, reserved = 0;
    std::string label;
  };

  bool is_peak(size_t index) const;
  // Whether sample `b` should stand for a bucket instead of `a`.
  bool better(const TimelineSample& b, const TimelineSample& a) const;
  void replay(const VizEvent& e);
  void apply(const VizEvent& e);
  void draw(const Pending& p);
  void halve();
  void keep_peak_state();

  size_t half_;       // buckets after a halving; twice as many at most
  size_t width_ = 1;  // events a bucket spans
  size_t events_ = 0;
  uint64_t first_seq_ = 0;
  std::optional<uint64_t> peak_seq_;
  std::vector<Bucket> buckets_;
  std::optional<Pending> pending_;
  std::array<int64_t, kNumCategories> value_{};
  std::array<bool, kNumCategories> known_{};
  std::map<uint64_t, VizSegment> segments_;
  std::map<std::pair<uint64_t, uint64_t>, VizBlock> blocks_;  // (segment, offset)
  std::optional<VizPeakState> peak_state_;
};

}  // namespace fitgrad::io
