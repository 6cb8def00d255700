// Optimizers by Hugging Face name (TrainingArguments --optim), for the command line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/apollo.h"
#include "optim/galore.h"
#include "optim/optimizer.h"
#include "optim/sgd.h"

namespace fitgrad::optim {

// "adamw_torch", "adamw_torch_fused" and "adamw_hf" make AdamW(groups, o); "sgd" makes
// SGD with o.lr and no momentum. "adamw_8bit", "adamw_bnb_8bit" and "adam8bit" make
// Adam8bit with o's lr, betas and eps (bitsandbytes' AdamW8bit and Adam8bit, which differ
// only in their default weight decay; the groups carry it). "adafactor" makes torch's
// Adafactor with lr o.lr; "adafactor_hf" makes transformers' Adafactor as Trainer does for
// its "adafactor" (relative_step and scale_parameter off, lr o.lr) when `lr_given`, and with
// its defaults (the relative step) when not. transformers' deprecated "adamw_hf" (its own AdamW) adds
// eps before the bias correction and decays after the update; fitgrad gives it torch's
// AdamW, as later transformers releases do. A name transformers knows and fitgrad does not
// have throws "[optim] 'x' is not implemented yet (available: ...)", any other name
// "[optim] unknown optimizer 'x' (known: ...)".
//
// The low-rank optimizers are configured as transformers' Trainer configures them: `extras`
// holds Hugging Face's --optim_args "key=value,..." and --optim_target_modules (the weights
// projected, Note [Optimizer target modules] in optim/target_modules.h), parsed once here
// for both, and seed the projections'.
// - "apollo" and "apollo_mini" make APOLLO (optim/apollo.h) with its published defaults and
//   APOLLO-Mini's (rank 1, scale 128, tensor-wise), with o's lr, betas and eps (as Trainer
//   passes its own to apollo_torch); optim_args keys rank, scale, scale_type (channel,
//   tensor), update_proj_gap, proj (random) and proj_type (std); target_modules defaults to
//   "attn,mlp".
// - "galore_adamw" and "galore_adamw_8bit" make GaLore (optim/galore.h) with Trainer's
//   defaults, rank 128, update_proj_gap 200, scale 0.25, proj_type std (fitgrad has only
//   that projector), and o's lr, betas and eps; target_modules is required, as Trainer
//   raises without optim_target_modules.
// - "sgd" reads torch.optim.SGD's keyword names momentum, dampening and nesterov (true,
//   false) from optim_args, a fitgrad extension: Trainer passes SGD the learning rate alone.
// A key another optimizer reads, an unknown key or value, a repeated key, optim_args or
// target_modules with an optimizer that reads neither, throws "[optim] --optim_args ..." or
// "[optim] --optim_target_modules ..." naming it.
struct OptimizerExtras {
  std::string optim_args;      // "key=value,...", Hugging Face's --optim_args; "" for none
  std::string target_modules;  // comma-separated; "" for none (apollo: its default)
  uint64_t seed = 0;
};
std::unique_ptr<Optimizer> make_optimizer(const std::string& hf_name,
                                          std::vector<ParamGroup> groups, const AdamWOptions& o,
                                          bool lr_given = true, const OptimizerExtras& extras = {});
// Throws what make_optimizer would for `extras` under `hf_name` (before any parameter
// exists: train's flag checks).
void check_optimizer_extras(const std::string& hf_name, const OptimizerExtras& extras);
// The options make_optimizer gives "apollo" or "apollo_mini" under `extras`, before o's lr,
// betas and eps (memplan's cost model reads the rank); throws as make_optimizer does.
ApolloOptions apollo_options(const std::string& hf_name, const OptimizerExtras& extras);
// The options make_optimizer gives "galore_adamw" or "galore_adamw_8bit" under `extras`
// (memplan's cost model reads the rank and the gap); throws as make_optimizer does.
GaLoreOptions galore_options(const std::string& hf_name, const OptimizerExtras& extras);
// The options make_optimizer gives "sgd" under `extras`, with learning rate `lr`.
SgdOptions sgd_options(double lr, const OptimizerExtras& extras);
// The names make_optimizer accepts.
std::vector<std::string> optimizer_names();

}  // namespace fitgrad::optim
