// The weights a low-rank optimizer (APOLLO, GaLore) projects: transformers'
// optim_target_modules, shared by both, and parsed from the command line's comma-separated
// --optim_target_modules.
//
// Note [Optimizer target modules]
// transformers' Trainer takes optim_target_modules as a list of module names and matches each
// module name against it (trainer_utils.check_target_module_exists): a module is a target when
// an entry equals its name, is a substring of it, or matches all of it as a regular expression.
// fitgrad matches a parameter's module path (its name without the last component, so
// "model.layers.0.self_attn.q_proj" for "model.layers.0.self_attn.q_proj.weight") the same
// way, the expression matched in linear time by RE2 (io/full_match.h), which reads the usual
// patterns (".*attn.*", "layers\.[0-3]\..*") as Python's re does. transformers then keeps only the
// nn.Linear weights; fitgrad keeps the 2-D parameters, which are the linear weights and the
// embeddings, so an embedding is a target only if an entry names it (attn,mlp do not).
// An entry is split at commas, so an expression cannot hold one. This is the list form of
// TrainingArguments.optim_target_modules; transformers' own command line passes one string,
// which it reads as a single expression (or "all-linear"), so "attn,mlp" there matches
// nothing. fitgrad does not read "all-linear" (it would be a substring matching nothing).
#pragma once

#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace fitgrad::optim {

// The entries of "a,b,..."; throws "[optim] --optim_target_modules ..." on an empty entry
// or an entry that is not a regular expression.
std::vector<std::string> parse_target_modules(const std::string& text);

// Whether parameter `name` (tensor p) is a target of `targets` (Note [Optimizer target
// modules]).
bool is_target_module(const std::vector<std::string>& targets, const std::string& name,
                      const Tensor& p);

}  // namespace fitgrad::optim
