// The loop of `fitgrad train` (trainer.h): steps, logging, evaluation, checkpoints,
// interrupts and out-of-memory, over the phases of train_run.h.
#include "train/trainer.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string_view>

#include "dist/device_errors.h"
#include "io/json_file.h"
#include "tensor/device_copy.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"
#include "tensor/memory/bytes.h"
#include "train/activation_offload.h"
#include "train/train_dist.h"
#include "train/train_run.h"

namespace fitgrad::train {
using nlohmann::json;

namespace {

double seconds_since(TrainClock::time_point t) {
  return std::chrono::duration<double>(TrainClock::now() - t).count();
}

// Since the last logging step: steps, tokens, and the wall-clock seconds from the start of
// its first step to the logging read. A step's own time on a card is only the host's part
// (the kernels run on after it returns, Note [Host reads]); the logging read waits for them,
// so the interval's time is the true one.
struct Interval {
  int64_t steps = 0, tokens = 0;
  TrainClock::time_point start;
  double seconds = 0;
};

// A logging step: the interval's mean loss and the last step's gradient norm (one read
// from the device, Note [Loss on the device]) into metrics.jsonl, after the device's error
// flags (Note [Device error flags] in cuda/error_flags.h); returns the loss (NaN in a dry
// run).
// The objective's statistics into a metrics record (Note [Objectives as units]), each name
// with `prefix` ("" or "eval_").
void add_objective_metrics(json& rec, const train::ObjectiveMetrics& metrics,
                           const std::string& prefix) {
  for (const auto& [name, mean] : metrics.means()) rec[prefix + name] = mean;
}

double log_interval(TrainRun& r, Interval& interval) {
  const train::StepLog log = r.step_fn->take_log();
  // Note [Data-parallel runs]: the global batch's statistics.
  const train::ObjectiveMetrics objective = sum_over_ranks(r, r.step_fn->take_metrics());
  interval.seconds = seconds_since(interval.start);
  // Note [Device errors over the ranks] in dist/device_errors.h
  dist::check_device_errors_over_ranks(r.group.get(), r.device);
  // Note [Data-parallel runs]: the global batch's loss, the mean of the ranks'.
  const double loss = mean_over_ranks(r, log.mean_loss), grad_norm = log.grad_norm;
  if (r.dry_run || !r.metrics) return loss;
  if (!std::isfinite(loss))
    r.progress.message(fmt::format("warning: the mean loss of the {} steps up to step {} is {}",
                                   interval.steps, r.step, loss));
  MemoryStats st = r.alloc.stats();
  json rec{{"step", r.step},
           {"loss", loss},
           {"learning_rate", r.last_lr},
           {"epoch", r.epoch_at(r.step)},
           {"tokens_per_second", double(interval.tokens) / std::max(interval.seconds, 1e-9)},
           {"memory_allocated", st.allocated_bytes[kAllPools].current},
           {"memory_peak", st.allocated_bytes[kAllPools].peak}};
  if (std::isfinite(grad_norm)) rec["grad_norm"] = grad_norm;
  if (r.scaler) {
    rec["loss_scale"] = r.scaler->scale();
    rec["skipped_steps"] = r.skipped_steps;  // so far, in the whole run
  }
  add_objective_metrics(rec, objective, "");
  r.metrics->append(rec);
  return loss;
}

void run_evaluation(TrainRun& r) {
  r.phase = fmt::format("in the evaluation after step {}", r.step);
  const auto result = evaluate(r);
  // Note [Device error flags] in cuda/error_flags.h, on every rank (Note [Device errors over
  // the ranks] in dist/device_errors.h)
  dist::check_device_errors_over_ranks(r.group.get(), r.device);
  if (!result) return;  // a signal: the loop saves and exits (Note [Signals act within a batch])
  const auto [eval_loss, tokens] = *result;
  if (r.dry_run) {
    r.progress.message(
        fmt::format("step {}: evaluated {} tokens (dry run: no loss)", r.step, tokens));
    return;
  }
  if (!r.metrics) return;  // Note [Data-parallel runs]: rank 0 writes
  json rec{{"step", r.step}, {"eval_loss", eval_loss}};
  const train::ObjectiveMetrics metrics = std::exchange(r.eval_metrics, {});
  add_objective_metrics(rec, metrics, "eval_");
  if (!r.objective->is_cross_entropy()) {
    const std::string summary = r.objective->eval_summary(metrics);
    r.progress.message(fmt::format("step {}: validation loss {:.4f}{}{}", r.step, eval_loss,
                                   summary.empty() ? "" : ", ", summary));
  } else {
    rec["eval_perplexity"] = std::exp(eval_loss);
    r.progress.message(fmt::format("step {}: validation loss {:.4f}, perplexity {:.2f} ({} tokens)",
                                   r.step, eval_loss, std::exp(eval_loss), tokens));
  }
  r.metrics->append(rec);
  if (!r.eval_prompts.empty()) {  // Note [Prompts at evaluation] in eval_prompts.cpp
    const json samples = complete_prompts(r.a, r.lm, r.eval_prompts, r.a.eval_max_new_tokens);
    r.metrics->append(json{{"step", r.step}, {"eval_samples", samples}});
    std::ofstream file(r.dir / "eval_samples.jsonl", std::ios::app);
    for (const json& s : samples) {
      json line = s;
      line["step"] = r.step;
      file << io::json_text(line) << "\n";
    }
    FG_CHECK(file.flush(), "[train {}] cannot append to eval_samples.jsonl", r.dir.string());
  }
  write_file_atomic((r.dir / "loss_curve.svg").string(),
                    loss_curve_svg(r.metrics->history(), r.loss_curve_title()));
}

int run(TrainRun& r) {
  try {
    setup_run(r);
  } catch (const OutOfMemory& e) {
    if (r.dir.empty() || !std::filesystem::is_directory(r.dir)) throw;
    return report_out_of_memory(r, e, "while loading the model and data");
  }
  const TrainArgs& a = r.a;
  // A real run's step finishes and is saved (Note [Signals act within a batch]); a dry run
  // saves nothing, so it stops at once (Note [Interruption points]).
  const DeferInterrupts defer(!r.dry_run);
  const int64_t eval_every = a.eval_steps > 0 ? a.eval_steps : a.logging_steps;
  Interval interval;
  double last_loss = NAN;
  try {
    while (r.step < r.total) {
      interruption_point();
      if (int sig = agreed_signal(r, interrupt_received())) {
        // With --save_strategy no nothing is saved, and the messages do not say otherwise.
        const bool saves = a.save_strategy != "no";
        r.progress.message(
            saves ? fmt::format("signal {} received: saving a checkpoint at step {}", sig, r.step)
                  : fmt::format("signal {} received: stopping at step {} (--save_strategy no: "
                                "no checkpoint is saved)",
                                sig, r.step));
        save_checkpoint(r);
        write_memory_record(r);
        r.progress.finish();
        r.out << (saves ? fmt::format(
                              "interrupted at step {}; resume with --resume_from_checkpoint last\n",
                              r.step)
                        : fmt::format("interrupted at step {}; --save_strategy no saved nothing "
                                      "to resume from\n",
                                      r.step));
        return 128 + sig;
      }
      r.phase = fmt::format("in step {} of {}", r.step + 1, r.total);
      auto t0 = TrainClock::now();
      if (interval.steps == 0) interval.start = t0;
      // The tokens the step computes: its rows times their length (--seq_len, or shorter for
      // batches cut to their longest example).
      int64_t tokens_per_step = 0;
      train::StepResult result;
      try {
        result = r.step_fn->run(r.step, [&](int64_t) {
          train::MicroBatch b = r.next_batch();
          tokens_per_step += b.ids.numel();
          return b;
        });
      } catch (const OutOfMemory&) {
        throw;
      } catch (const Error& e) {
        // A GRPO step fails before it trains when a reward fails (Note [Reward command
        // protocol]): the weights are the last step's, and the last checkpoint stands.
        if (r.objective->data() != ObjectiveData::prompts) throw;
        throw Error(fmt::format(
            "{}\n[train] step {} stopped before it trained; {}", e.what(), r.step + 1,
            r.last_saved >= 0
                ? fmt::format("the last checkpoint, checkpoint-{}, stands: resume from it with "
                              "--resume_from_checkpoint last",
                              r.last_saved)
                : std::string("no checkpoint was saved yet")));
      }
      if (r.objective->data() == ObjectiveData::prompts) tokens_per_step = grpo_step_tokens(r);
      r.last_lr = result.learning_rate;
      if (result.skipped) {
        ++r.skipped_steps;
        r.progress.message(
            fmt::format("step {}: inf or NaN gradients, no update; the loss scale is now {}",
                        r.step + 1, r.scaler->scale()));
      }
      const double dt = seconds_since(t0);
      ++r.step;
      if (r.step == r.run_start_step + 1) {
        const int64_t held = r.alloc.by_category()[size_t(Category::optimizer_state)].current;
        r.progress.message(fmt::format(
            "optimizer state in the ledger after step {}: {} = {:.3f} bytes per trained parameter",
            r.step, format_bytes(held), double(held) / double(r.optimized_parameters())));
      }
      ++interval.steps, interval.tokens += tokens_per_step;
      if (a.torch_empty_cache_steps > 0 && r.step % a.torch_empty_cache_steps == 0)
        r.alloc.empty_cache();

      const bool logging = r.step % a.logging_steps == 0 || r.step == r.total;
      MemoryStats st = r.alloc.stats();
      StepInfo info;
      info.step = r.step;
      info.total = r.total;
      info.learning_rate = r.last_lr;
      info.tokens_per_second = double(tokens_per_step) / std::max(dt, 1e-9);
      info.memory_allocated = st.allocated_bytes[kAllPools].current;
      info.memory_peak = st.allocated_bytes[kAllPools].peak;
      const double per_step = seconds_since(r.run_start) / double(r.step - r.run_start_step);
      info.seconds_left = per_step * double(r.total - r.step);
      if (logging) {
        last_loss = log_interval(r, interval);
        write_grpo_samples(r);  // Note [GRPO runs]: nothing for another objective
        info.tokens_per_second = double(interval.tokens) / std::max(interval.seconds, 1e-9);
        interval = {};
      }
      info.loss = last_loss;
      r.progress.step(info, logging);
      // Note [GRPO runs]: a run on prompts has no validation split.
      if (a.eval_strategy == "steps" && r.objective->data() != ObjectiveData::prompts &&
          (r.step % eval_every == 0 || r.step == r.total))
        run_evaluation(r);
      if (a.save_steps > 0 && r.step % a.save_steps == 0) save_checkpoint(r);
    }
    save_checkpoint(r);
  } catch (const OutOfMemory& e) {
    // Between steps (in an evaluation) the weights and optimizer state are those of a
    // complete step: keep it. The report says whether that checkpoint is there.
    if (r.phase.starts_with("in the evaluation")) {
      try {
        save_checkpoint(r);
      } catch (const Error& again) {
        r.err << "the checkpoint of step " << r.step << " could not be saved: " << again.what()
              << "\n";
      }
    }
    return report_out_of_memory(r, e, r.phase);
  }
  write_memory_record(r);
  r.progress.finish();
  MemoryStats st = r.alloc.stats();
  r.out << fmt::format("done: {} steps in {:.1f} s; peak memory {} allocated, {} reserved\n",
                       r.step, seconds_since(r.run_start),
                       format_bytes(st.allocated_bytes[kAllPools].peak),
                       format_bytes(st.reserved_bytes[kAllPools].peak));
  if (a.offload_activations) {
    const Device far = train::activation_far_memory(r.device);
    r.out << fmt::format(
        "offloaded activations: {} in {} at the peak\n",
        format_bytes(train::far_memory_allocator(r.device).stats().allocated_bytes[kAllPools].peak),
        r.device.type == DeviceType::cuda ? "pinned host memory" : far.str());
  }
  if (r.dry_run)
    r.out << fmt::format(
        "dry run: no losses and no checkpoints; wrote {} (memory.json, memory_trace.json, "
        "memory.html, peak_report.txt, memory_summary.txt)\n",
        a.output_dir);
  else
    r.out << fmt::format(
        "wrote {} (checkpoints, metrics.jsonl, loss_curve.svg, memory.json, "
        "memory_trace.json, memory.html, peak_report.txt, memory_summary.txt)\n",
        a.output_dir);
  return 0;
}

}  // namespace

int run_train(const TrainArgs& args, std::ostream& out, std::ostream& err) {
  // Note [Data-parallel runs]: ranks other than 0 print nothing; their errors still reach
  // the caller as exceptions.
  static std::ostream silent(nullptr);
  const char* rank = std::getenv("RANK");
  const bool quiet = std::getenv("WORLD_SIZE") && rank && std::string_view(rank) != "0";
  TrainRun r(args, quiet ? silent : out, quiet ? silent : err);
  return run(r);
}

}  // namespace fitgrad::train
