// The low-rank optimizers' target modules (Note [Optimizer target modules] in
// optim/target_modules.h), row by row against transformers' check_target_module_exists for a
// list: an entry equal to the module path, a substring of it, or a regular expression that
// matches all of it selects a 2-D weight; 1-D parameters never; and the command line's list
// is split at commas with its errors named.
#include "optim/target_modules.h"

#include <gtest/gtest.h>

#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

TEST(OptimizerTargetModules, NamesSubstringsAndWholeMatchRegularExpressions) {
  const Tensor w = Tensor::empty({4, 3}), b = Tensor::empty({4});
  const struct {
    std::vector<std::string> targets;
    const char* name;
    bool matrix;
    bool expected;
  } rows[] = {
      {{"attn", "mlp"}, "model.layers.0.self_attn.q_proj.weight", true, true},
      {{"attn", "mlp"}, "h.1.mlp.c_fc.weight", true, true},
      {{"attn", "mlp"}, "model.embed_tokens.weight", true, false},
      {{"attn", "mlp"}, "h.1.attn.norm.weight", false, false},  // 1-D
      {{"attn", "mlp"}, "h.1.mlp.c_fc.bias", false, false},
      {{"lm_head"}, "lm_head.weight", true, true},  // the whole module path
      {{"q_proj", "v_proj"}, "model.layers.3.self_attn.v_proj.weight", true, true},
      {{"q_proj", "v_proj"}, "model.layers.3.self_attn.k_proj.weight", true, false},
      // Python's re.fullmatch: the expression covers the whole path.
      {{".*\\.(q|v)_proj"}, "model.layers.3.self_attn.v_proj.weight", true, true},
      {{".*\\.(q|v)_proj"}, "model.layers.3.self_attn.k_proj.weight", true, false},
      {{"layers\\.[0-2]\\..*"}, "model.layers.1.mlp.up_proj.weight", true, false},
      {{".*layers\\.[0-2]\\..*"}, "model.layers.1.mlp.up_proj.weight", true, true},
      {{".*layers\\.[0-2]\\..*"}, "model.layers.3.mlp.up_proj.weight", true, false},
      {{".*.attn.*", ".*.mlp.*"}, "h.0.attn.c_proj.weight", true, true},
  };
  for (const auto& r : rows)
    EXPECT_EQ(is_target_module(r.targets, r.name, r.matrix ? w : b), r.expected) << r.name;
}

TEST(OptimizerTargetModules, TheCommandLineListAndItsErrors) {
  EXPECT_EQ(parse_target_modules("attn,mlp"), (std::vector<std::string>{"attn", "mlp"}));
  EXPECT_EQ(parse_target_modules(".*q_proj"), (std::vector<std::string>{".*q_proj"}));
  testing::expect_error([] { parse_target_modules(""); }, "[optim]", "'' has an empty name");
  testing::expect_error([] { parse_target_modules("attn,,mlp"); }, "[optim]",
                        "'attn,,mlp' has an empty name");
  testing::expect_error([] { parse_target_modules("attn,(mlp"); }, "[optim]",
                        "'(mlp' is not a regular expression fitgrad reads");
}

}  // namespace
}  // namespace fitgrad::optim
