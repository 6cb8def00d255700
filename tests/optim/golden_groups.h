// The parameters of an optimizer golden file (tests/golden/gen_*optim*_golden.py): meta
// "groups" lists each group's weight decay and parameter names, and "init.<name>" holds
// each parameter's starting value. Shared by the optimizer golden tests, with the normwise
// error they measure and their check of a state_dict against the file.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "optim/optimizer.h"
#include "tests/golden/golden_file.h"
#include "tests/tensor/ops/op_harness.h"

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

// max |got - want| / max |want| (the absolute error when want is all zero).
inline double normwise_err(const Tensor& got, const Tensor& want) {
  const auto g = to_f64(got), w = to_f64(want);
  double scale = 0, err = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    scale = std::max(scale, std::fabs(w[i]));
    err = std::max(err, std::fabs(g[i] - w[i]));
  }
  return scale > 0 ? err / scale : err;
}

// Every entry of `state` but "step" and `skip` is in the file: the ".step" counters exactly,
// the rest of the same shape within `tol` (normwise); "step" itself equals `steps`.
inline void expect_golden_state(const std::map<std::string, Tensor>& state, const GoldenFile& file,
                                double tol, const std::string& file_name, int64_t steps,
                                const std::set<std::string>& skip = {}) {
  for (const auto& [key, t] : state) {
    if (key == "step" || skip.count(key)) continue;
    ASSERT_TRUE(file.has(key)) << file_name << " has no " << key;
    if (key.ends_with(".step")) {
      EXPECT_EQ(t.item(), file.tensor(key).item()) << key;
      continue;
    }
    ASSERT_EQ(t.shape(), file.tensor(key).shape()) << key;
    EXPECT_LE(normwise_err(t, file.tensor(key)), tol) << file_name << " " << key;
  }
  EXPECT_EQ(state.at("step").item(), steps);
}

}  // namespace fitgrad::testing
