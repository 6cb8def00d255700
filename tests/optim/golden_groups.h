// The parameters of an optimizer golden file (tests/golden/gen_*optim*_golden.py): meta
// "groups" lists each group's weight decay and parameter names, and "init.<name>" holds
// each parameter's starting value. Shared by the optimizer golden tests.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "optim/optimizer.h"
#include "tests/golden/golden_file.h"

namespace fitgrad::testing {

struct GoldenParams {
  std::map<std::string, Tensor> params;   // by name, each requiring a gradient
  std::vector<optim::ParamGroup> groups;  // as the file lists them
};

inline GoldenParams golden_params(const GoldenFile& file) {
  GoldenParams out;
  for (const auto& g : file.meta().at("groups")) {
    optim::ParamGroup group;
    group.weight_decay = g.at("weight_decay").get<double>();
    for (const auto& n : g.at("params")) {
      const std::string name = n.get<std::string>();
      Tensor p = file.tensor("init." + name);
      autograd::set_requires_grad(p);
      out.params[name] = p;
      group.params.emplace_back(name, p);
    }
    out.groups.push_back(std::move(group));
  }
  return out;
}

}  // namespace fitgrad::testing
