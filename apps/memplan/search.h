// memplan's searches over exact plans (apps/memplan/): the fastest setting that fits
// (--fit), and the longest sequence (--max_seq_len) or largest micro-batch
// (--max_batch_size) that fits.
//
// Note [The fit search]
// The candidates hold the effective batch (micro-batch x accumulation) of the user's flags and
// vary: the micro-batch over the divisors of that batch; checkpointing off, per block, or in
// round(sqrt(L)) segments; the optimizer (adamw_torch, adamw_8bit, adafactor, apollo,
// apollo_mini, galore_adamw, galore_adamw_8bit; --optim_args stay with the user's optimizer
// (and pass between the two GaLores), --optim_target_modules with the low-rank ones, and a
// GaLore candidate the user gave no targets takes "attn,mlp", the reference's); the precision
// (fp32, bf16 autocast, pure bf16; fp16 autocast on a card without bf16); with --allow_qlora,
// an NF4 base with LoRA adapters (it changes what is trained, so only when asked); optimizer-
// in-backward, only when --max_grad_norm is 0 (it cannot clip by the global norm); the fused
// head with the tiled MLP (Note [Row-chunked head and MLP] in nn/decoder.h); and, on a card
// with checkpointing, the checkpointed activations offloaded to host memory (Note [Activation
// offload]); and the expandable allocator (Note [Expandable segments]). Flags the user gave
// stay on; --weights_int8 (Note [Int8 weight training]) is one of them and is never added
// (it changes the weights' numerics), and it leaves out the NF4 + LoRA candidates. Each candidate's step time comes from the cost model (Note [The step's cost
// model]), which needs no plan; the candidates are then planned exactly in order of that time,
// fastest first, and the first that fits is the answer. Times within 1% of each other count as
// equal, and among them the setting that changes fewer of the user's flags comes first (the
// cost model cannot tell AdamW from Adafactor to 1%, and the user chose one). A candidate that
// needs at least the memory of one that ran out of memory in every dimension (a larger micro-
// batch, no more checkpointing, a larger optimizer state (two chains: adafactor < adamw_8bit <
// adamw_torch and adafactor < apollo_mini < apollo; GaLore's is ordered against no other
// optimizer: it depends on the rank and the shapes), a larger precision, no 4-bit base,
// no optimizer-in-backward, no row chunking, no offload) is not planned: it would run out too.
// Memory is ordered so along each dimension except fp32 against bf16 autocast, which is not
// ordered (autocast adds bf16 weight copies and halves the activations) and so never implies,
// nor do the two allocators (expandable segments merge free blocks but map whole granules).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/memplan/cost_model.h"
#include "apps/memplan/plan.h"

namespace fitgrad::apps {

struct Candidate {
  train::TrainArgs args;
  std::string setting;  // "batch 2 x 4, checkpointing, adamw_8bit, bf16"
  StepCost cost;
  std::optional<Plan> plan;  // planned; else implied by `implied_by`
  int implied_by = -1;       // the index of the out-of-memory candidate it needs more than
};

struct FitResult {
  std::vector<Candidate> tried;  // in the order considered; the last one fits when any did
  int winner = -1;
  size_t untried = 0;  // slower candidates left unplanned
};

// The candidates of Note [The fit search], unsorted.
std::vector<Candidate> fit_candidates(const train::TrainArgs& base, const nn::ModelConfig& cfg,
                                      const PlanTarget& target, bool allow_qlora);
FitResult fit_search(const train::TrainArgs& base, const nn::ModelConfig& cfg,
                     const PlanTarget& target, bool allow_qlora, std::ostream& progress);

// The `fitgrad train` flags that select a candidate's setting.
std::string setting_flags(const train::TrainArgs& a);
// The command that runs `a`: `fitgrad train ...`, or for one rank of a data-parallel job
// (--world_size N) `fitgrad launch --nproc_per_node N train ...`, with the device when it
// is not train's default, and <corpus> and <dir> to fill in.
std::string run_line(const train::TrainArgs& a);
// The global batch in sequences: micro-batch x accumulation x ranks.
int64_t global_batch(const train::TrainArgs& a);

// What a bisection varies: --seq_len or --per_device_train_batch_size.
enum class Knob { seq_len, batch_size };
const char* knob_flag(Knob knob);

struct LargestResult {
  int64_t largest = 0;                           // 0: not even 1 fits
  std::optional<Plan> plan;                      // the plan at `largest`
  std::vector<std::pair<int64_t, bool>> probes;  // (value, fits), in order
};

// The largest value of `knob` in [1, limit] that fits, by bisection on exact plans (fitting
// is taken to be monotone in it). The first probe is the limit, the second the base's own
// value when that is below the limit.
LargestResult largest_fitting(const train::TrainArgs& base, const PlanTarget& target, Knob knob,
                              int64_t limit, std::ostream& progress);

}  // namespace fitgrad::apps
