// The fit search (Note [The fit search]) and the longest-sequence bisection (search.h).
#include "apps/memplan/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "tensor/error.h"
#include "train/objectives/registry.h"
#include "train/train_flags.h"

namespace fitgrad::apps {

using train::flag_argument;
using train::is_default;
using train::kAlwaysOnPlanLine;
using train::kPlanLine;
using train::train_flags;
using train::TrainArgs;
using train::TrainFlag;
namespace {

enum class Ckpt { none, sqrt_segments, per_block };
enum class Precision { pure_bf16, fp32, autocast };  // autocast: bf16, or fp16 without bf16

// A candidate's place along each dimension, for the memory order of Note [The fit search].
struct Dims {
  int64_t micro = 1;
  Ckpt ckpt = Ckpt::none;
  std::string optimizer;  // ordered by optimizer_needs_more
  Precision precision = Precision::fp32;
  bool four_bit = false;
  bool in_backward = false;
  bool row_chunks = false;  // the fused head and the tiled MLP
  bool offload = false;     // checkpointed activations in host memory
  bool expandable = false;  // --allocator expandable
};

// Whether optimizer c's state (and step temporaries) is at least d's on every model: two
// chains from Adafactor's factored moments, adafactor < adamw_8bit < adamw_torch and
// adafactor < apollo_mini < apollo (rank 1 below rank 256), and nothing across them: APOLLO
// keeps AdamW's moments for the embeddings and the head, and its rank can exceed a small
// model's width. GaLore's state and temporaries depend on the rank and the weights' shapes,
// so a GaLore is ordered against nothing but itself.
bool optimizer_needs_more(const std::string& c, const std::string& d) {
  if (c.starts_with("galore_") || d.starts_with("galore_")) return c == d;
  auto place = [](const std::string& o) -> std::pair<int, int> {  // (chain, rank in it)
    if (o == "adafactor") return {0, 0};
    if (o == "adamw_8bit") return {1, 1};
    if (o == "adamw_torch") return {1, 2};
    if (o == "apollo_mini") return {2, 1};
    return {2, 2};  // apollo
  };
  const auto [c_chain, c_rank] = place(c);
  const auto [d_chain, d_rank] = place(d);
  return d_rank == 0 || (c_chain == d_chain && c_rank >= d_rank);
}

// Whether `c` needs at least the memory of `d` in every dimension.
bool needs_more(const Dims& c, const Dims& d) {
  const bool ckpt = c.ckpt == d.ckpt || c.ckpt == Ckpt::none;
  const bool precision = c.precision == d.precision || d.precision == Precision::pure_bf16;
  return c.micro >= d.micro && ckpt && optimizer_needs_more(c.optimizer, d.optimizer) &&
         precision && (!c.four_bit || d.four_bit) && (!c.in_backward || d.in_backward) &&
         (!c.row_chunks || d.row_chunks) && (!c.offload || d.offload) &&
         c.expandable == d.expandable;  // the allocators' reserved bytes are not ordered
}

constexpr const char* kOptimizers[] = {"adafactor",   "adamw_8bit", "adamw_torch",
                                       "apollo_mini", "apollo",     "galore_adamw_8bit",
                                       "galore_adamw"};

// Predicted times closer than this are ranked as equal (Note [The fit search]).
constexpr double kTimeTolerance = 0.01;

// How many of the searched dimensions `a` sets differently from the user's `base`.
int changes(const TrainArgs& base, const TrainArgs& a) {
  return int(a.per_device_train_batch_size != base.per_device_train_batch_size) +
         int(a.gradient_checkpointing != base.gradient_checkpointing ||
             a.checkpoint_segments != base.checkpoint_segments) +
         int(a.optim != base.optim) +
         int(a.bf16 != base.bf16 || a.fp16 != base.fp16 || a.pure_bf16 != base.pure_bf16) +
         int(a.quantize != base.quantize) + int(a.optim_in_backward != base.optim_in_backward) +
         int(a.fused_head_loss != base.fused_head_loss || a.tiled_mlp != base.tiled_mlp) +
         int(a.offload_activations != base.offload_activations) +
         int(a.allocator != base.allocator);
}

std::string setting_of(const TrainArgs& a, const train::TrainObjective& objective) {
  std::string s =
      fmt::format("batch {} x {}", a.per_device_train_batch_size, a.gradient_accumulation_steps);
  if (a.gradient_checkpointing)
    s += a.checkpoint_segments > 0 ? fmt::format(", {} segments", a.checkpoint_segments)
                                   : ", checkpointing";
  s += ", " + a.optim;
  s += a.pure_bf16 ? ", pure bf16" : a.bf16 ? ", bf16" : a.fp16 ? ", fp16" : ", fp32";
  if (!a.quantize.empty()) s += fmt::format(", {} + LoRA r {}", a.quantize, a.lora_r);
  if (a.weights_int8) s += ", int8 weights";
  if (a.optim_in_backward) s += ", in-backward";
  if (a.fused_head_loss || a.tiled_mlp) s += ", fused head + tiled MLP";
  if (a.offload_activations) s += ", offloaded activations";
  if (a.allocator == "expandable") s += ", expandable segments";
  if (objective.reference() == train::ObjectiveReference::model) {
    std::string name = a.objective;
    std::transform(name.begin(), name.end(), name.begin(), ::toupper);
    s += fmt::format(", {} reference: {}", name,
                     a.lora_r > 0                 ? "adapter off"
                     : a.precompute_ref_log_probs ? "precomputed"
                                                  : "frozen copy");
  }
  return s;
}

}  // namespace

std::string setting_flags(const TrainArgs& a) {
  // Note [One flag table]: the flags memplan's line carries, in the table's order.
  std::string s;
  for (const TrainFlag& f : train_flags()) {
    if (!(f.traits & kPlanLine)) continue;
    if ((f.traits & kAlwaysOnPlanLine) != kAlwaysOnPlanLine && is_default(f, a)) continue;
    if (!s.empty()) s += ' ';
    s += flag_argument(f, a);
  }
  return s;
}

std::string run_line(const TrainArgs& a) {
  // Note [Launching on several hosts] in apps/launch.h: one launcher per host.
  std::string s =
      a.plan_nnodes > 1
          ? fmt::format(
                "fitgrad launch --nnodes {} --node_rank <0..{}> --nproc_per_node {} --master_addr "
                "<host of node 0> --master_port 29500 train",
                a.plan_nnodes, a.plan_nnodes - 1, a.plan_world_size / a.plan_nnodes)
      : a.plan_world_size > 1
          ? fmt::format("fitgrad launch --nproc_per_node {} train", a.plan_world_size)
          : std::string("fitgrad train");
  return s + " --model " + a.model + " " + setting_flags(a) + " --data <corpus> --output_dir <dir>";
}

int64_t global_batch(const TrainArgs& a) {
  return a.per_device_train_batch_size * a.gradient_accumulation_steps * a.plan_world_size;
}

std::vector<Candidate> fit_candidates(const TrainArgs& base, const nn::ModelConfig& cfg,
                                      const PlanTarget& target, bool allow_qlora) {
  const int64_t effective = base.per_device_train_batch_size * base.gradient_accumulation_steps;
  const bool has_bf16 = target.rates.bf16_tflops > 0;
  const bool fixed_four_bit = !base.quantize.empty();
  const int64_t L = cfg.num_layers;
  const int64_t sqrt_segments = std::max<int64_t>(1, std::llround(std::sqrt(double(L))));
  // Activation offload copies to host memory and back over a card's link; on the CPU it
  // has nowhere to go (train refuses it there).
  const bool card = target.profile.backend == DeviceType::cuda;
  const std::unique_ptr<train::TrainObjective> objective = train::make_objective(base);
  std::vector<Candidate> out;
  for (int64_t micro = 1; micro <= effective; ++micro) {
    if (effective % micro != 0) continue;
    for (Ckpt ckpt : {Ckpt::none, Ckpt::sqrt_segments, Ckpt::per_block}) {
      if (ckpt == Ckpt::sqrt_segments && sqrt_segments >= L) continue;
      for (const char* optimizer : kOptimizers)
        for (Precision precision : {Precision::pure_bf16, Precision::fp32, Precision::autocast}) {
          if (precision == Precision::pure_bf16 && !has_bf16) continue;
          for (bool four_bit : {false, true}) {
            if (four_bit && !allow_qlora && !fixed_four_bit) continue;
            // The user's --weights_int8 stays in every candidate (a = base) and excludes LoRA.
            if (four_bit && base.weights_int8) continue;
            if (!four_bit && fixed_four_bit) continue;
            for (bool in_backward : {false, true})
              for (bool row_chunks : {false, true})
                for (bool offload : {false, true}) {
                  if (offload && (!card || ckpt == Ckpt::none)) continue;
                  TrainArgs a = base;
                  a.per_device_train_batch_size = micro;
                  a.gradient_accumulation_steps = effective / micro;
                  a.gradient_checkpointing = ckpt != Ckpt::none;
                  a.checkpoint_segments = ckpt == Ckpt::sqrt_segments ? sqrt_segments : 0;
                  a.optim = optimizer;
                  // --optim_args belong to the user's optimizer (the two GaLores read the
                  // same keys), --optim_target_modules to the low-rank ones; a GaLore needs
                  // targets and takes the reference's when the user gave none.
                  const bool galore = a.optim.starts_with("galore_");
                  if (a.optim != base.optim && !(galore && base.optim.starts_with("galore_")))
                    a.optim_args = "";
                  if (!galore && !a.optim.starts_with("apollo")) a.optim_target_modules = "";
                  if (galore && a.optim_target_modules.empty()) a.optim_target_modules = "attn,mlp";
                  a.bf16 = precision == Precision::autocast && has_bf16;
                  a.fp16 = precision == Precision::autocast && !has_bf16;
                  a.pure_bf16 = precision == Precision::pure_bf16;
                  a.stochastic_rounding = a.pure_bf16;
                  a.tf32 = base.tf32 && precision == Precision::fp32;
                  if (four_bit && !fixed_four_bit) {
                    a.quantize = "nf4";
                    if (a.lora_r == 0) a.lora_r = 16;
                  }
                  // GaLore trains full weights; LoRA's are frozen.
                  if (a.optim.starts_with("galore_") && a.lora_r > 0) continue;
                  a.optim_in_backward = in_backward;
                  // Optimizer-in-backward can neither clip by the global norm nor skip a step,
                  // nor run data-parallel (Note [Data-parallel runs] in train/train_dist.h).
                  if (in_backward &&
                      (base.max_grad_norm != 0 || a.fp16 || base.plan_world_size > 1))
                    continue;
                  // The user's own row chunking or offload stays; the search adds them only.
                  // An objective of each answer's log-probability has no fused head.
                  a.fused_head_loss =
                      (base.fused_head_loss || row_chunks) && !objective->needs_row_log_probs();
                  a.tiled_mlp = base.tiled_mlp || row_chunks;
                  a.offload_activations = base.offload_activations || offload;
                  if ((row_chunks && base.fused_head_loss && base.tiled_mlp) ||
                      (offload && base.offload_activations))
                    continue;
                  if (a.offload_activations && !a.gradient_checkpointing) continue;
                  // A batch the objective refuses (KTO's KL estimate needs two examples).
                  try {
                    train::make_objective(a);
                  } catch (const Error&) {
                    continue;
                  }
                  out.push_back({a, setting_of(a, *objective), step_cost(cfg, a, target.rates),
                                 std::nullopt, -1});
                  // A reference without an adapter (Note [Preference steps]): a frozen copy,
                  // or the log-probabilities computed before training.
                  if (objective->reference() == train::ObjectiveReference::model && a.lora_r == 0 &&
                      !a.precompute_ref_log_probs) {
                    a.precompute_ref_log_probs = true;
                    out.push_back({a, setting_of(a, *objective), step_cost(cfg, a, target.rates),
                                   std::nullopt, -1});
                  }
                }
          }
        }
    }
  }
  return out;
}

FitResult fit_search(const TrainArgs& base, const nn::ModelConfig& cfg, const PlanTarget& target,
                     bool allow_qlora, std::ostream& progress) {
  std::vector<Candidate> all = fit_candidates(base, cfg, target, allow_qlora);
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Ties within kTimeTolerance go to the setting closest to the user's flags.
  auto rank = [&](size_t i) {
    const double bucket = std::floor(std::log(all[i].cost.seconds) / std::log1p(kTimeTolerance));
    return std::tuple(bucket, changes(base, all[i].args), all[i].cost.seconds);
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return rank(x) < rank(y); });
  auto dims_of = [](const TrainArgs& a) {
    Dims d;
    d.micro = a.per_device_train_batch_size;
    d.ckpt = !a.gradient_checkpointing   ? Ckpt::none
             : a.checkpoint_segments > 0 ? Ckpt::sqrt_segments
                                         : Ckpt::per_block;
    d.optimizer = a.optim;
    d.precision = a.pure_bf16        ? Precision::pure_bf16
                  : a.bf16 || a.fp16 ? Precision::autocast
                                     : Precision::fp32;
    d.four_bit = !a.quantize.empty();
    d.in_backward = a.optim_in_backward;
    d.row_chunks = a.fused_head_loss && a.tiled_mlp;
    d.offload = a.offload_activations;
    d.expandable = a.allocator == "expandable";
    return d;
  };
  FitResult r;
  std::vector<size_t> out_of_memory;  // indices into r.tried
  for (size_t n = 0; n < order.size(); ++n) {
    Candidate c = all[order[n]];
    const Dims d = dims_of(c.args);
    for (size_t k : out_of_memory)
      if (needs_more(d, dims_of(r.tried[k].args))) {
        c.implied_by = int(k);
        break;
      }
    if (c.implied_by < 0) {
      progress << fmt::format("planning {}\n", c.setting) << std::flush;
      c.plan = plan_training(c.args, target, "");
    }
    r.tried.push_back(std::move(c));
    const Candidate& last = r.tried.back();
    if (last.plan && last.plan->fits) {
      r.winner = int(r.tried.size() - 1);
      r.untried = order.size() - n - 1;
      return r;
    }
    if (last.plan) out_of_memory.push_back(r.tried.size() - 1);
  }
  return r;
}

const char* knob_flag(Knob knob) {
  return knob == Knob::seq_len ? "--seq_len" : "--per_device_train_batch_size";
}

LargestResult largest_fitting(const TrainArgs& base, const PlanTarget& target, Knob knob,
                              int64_t limit, std::ostream& progress) {
  LargestResult r;
  auto value_of = [knob](TrainArgs& a) -> int64_t& {
    return knob == Knob::seq_len ? a.seq_len : a.per_device_train_batch_size;
  };
  auto probe = [&](int64_t value) {
    TrainArgs a = base;
    value_of(a) = value;
    progress << fmt::format("planning {} {}\n", knob_flag(knob), value) << std::flush;
    Plan p = plan_training(a, target, "");
    r.probes.emplace_back(value, p.fits);
    if (p.fits && value > r.largest) {
      r.largest = value;
      r.plan = std::move(p);
    }
    return r.probes.back().second;
  };
  if (probe(limit)) return r;
  int64_t lo = 0, hi = limit;  // lo fits (0: none known), hi does not
  TrainArgs own = base;
  int64_t guess = value_of(own);
  while (hi - lo > 1) {
    const int64_t mid = guess > lo && guess < hi ? guess : lo + (hi - lo) / 2;
    guess = 0;
    (probe(mid) ? lo : hi) = mid;
  }
  return r;
}

}  // namespace fitgrad::apps
