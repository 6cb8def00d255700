// The memory record of a run (memory.json, memory_trace.json, memory.html, peak_report.txt,
// memory_summary.txt; loss_curve.svg beside them in a real run) and the report after an
// out-of-memory.
#include <fmt/format.h>

#include "io/memviz/page.h"
#include "tensor/memory/export.h"
#include "train/checkpoint_dir.h"
#include "train/train_run.h"
#include "train/trainer.h"

namespace fitgrad::train {

void write_memory_record(const TrainRun& r) {
  if (!r.a.write_memory_record) return;
  // Note [Data-parallel runs]: every rank its own ledger; rank 0 also the usual record.
  if (r.group)
    write_memory_json(r.alloc,
                      (r.dir / fmt::format("memory.rank{}.json", r.group->rank())).string());
  if (!r.writes_outputs()) return;
  write_memory_json(r.alloc, (r.dir / "memory.json").string());
  // The page is drawn from the very trace written beside it (`fitgrad memviz` on that file
  // makes the same page).
  const nlohmann::json trace = chrome_trace_json(r.alloc);
  detail::write_json_file(trace, (r.dir / "memory_trace.json").string(), "Chrome trace");
  io::write_memviz_page(io::memviz_trace_from_json(trace, "memory_trace.json"),
                        (r.dir / "memory.html").string());
  write_file_atomic((r.dir / "peak_report.txt").string(), peak_report(r.alloc));
  write_file_atomic((r.dir / "memory_summary.txt").string(), memory_summary(r.alloc));
  if (r.metrics)
    write_file_atomic((r.dir / "loss_curve.svg").string(),
                      loss_curve_svg(r.metrics->history(), r.loss_curve_title()));
}

int report_out_of_memory(TrainRun& r, const OutOfMemory& e, const std::string& when) {
  r.progress.finish();
  r.err << fmt::format("error: out of memory {}\n{}\n", when, e.what());
  write_memory_record(r);
  if (!r.dry_run) {
    auto kept = list_checkpoints(r.a.output_dir);
    r.err << (kept.empty()
                  ? std::string("no checkpoint had been saved\n")
                  : fmt::format("the newest checkpoint, {}, is intact\n", kept.back().second));
  }
  if (r.a.write_memory_record)
    r.err << fmt::format("the memory record of the run is in {}\n", r.dir.string());
  return kExitOutOfMemory;
}

}  // namespace fitgrad::train
