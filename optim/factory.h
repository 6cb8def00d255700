// Optimizers by Hugging Face name (TrainingArguments --optim), for the command line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/galore.h"
#include "optim/optimizer.h"

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
// "[optim] unknown optimizer 'x' (known: ...)". "galore_adamw" and "galore_adamw_8bit" make
// GaLore(groups, o, galore) (optim/galore.h).
std::unique_ptr<Optimizer> make_optimizer(const std::string& hf_name,
                                          std::vector<ParamGroup> groups, const AdamWOptions& o,
                                          bool lr_given = true, const GaLoreOptions& galore = {});
// The names make_optimizer accepts.
std::vector<std::string> optimizer_names();

}  // namespace fitgrad::optim
