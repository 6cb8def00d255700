// TraceSummarizer (trace_summary.h).
#include "io/memviz/trace_summary.h"

#include <algorithm>

#include "io/memviz/timeline.h"

namespace fitgrad::io {

// Note [Traces past the kept bound are summarised]
// The page replays every event to show the allocator at any of them, so it needs them all;
// a trace of 2,000,001 events held as VizEvents took gigabytes, and its page would be a
// hundred megabytes. A window of at most kKeptEvents events (the allocator's default ring)
// is kept and drawn exactly as before (Note [Thinning keeps the highs and the peak]). Past
// that, the reader drops the events it kept and summarises them as they stream by:
//  * the timeline is cut into buckets of `width` consecutive events (bucket k holds the
//    events k * width .. (k + 1) * width - 1), width starting at 1; when the buckets would
//    outnumber kTimelinePoints, neighbours merge pairwise and width doubles, so between
//    half of kTimelinePoints and kTimelinePoints samples remain. A bucket is drawn at its
//    event with the most allocated bytes (the earliest of equals), or at the peak's event
//    once the reader knows it, so the peak stays exact as in the kept case;
//  * a bucket keeps its first mark and its first OOM, so at most two lines a sample;
//  * the segments and live blocks are replayed as the events pass, and copied when the
//    peak's event passes: the page shows the allocator there, not at any event. fitgrad
//    writes the peak instant right after its event (and a memory.json's peak before its
//    events), so the copy is made; a file whose peak record comes later says so instead.
// What is held is the buckets, the live blocks and one event's document: bounded whatever
// the number of events.

TraceSummarizer::TraceSummarizer(size_t max_points) : half_(std::max<size_t>(max_points / 2, 1)) {
  buckets_.reserve(2 * half_);
}

bool TraceSummarizer::is_peak(size_t index) const {
  return peak_seq_ && first_seq_ + index == *peak_seq_;
}

bool TraceSummarizer::better(const TimelineSample& b, const TimelineSample& a) const {
  if (is_peak(a.event)) return false;
  return is_peak(b.event) || b.allocated > a.allocated;
}

void TraceSummarizer::expect_peak(uint64_t seq) {
  peak_seq_ = seq;
  if (events_ > 0 && first_seq_ + events_ - 1 == seq) keep_peak_state();
}

// The allocator's segments and live blocks after `e`.
void TraceSummarizer::replay(const VizEvent& e) {
  switch (e.kind) {
    case EventKind::segment_alloc: segments_[e.segment] = {e.segment, e.size, e.addr, true}; break;
    case EventKind::segment_free:
      segments_.erase(e.segment);
      blocks_.erase(blocks_.lower_bound({e.segment, 0}), blocks_.lower_bound({e.segment + 1, 0}));
      break;
    case EventKind::alloc:
    case EventKind::retag_to:
      blocks_[{e.segment, e.offset}] = {e.segment, e.offset, e.size, e.seq, e.category, e.label};
      break;
    case EventKind::free: blocks_.erase({e.segment, e.offset}); break;
    // An expandable segment's mapping grows or shrinks at its end (Note [Expandable
    // segments] in tensor/memory/caching_allocator.h).
    case EventKind::segment_map:
      if (auto it = segments_.find(e.segment); it != segments_.end()) it->second.size += e.size;
      break;
    case EventKind::segment_unmap:
      if (auto it = segments_.find(e.segment); it != segments_.end()) it->second.size -= e.size;
      break;
    default: break;
  }
}

void TraceSummarizer::keep_peak_state() {
  VizPeakState s;
  for (const auto& [id, seg] : segments_) s.segments.push_back(seg);
  for (const auto& [at, block] : blocks_) {
    s.blocks.push_back(block);
    if (segments_.count(block.segment)) continue;
    // A segment made before the window: known only by its blocks.
    const auto it =
        std::find_if(s.segments.begin(), s.segments.end(),
                     [segment = block.segment](const VizSegment& g) { return g.id == segment; });
    VizSegment& g = it != s.segments.end() ? *it : s.segments.emplace_back();
    g.id = block.segment;
    g.size = std::max(g.size, block.offset + block.size);
  }
  std::sort(s.segments.begin(), s.segments.end(),
            [](const VizSegment& a, const VizSegment& b) { return a.id < b.id; });
  peak_state_ = std::move(s);
}

// Note [Bytes from before the window]: a category's bytes are known from its first event.
void TraceSummarizer::apply(const VizEvent& e) {
  if (!is_block_event(e.kind)) return;
  value_[size_t(e.category)] = e.category_after;
  known_[size_t(e.category)] = true;
}

void TraceSummarizer::halve() {
  for (size_t k = 0; k < buckets_.size() / 2; ++k) {
    Bucket a = std::move(buckets_[2 * k]);
    Bucket& b = buckets_[2 * k + 1];
    if (better(b.sample, a.sample)) {
      const size_t first = a.sample.first;
      a.sample = b.sample;
      a.sample.first = first;
    }
    if (!a.mark) a.mark = std::move(b.mark);
    if (!a.oom) a.oom = std::move(b.oom);
    buckets_[k] = std::move(a);
  }
  buckets_.resize(buckets_.size() / 2);
  width_ *= 2;
}

void TraceSummarizer::draw(const Pending& p) {
  if (p.index / width_ == buckets_.size() && buckets_.size() == 2 * half_) halve();
  TimelineSample s;
  s.first = s.event = p.index;
  s.allocated = p.allocated;
  s.reserved = p.reserved;
  int64_t attributed = 0;
  for (size_t c = 0; c < size_t(kNumCategories); ++c) {
    s.by_category[c] = known_[c] ? value_[c] : 0;
    attributed += s.by_category[c];
  }
  s.unattributed = std::max<int64_t>(0, p.allocated - attributed);
  if (p.index / width_ == buckets_.size()) {
    s.first = buckets_.size() * width_;
    buckets_.push_back({s, std::nullopt, std::nullopt});
  } else if (better(s, buckets_.back().sample)) {
    s.first = buckets_.back().sample.first;
    buckets_.back().sample = s;
  }
  Bucket& b = buckets_.back();
  if (p.kind == EventKind::mark && !b.mark) b.mark = VizMark{p.index, false, p.label};
  if (p.kind == EventKind::oom && !b.oom) b.oom = VizMark{p.index, true, p.label};
}

void TraceSummarizer::add(const VizEvent& e) {
  if (events_ == 0) {
    first_seq_ = e.seq;
    known_.fill(e.seq == 0);  // no events dropped: every category starts at zero
  }
  replay(e);
  if (pending_) {
    // A retag moves a block in two events; a sample between them shows the pair done.
    if (pending_->kind == EventKind::retag_from && e.kind == EventKind::retag_to) apply(e);
    draw(*pending_);
  }
  apply(e);
  const bool labelled = e.kind == EventKind::mark || e.kind == EventKind::oom;
  pending_ = Pending{events_, e.kind, e.allocated_after, e.reserved_after,
                     labelled ? e.label : std::string()};
  ++events_;
  if (is_peak(events_ - 1)) keep_peak_state();
}

TraceSummary TraceSummarizer::finish(uint64_t peak_seq) {
  if (pending_) draw(*pending_);
  pending_.reset();
  std::optional<size_t> peak_event, peak_sample;
  if (events_ > 0 && peak_seq >= first_seq_ && peak_seq - first_seq_ < events_) {
    peak_event = size_t(peak_seq - first_seq_);
    peak_sample = *peak_event / width_;
  }
  std::vector<TimelineSample> samples;
  std::vector<VizMark> marks;
  for (Bucket& b : buckets_) {
    samples.push_back(b.sample);
    for (auto* m : {&b.mark, &b.oom})
      if (*m) marks.push_back(std::move(**m));
  }
  std::stable_sort(marks.begin(), marks.end(),
                   [](const VizMark& a, const VizMark& b) { return a.event < b.event; });
  TraceSummary out;
  out.timeline = timeline_from_samples(events_, samples, std::move(marks), peak_event, peak_sample);
  if (peak_seq_ && *peak_seq_ == peak_seq) out.peak_state = std::move(peak_state_);
  return out;
}

}  // namespace fitgrad::io
