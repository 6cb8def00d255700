// PEFT's target_modules: which Linear layers of a model an adapter or a quantized layer
// replaces, matched by full module path with PEFT's rules, and a LinearFactory that builds
// the matched layers with a given factory and every other one dense.
//
// Note [Target modules]
// PEFT (check_target_module_exists) matches a module's full dotted path `key`:
//   - a list of names: `key == name` or `key` ends with "." + name, so "q_proj" matches
//     "model.layers.0.self_attn.q_proj" and "self_attn.q_proj" works too;
//   - a single string: a regular expression that must match the whole of `key` (re.fullmatch;
//     io/full_match.h, Note [Patterns in linear time]);
//   - "all-linear": every linear layer except the output layer (lm_head), GPT-2's
//     c_attn, c_proj and c_fc included (PEFT counts transformers' Conv1D as linear).
// A list entry that matches no layer of the model is an error naming it (PEFT raises
// "Target modules ... not found"), so a typo cannot silently leave the model untouched;
// so is a pattern or all-linear that matches nothing.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "io/full_match.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace fitgrad::nn {

class TargetModules {
 public:
  static TargetModules names(std::vector<std::string> list);
  static TargetModules regex(const std::string& pattern);
  static TargetModules all_linear();
  // A command-line value: "all-linear", or names separated by commas ("q_proj,v_proj").
  // Empty names are an error naming the value.
  static TargetModules parse(const std::string& text);

  // Whether the Linear at full path `key` is a target.
  bool matches(const std::string& key) const;
  // The list entries that matched no key passed to matches() so far, and whether any key
  // matched.
  std::vector<std::string> unmatched() const;
  bool matched_any() const { return any_; }
  // The form PEFT's adapter_config.json stores: a list, a pattern, or "all-linear".
  std::string describe() const;

 private:
  enum class Kind { names, regex, all_linear };
  Kind kind_ = Kind::names;
  std::vector<std::string> names_;
  std::string pattern_;
  io::FullMatch regex_;
  mutable std::set<std::string> matched_;
  mutable bool any_ = false;
};

// A factory that builds each layer `targets` matches with `inner`, and every other one with
// `other` (a dense Linear when empty). `targets` is shared, so that after the build
// check_targets_found can ask it.
LinearFactory targeted_factory(std::shared_ptr<const TargetModules> targets, LinearFactory inner,
                               LinearFactory other = {});
// After a build through targeted_factory: throws "[target_modules] ..." naming each list
// entry that matched nothing, or saying that the pattern matched no layer.
void check_targets_found(const TargetModules& targets);

}  // namespace fitgrad::nn
