// `fitgrad memplan` (memplan_command.h): options, the report of a plan, the searches.
#include "apps/memplan/memplan_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include "apps/guard.h"
#include "apps/memplan/search.h"
#include "apps/output_policy.h"
#include "apps/train/train_options.h"
#include "nn/decoder.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"
#include "train/model_source.h"
#include "train/trainer.h"

namespace fitgrad::apps {

using train::kExitOutOfMemory;
using train::load_model;
using train::TrainArgs;
using train::validate;
namespace {

std::string percent(int64_t part, int64_t whole) {
  return whole > 0 ? fmt::format("{:5.1f}%", 100.0 * double(part) / double(whole)) : "    -";
}

// The model's config, from the model built on meta (nothing is allocated for real).
nn::ModelConfig model_config(const TrainArgs& a) {
  nn::BuildOptions build;
  build.device = Device::meta();
  return load_model(a.model, "", build).model->config();
}

void print_plan(const Plan& p, const PlanTarget& target, std::ostream& out) {
  if (p.planned_steps < p.run_steps)
    out << fmt::format(
        "  steps planned:    {} of {}: the first, the second, the steady state and each "
        "periodic event (logging, evaluation, emptying the cache); the other steps repeat "
        "them (Note [Steps a plan extrapolates])\n",
        p.planned_steps, p.run_steps);
  out << fmt::format("  peak allocated:   {} ({} of the capacity), at '{}'\n",
                     format_bytes(p.peak_allocated), percent(p.peak_allocated, target.capacity),
                     p.peak_mark);
  out << fmt::format("  peak reserved:    {}\n", format_bytes(p.peak_reserved));
  if (p.host_peak_allocated > 0)
    out << fmt::format("  host (offloaded): {} peak allocated, beside the device's\n",
                       format_bytes(p.host_peak_allocated));
  out << fmt::format(
      "  fragmentation:    {} reserved but unallocated at the peak ({} of reserved)\n",
      format_bytes(p.reserved_at_peak - p.peak_allocated),
      percent(p.reserved_at_peak - p.peak_allocated, p.reserved_at_peak));
  out << "  at the peak, by category:\n";
  for (int c = 0; c < kNumCategories; ++c)
    if (p.peak_by_category[c] > 0)
      out << fmt::format("    {:>12} {}  {}\n", format_bytes(p.peak_by_category[c]),
                         percent(p.peak_by_category[c], p.peak_allocated),
                         category_name(Category(c)));
  out << "  at the peak, by module:\n";
  int64_t rest = 0;
  for (size_t i = 0; i < p.peak_by_module.size(); ++i) {
    const auto& [module, bytes] = p.peak_by_module[i];
    if (i < 12)
      out << fmt::format("    {:>12} {}  {}\n", format_bytes(bytes),
                         percent(bytes, p.peak_allocated), module.empty() ? "(no label)" : module);
    else
      rest += bytes;
  }
  if (rest > 0)
    out << fmt::format("    {:>12} {}  ({} more modules)\n", format_bytes(rest),
                       percent(rest, p.peak_allocated), p.peak_by_module.size() - 12);
}

void print_verdict(const Plan& p, const PlanTarget& target, std::ostream& out) {
  if (p.fits)
    out << fmt::format("verdict: fits, with {} of the {} capacity to spare (reserved peak)\n",
                       format_bytes(target.capacity - p.peak_reserved),
                       format_bytes(target.capacity));
  else
    out << "verdict: does not fit; the real run would print:\n" << p.oom_report;
}

std::string describe(const TrainArgs& a) {
  return fmt::format("{}, seq {}, {}", a.model, a.seq_len, setting_flags(a));
}

int run_single(const MemplanArgs& m, const PlanTarget& target, std::ostream& out) {
  OutputPolicy outputs("memplan", m.overwrite);
  std::optional<PlanRecord> record;
  if (!m.train.output_dir.empty()) {
    outputs.input("--model", m.train.model);
    outputs.input("--init", m.train.init);
    record.emplace(outputs, "--output_dir", m.train.output_dir);
    std::string names;
    for (const auto& [name, output] : record->files) names += (names.empty() ? "" : ", ") + name;
    out << fmt::format("memory record: {} ({}), written when the plan ends\n", m.train.output_dir,
                       names)
        << std::flush;
  }
  out << fmt::format("planning {} of {} steps of {} on meta...\n",
                     std::min(m.train.max_steps, kPlannedSteps), m.train.max_steps, m.train.model);
  const Plan p = plan_training(m.train, target, record ? &*record : nullptr);
  out << fmt::format("plan: {}\n", describe(m.train));
  if (m.verbose) out << p.run_output;
  print_plan(p, target, out);
  print_verdict(p, target, out);
  if (record) {
    outputs.commit(out);
    out << fmt::format("wrote the memory record into {}\n", m.train.output_dir);
  }
  out << fmt::format("planned in {:.1f} s\n", p.seconds);
  return p.fits ? 0 : kExitOutOfMemory;
}

int run_fit(const MemplanArgs& m, const PlanTarget& target, std::ostream& out, std::ostream& err) {
  const nn::ModelConfig cfg = model_config(m.train);
  const FitResult r = fit_search(m.train, cfg, target, m.allow_qlora, err);
  const double reference = r.tried.empty() ? 1.0 : r.tried.front().cost.seconds;
  const int64_t per_rank =
      m.train.per_device_train_batch_size * m.train.gradient_accumulation_steps;
  out << fmt::format(
      "fit: {} at seq {}, effective batch {}; candidates in order of predicted time, relative to "
      "the fastest\n",
      m.train.model, m.train.seq_len,
      m.train.plan_world_size > 1 ? fmt::format("{} ({} ranks x {})", global_batch(m.train),
                                                m.train.plan_world_size, per_rank)
                                  : std::to_string(per_rank));
  out << fmt::format("  {:>3}  {:<62} {:>9} {:>11} {:>11}  {}\n", "#", "setting", "rel. time",
                     "peak alloc", "peak resv", "verdict");
  for (size_t i = 0; i < r.tried.size(); ++i) {
    const Candidate& c = r.tried[i];
    std::string alloc = "-", resv = "-", verdict;
    if (c.plan) {
      alloc = format_bytes(c.plan->peak_allocated);
      resv = format_bytes(c.plan->peak_reserved);
      verdict = c.plan->fits ? "fits" : "out of memory";
    } else {
      verdict = fmt::format("out of memory (needs more than #{})", c.implied_by + 1);
    }
    out << fmt::format("  {:>3}  {:<62} {:>9.2f} {:>11} {:>11}  {}\n", i + 1, c.setting,
                       c.cost.seconds / reference, alloc, resv, verdict);
  }
  if (r.winner < 0) {
    out << "verdict: no candidate fits\n";
    return kExitOutOfMemory;
  }
  const Candidate& w = r.tried[size_t(r.winner)];
  out << fmt::format("{} slower candidates were not planned\n", r.untried);
  out << fmt::format("the fastest setting that fits: {}\n", w.setting);
  print_plan(*w.plan, target, out);
  out << fmt::format("run it with:\n  {}\n", run_line(w.args));
  return 0;
}

int run_largest(const MemplanArgs& m, Knob knob, const PlanTarget& target, std::ostream& out,
                std::ostream& err) {
  int64_t limit = m.batch_limit;
  if (knob == Knob::seq_len) {
    const int64_t context = model_config(m.train).max_position_embeddings;
    limit = m.seq_limit > 0 ? std::min(m.seq_limit, context) : context;
  }
  const LargestResult r = largest_fitting(m.train, target, knob, limit, err);
  const char* flag = knob_flag(knob);
  out << fmt::format("largest {}: {}, {}\n", flag, m.train.model, setting_flags(m.train));
  for (const auto& [value, fits] : r.probes)
    out << fmt::format("  {} {:>7}: {}\n", flag, value, fits ? "fits" : "out of memory");
  if (r.largest == 0) {
    out << fmt::format("verdict: not even {} 1 fits\n", flag);
    return kExitOutOfMemory;
  }
  out << fmt::format("the largest {} that fits is {}{}\n", flag, r.largest,
                     r.largest == limit ? " (the limit of the search)" : "");
  print_plan(*r.plan, target, out);
  return 0;
}

}  // namespace

MemplanArgs::MemplanArgs() {
  train.device = "cuda";
  train.max_steps = 2;
  train.eval_strategy = "no";
}

int run_memplan(const MemplanArgs& m, std::ostream& out, std::ostream& err) {
  if (!m.train.memory_budget.empty())
    throw Error("[memplan] --memory_budget is train's; give memplan --device_memory");
  if (int(m.fit) + int(m.max_seq_len) + int(m.max_batch_size) > 1)
    throw Error(
        "[memplan] --fit, --max_seq_len and --max_batch_size conflict: ask one question at "
        "a time");
  if (m.allow_qlora && !m.fit) throw Error("[memplan] --allow_qlora needs --fit");
  if (m.seq_limit < 0)
    throw Error(fmt::format(
        "[memplan] --seq_limit must be positive (or 0: the model's context), got {}", m.seq_limit));
  // The limits of the searches are those of the flags they search (train_args.cpp).
  if (m.seq_limit > (int64_t(1) << 24))
    throw Error(fmt::format("[memplan] --seq_limit must be at most 16777216, got {}", m.seq_limit));
  if (m.batch_limit < 1 || m.batch_limit > (int64_t(1) << 20))
    throw Error(
        fmt::format("[memplan] --batch_limit must be in [1, 1048576], got {}", m.batch_limit));
  if (m.train.zero_stage > 0 && m.train.plan_world_size < 2)
    throw Error(fmt::format(
        "[memplan] --zero_stage {} shards the optimizer state across the ranks of a job: give "
        "--world_size, the job's number of ranks (2 or more), to plan one of them",
        m.train.zero_stage));
  if (m.train.plan_world_size % m.train.plan_nnodes != 0)
    throw Error(fmt::format(
        "[memplan] --nnodes {} does not divide --world_size {}: give each host the same number "
        "of ranks",
        m.train.plan_nnodes, m.train.plan_world_size));
  if (m.train.plan_rank >= m.train.plan_world_size)
    throw Error(fmt::format("[memplan] --rank {} of --world_size {}: the rank must be below it",
                            m.train.plan_rank, m.train.plan_world_size));
  if (!m.train.output_dir.empty() && (m.fit || m.max_seq_len || m.max_batch_size))
    throw Error(
        "[memplan] --output_dir keeps the memory record of one plan; --fit, --max_seq_len and "
        "--max_batch_size keep none: drop --output_dir, or plan the setting they find");
  const PlanTarget target = plan_target(m.train.device, m.device_memory, m.context_reserve);
  TrainArgs planned = m.train;  // train's own checks, before a model is built
  planned.planned_device = planned.device;
  planned.device = "meta";
  planned.data.clear();  // a plan reads no data (plan_training), so --max_steps is its count
  validate(planned);     // Note [One validation]
  out << fmt::format("target: {}\n", target.name);
  if (m.train.plan_world_size > 1)  // Note [Planning one rank] in dist/meta_group.h
    out << fmt::format(
        "planned: rank {} of {}{} ({})\n", m.train.plan_rank, m.train.plan_world_size,
        m.train.plan_nnodes > 1 ? fmt::format(" on {} hosts of {}", m.train.plan_nnodes,
                                              m.train.plan_world_size / m.train.plan_nnodes)
                                : std::string(),
        m.train.zero_stage > 0 ? fmt::format("ZeRO stage {}", m.train.zero_stage)
                               : std::string("DDP"));
  if (m.fit) return run_fit(m, target, out, err);
  if (m.max_seq_len) return run_largest(m, Knob::seq_len, target, out, err);
  if (m.max_batch_size) return run_largest(m, Knob::batch_size, target, out, err);
  return run_single(m, target, out);
}

void add_memplan_command(CLI::App& app) {
  auto m = std::make_shared<MemplanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "memplan", "The exact memory plan of a training setup on a target card, on meta");
  add_train_options(*cmd, m->train);
  // A plan needs no output directory; given one, it writes the plan's memory record there.
  cmd->get_option("--output_dir")->required(false);
  cmd->add_option("--device_memory", m->device_memory,
                  "The target: a card (v100-16g, rtx3090, rtx4090, a100-40g, a100-80g, h100, h200) "
                  "or a size such as 24GiB (default: h100 with --device cuda, this machine's "
                  "memory with --device cpu)");
  cmd->add_option("--context_reserve", m->context_reserve,
                  "The card's memory the CUDA context holds, outside the allocator (512MiB)");
  cmd->add_flag("--fit", m->fit,
                "Search for the fastest setting that fits, holding the effective batch");
  cmd->add_flag(
      "--allow_qlora", m->allow_qlora,
      "With --fit: also try an NF4 base with LoRA adapters (this changes what is trained)");
  cmd->add_flag("--max_seq_len", m->max_seq_len,
                "Find the longest --seq_len that fits (bisection)");
  cmd->add_option("--seq_limit", m->seq_limit,
                  "With --max_seq_len: search up to this length (default: the model's context)");
  cmd->add_flag("--max_batch_size", m->max_batch_size,
                "Find the largest --per_device_train_batch_size that fits (bisection)");
  cmd->add_option("--batch_limit", m->batch_limit, "With --max_batch_size: search up to this batch")
      ->capture_default_str();
  cmd->add_option("--world_size", m->train.plan_world_size,
                  "Plan one rank of a data-parallel job of this many ranks: DDP's buckets, and "
                  "with --zero_stage the rank's share of the state and gradients")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20))
      ->capture_default_str();
  cmd->add_option("--nnodes", m->train.plan_nnodes,
                  "With --world_size: the hosts its ranks run on, as many on each (the plan of "
                  "a rank is the same; the suggested line runs a launcher on each host)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 16))
      ->capture_default_str();
  cmd->add_option("--rank", m->train.plan_rank, "With --world_size: the rank planned")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 20))
      ->capture_default_str();
  cmd->add_flag("--verbose", m->verbose, "Also print the planned run's own summary lines");
  cmd->add_flag("--overwrite", m->overwrite,
                "Replace the memory record of an earlier plan in --output_dir");
  cmd->footer(
      "--device cuda (the default) plans for a card, --device cpu for this machine's CPU. "
      "Every `fitgrad train` flag applies; --max_steps defaults to 2 and --eval_strategy to "
      "no. --output_dir, when given, receives the plan's memory record (memory.json, "
      "memory_trace.json, memory.html, peak_report.txt, memory_summary.txt) when the plan "
      "ends; it is never a training run's directory (one holding checkpoints, metrics.jsonl, "
      "a lock file, ...), and an earlier plan's record there is replaced only with "
      "--overwrite (docs/run_promises.md). Exit codes: 0 it fits, 3 it does not, 1 bad "
      "input.");
  cmd->callback([m] {
    const int code = run_guarded(
        "memplan", std::cout, std::cerr, [&] { return run_memplan(*m, std::cout, std::cerr); },
        "it wrote no memory record");
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace fitgrad::apps
