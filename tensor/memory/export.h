// Exports of one allocator's memory state (DESIGN.md, Allocator and memory ledger):
//
//   - memory_summary: a text table in the spirit of torch.cuda.memory_summary();
//   - memory_snapshot_json / write_memory_json: segments, blocks, stats and the event
//     trace as JSON, with the schema documented field by field in docs/memory.md;
//   - chrome_trace_json / write_chrome_trace: Chrome trace-event JSON that opens in
//     Perfetto or chrome://tracing, one counter track per category;
//   - peak_report / peak_report_json: the one-glance answer to "at the peak, what held
//     the memory, by category and by module, and how much was cached but free?".
//
// Every export reads the allocator only through its public copies (snapshot, stats,
// events, peak, by_category, by_label), so none holds the allocator's lock while it
// formats. See Note [Exports read separate copies].
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "tensor/memory/caching_allocator.h"

namespace fitgrad {

// Note [Exports read separate copies]
// Each section of an export (stats, segments, trace, peak) comes from its own locked
// copy. With no other thread allocating, the sections agree exactly; while loader
// workers allocate they may each be a few events apart, which is harmless for reading
// and keeps allocation from waiting on a JSON dump. Inside the trace section the counts
// (total_events, dropped) are derived from the retained events themselves, so that
// section is always self-consistent.

// The version written as "schema" in memory_snapshot_json; bumped on any change that
// could break a reader (docs/memory.md lists the fields of each version).
inline constexpr int kMemorySnapshotSchema = 1;
// How many labels the peak report names; the rest are summed into one line.
inline constexpr size_t kPeakReportLabels = 20;

std::string memory_summary(const CachingAllocator& a);

nlohmann::json memory_snapshot_json(const CachingAllocator& a);
// Throws fitgrad::Error naming the path when it cannot be written.
void write_memory_json(const CachingAllocator& a, const std::string& path);

nlohmann::json chrome_trace_json(const CachingAllocator& a);
// Throws fitgrad::Error naming the path when it cannot be written.
void write_chrome_trace(const CachingAllocator& a, const std::string& path);

// The text report is rendered from peak_report_json, so the two always agree.
std::string peak_report(const CachingAllocator& a);
nlohmann::json peak_report_json(const CachingAllocator& a);

namespace detail {
// Writes `doc` to `path` as compact JSON; `what` names the document in the error.
void write_json_file(const nlohmann::json& doc, const std::string& path, std::string_view what);
// One event of the trace as memory.json writes it (docs/memory.md, trace); the Chrome trace
// carries the same fields, less the null ones, in the args of its instants.
nlohmann::json event_json(const MemoryEvent& e);
}  // namespace detail

}  // namespace fitgrad
