// One exact plan (apps/memplan/): `fitgrad train`'s run on meta for a target, and what it
// found. The run is the real one (train/trainer.h) on meta tensors (Note [Dry run on
// meta] in train/train_run.h), given the target's workspace profile and capacity as
// parameters (TrainArgs::planned_profile, planned_capacity: meta's profile and the
// allocator's limit for the run's lifetime), so the plan's events, peak and out-of-memory
// are those of a real run on that target.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "apps/memplan/targets.h"
#include "apps/output_policy.h"
#include "tensor/memory/category.h"
#include "train/train_args.h"

namespace fitgrad::apps {

struct Plan {
  bool fits = false;
  int64_t peak_allocated = 0;  // above the run's start (nothing is held before it)
  int64_t peak_reserved = 0;
  int64_t reserved_at_peak = 0;  // reserved when allocated peaked
  std::string peak_mark;         // the step and phase in force at the peak
  std::array<int64_t, kNumCategories> peak_by_category{};
  std::vector<std::pair<std::string, int64_t>> peak_by_module;  // largest first
  int64_t total_allocated = 0;  // bytes allocated over the whole run
  // Host memory the run planned (meta:1: --offload_optimizer's masters and state, Note
  // [Optimizer offload]); 0 when it offloads nothing.
  int64_t host_peak_allocated = 0;
  std::string oom_report;     // what the real run would print (empty when it fits)
  std::string run_output;     // the run's summary lines
  double seconds = 0;         // the plan's own wall time
  int64_t planned_steps = 0;  // the steps simulated (Note [Steps a plan extrapolates])
  int64_t run_steps = 0;      // the steps of the run it stands for (--max_steps)
};

// Note [Steps a plan extrapolates]
// After its second step a run's allocator is in a steady state: every later step makes the
// same requests in the same order and finds the same cached blocks, so its events and peak
// are those of the step before. Only the steps that can differ are planned: the first
// (optimizer state, the caches' first segments), the second (the first that reuses them),
// the steady state, and the steps at and after each periodic event — logging, evaluation,
// emptying the cache (a plan saves no checkpoint). A plan of more than kPlannedSteps (6)
// steps therefore plans 6, with each event whose interval is shorter than the run moved to
// min(interval, 3): an event due every step or every other step stays so, any other fires
// at step 3 and step 6, after a steady state and followed by steps, as it would at step
// 500 of the real run; the last step logs and evaluates as the run's last does. An event
// whose interval is the run's length or more happens at most at the end, as in the run. The
// plan's peak, out-of-memory verdict and memory record (whose trace covers the 6 steps)
// are then those of the whole run, and its time does not grow with --max_steps; memplan
// says which steps it planned.
inline constexpr int64_t kPlannedSteps = 6;

// The run that stands for `a` under Note [Steps a plan extrapolates] (`a` itself when it
// has kPlannedSteps steps or fewer).
train::TrainArgs steps_to_plan(const train::TrainArgs& a);

// The files of a plan's memory record (memory.json, memory_trace.json, memory.html,
// peak_report.txt, memory_summary.txt), declared as outputs of `outputs` in `dir`, which is
// created when missing (Note [Output policy]: never a training run's directory, an existing
// record replaced only with --overwrite).
struct PlanRecord {
  PlanRecord(OutputPolicy& outputs, const std::string& flag, const std::string& dir);
  OutputPolicy& outputs;
  std::string dir;
  std::vector<std::pair<std::string, size_t>> files;  // a file's name, its output's index
};

// Plans `args` on `target`: its device becomes meta, its memory budget the target's
// capacity, and it reads no data, saves nothing and logs plainly.
// Throws fitgrad::Error for bad flags, as `fitgrad train` does; running out of memory is a
// plan that does not fit.
//
// Note [Where a plan writes]
// The planned run's output directory is always a private scratch directory, removed when
// the plan ends, so a plan never takes a run's lock or writes beside a run's files. With a
// `record`, the run writes its memory record there and the files are staged into the
// record's outputs; the caller commits them (all or none, Note [All outputs or none]).
// `every_step` plans each of --max_steps steps instead (tests check the extrapolation
// against it).
Plan plan_training(train::TrainArgs args, const PlanTarget& target, PlanRecord* record,
                   bool every_step = false);
// The same with the record written into `record_dir` (replacing a plan's record there);
// "" keeps none.
Plan plan_training(train::TrainArgs args, const PlanTarget& target, const std::string& record_dir);

// The module a ledger label belongs to: within a block, the block's part
// ("model.layers.3.self_attn.q_proj.weight" and "model.layers.3.self_attn/flash" ->
// "model.layers.3.self_attn"); elsewhere the tensor's owner ("lm_head.weight" -> "lm_head",
// "data.train" -> "data").
std::string module_of(const std::string& label);

}  // namespace fitgrad::apps
