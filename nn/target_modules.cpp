// PEFT's target_modules matching (see target_modules.h).
#include "nn/target_modules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tensor/error.h"

namespace fitgrad::nn {

TargetModules TargetModules::names(std::vector<std::string> list) {
  FG_CHECK(!list.empty(), "[target_modules] the list of module names is empty");
  for (const std::string& n : list)
    FG_CHECK(!n.empty(), "[target_modules] an empty module name in [{}]", fmt::join(list, ", "));
  TargetModules t;
  t.names_ = std::move(list);
  return t;
}

TargetModules TargetModules::regex(const std::string& pattern) {
  TargetModules t;
  t.kind_ = Kind::regex;
  t.pattern_ = pattern;
  t.regex_ = io::FullMatch(pattern, "[target_modules]");  // Note [Patterns in linear time]
  return t;
}

TargetModules TargetModules::all_linear() {
  TargetModules t;
  t.kind_ = Kind::all_linear;
  return t;
}

TargetModules TargetModules::parse(const std::string& text) {
  if (text == "all-linear") return all_linear();
  std::vector<std::string> list;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    list.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    FG_CHECK(!list.back().empty(), "[target_modules] '{}' has an empty module name", text);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return names(std::move(list));
}

bool TargetModules::matches(const std::string& key) const {
  bool hit = false;
  switch (kind_) {
    case Kind::all_linear: hit = key != "lm_head" && !key.ends_with(".lm_head"); break;
    case Kind::regex: hit = regex_(key); break;
    case Kind::names:
      for (const std::string& n : names_)
        if (key == n ||
            (key.size() > n.size() && key.ends_with(n) && key[key.size() - n.size() - 1] == '.')) {
          matched_.insert(n);
          hit = true;
        }
      break;
  }
  any_ = any_ || hit;
  return hit;
}

std::vector<std::string> TargetModules::unmatched() const {
  std::vector<std::string> out;
  for (const std::string& n : names_)
    if (!matched_.count(n)) out.push_back(n);
  return out;
}

std::string TargetModules::describe() const {
  if (kind_ == Kind::all_linear) return "all-linear";
  if (kind_ == Kind::regex) return pattern_;
  return fmt::format("{}", fmt::join(names_, ","));
}

LinearFactory targeted_factory(std::shared_ptr<const TargetModules> targets, LinearFactory inner,
                               LinearFactory other) {
  FG_CHECK(targets && inner, "[target_modules] targeted_factory needs targets and a factory");
  return [targets = std::move(targets), inner = std::move(inner), other = std::move(other)](
             const LinearSpec& spec, BuildContext& ctx) -> std::unique_ptr<LinearLayer> {
    if (targets->matches(spec.path)) return inner(spec, ctx);
    if (other) return other(spec, ctx);
    return std::make_unique<Linear>(spec.path, spec.name, spec.in, spec.out, spec.options, ctx);
  };
}

void check_targets_found(const TargetModules& targets) {
  const std::vector<std::string> missing = targets.unmatched();
  FG_CHECK(missing.empty(), "[target_modules] not found in the model: {} (of {})",
           fmt::join(missing, ", "), targets.describe());
  FG_CHECK(targets.matched_any(), "[target_modules] '{}' matched no linear layer of the model",
           targets.describe());
}

}  // namespace fitgrad::nn
