// Optimizers by Hugging Face --optim name: the AdamW spellings, sgd, the 8-bit Adams, both
// Adafactors and both GaLores build the right optimizer with the given learning rate; sgd
// reads torch.optim.SGD's momentum, dampening and nesterov from --optim_args
// (adafactor_hf: the relative step when none is given, as transformers does; APOLLO's names
// and flags are in tests/optim/apollo_test.cpp); GaLore reads transformers' --optim_args keys
// and defaults and needs --optim_target_modules; names transformers has and fitgrad lacks,
// and names nobody has, get the errors that list what is available.
#include "optim/factory.h"

#include <gtest/gtest.h>

#include "autograd/variable.h"
#include "optim/adafactor.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

std::vector<ParamGroup> one_group() {
  return {ParamGroup{{{"w", testing::random_tensor({3}, 1)}}, 0.0}};
}

TEST(MakeOptimizer, KnownNames) {
  AdamWOptions o;
  o.lr = 3e-4;
  for (const char* name : {"adamw_torch", "adamw_torch_fused", "adamw_hf"}) {
    const auto opt = make_optimizer(name, one_group(), o);
    EXPECT_EQ(opt->name(), "adamw") << name;
    EXPECT_EQ(opt->lr(), 3e-4);
  }
  const auto sgd = make_optimizer("sgd", one_group(), o);
  EXPECT_EQ(sgd->name(), "sgd");
  EXPECT_EQ(sgd->lr(), 3e-4);
  for (const char* name : {"adamw_8bit", "adamw_bnb_8bit", "adam8bit"}) {
    const auto opt = make_optimizer(name, one_group(), o);
    EXPECT_EQ(opt->name(), name);
    EXPECT_EQ(opt->lr(), 3e-4);
  }
  EXPECT_EQ(make_optimizer("adafactor", one_group(), o)->name(), "adafactor");
  EXPECT_EQ(
      optimizer_names(),
      (std::vector<std::string>{"adamw_torch", "adamw_torch_fused", "adamw_hf", "sgd", "adamw_8bit",
                                "adamw_bnb_8bit", "adam8bit", "adafactor", "adafactor_hf", "apollo",
                                "apollo_mini", "galore_adamw", "galore_adamw_8bit"}));
}

TEST(MakeOptimizer, GaloreTakesTrainersOptimArgs) {
  AdamWOptions o;
  o.lr = 3e-4;
  const std::vector<ParamGroup> groups = {
      ParamGroup{{{"w.weight", testing::random_tensor({3, 4}, 1)},
                  {"v.weight", testing::random_tensor({4, 4}, 2)}},
                 0.0}};
  for (const char* name : {"galore_adamw", "galore_adamw_8bit"}) {
    const auto opt = make_optimizer(name, groups, o, true,
                                    {"rank=2, update_proj_gap=7, scale=0.5, proj_type=std", "w"});
    EXPECT_EQ(opt->name(), name);
    EXPECT_EQ(opt->lr(), 3e-4);
    const auto& g = dynamic_cast<const GaLore&>(*opt);
    EXPECT_EQ(g.galore_options().rank, 2);
    EXPECT_EQ(g.galore_options().update_proj_gap, 7);
    EXPECT_EQ(g.galore_options().scale, 0.5);
    EXPECT_TRUE(g.projected(0));
    EXPECT_FALSE(g.projected(1));
  }
  // transformers' defaults, and a regular expression over the whole module name.
  const GaLoreOptions d = galore_options("galore_adamw", {"", "v|w"});
  EXPECT_EQ(d.rank, 128);
  EXPECT_EQ(d.update_proj_gap, 200);
  EXPECT_EQ(d.scale, 0.25);
  const auto both = make_optimizer("galore_adamw", groups, o, true, {"", "[vw]"});
  EXPECT_TRUE(dynamic_cast<const GaLore&>(*both).projected(1));
}

TEST(MakeOptimizer, GaloreRefusesWhatTrainerWouldNotRead) {
  const std::vector<ParamGroup> groups = {
      ParamGroup{{{"w.weight", testing::random_tensor({3, 4}, 1)}}, 0.0}};
  const struct {
    OptimizerExtras extras;
    const char* prefix;
    const char* error;
  } cases[] = {
      {{"rank=4", ""}, "[optim]", "galore_adamw needs --optim_target_modules"},
      {{"scale_type=tensor", "w"}, "[optim]", "unknown key 'scale_type' for galore_adamw"},
      {{"rnak=4", "w"}, "[optim]", "unknown key 'rnak' for galore_adamw (known: rank, update"},
      {{"proj_type=left", "w"}, "[optim]", "proj_type must be std (fitgrad has no other)"},
      {{"rank=0", "w"}, "[galore_adamw]", "rank must be in [1, 1048576], got 0"},
      {{"update_proj_gap=x", "w"}, "[optim]", "update_proj_gap must be an integer, got 'x'"},
      {{"rank=4,rank=8", "w"}, "[optim]", "rank is given twice"},
      {{"", "w,"}, "[optim]", "--optim_target_modules 'w,' has an empty name"},
      {{"", "*w"}, "[optim]", "'*w' is not a regular expression fitgrad reads"},
      {{"", "q_proj"}, "[galore_adamw]", "target_modules 'q_proj' names no 2-D weight"},
  };
  for (const auto& c : cases)
    testing::expect_error(
        [&] { make_optimizer("galore_adamw", groups, AdamWOptions{}, true, c.extras); }, c.prefix,
        c.error);
}

// Two steps on the constant gradient g = 1: the buffer is g, then m g + (1 - d) g, and
// Nesterov steps by g + m b (torch.optim.SGD's rule, by hand).
TEST(MakeOptimizer, SgdReadsTorchsKeywordsFromOptimArgs) {
  AdamWOptions o;
  o.lr = 0.5;
  const struct {
    const char* args;
    double moved;  // p0 - p2 in units of lr g
  } cases[] = {{"", 2.0},
               {"momentum=0.9", 1.0 + 1.9},
               {"momentum=0.9, dampening=0.5", 1.0 + 1.4},
               {"momentum=0.9,nesterov=true", 1.9 + (1.0 + 0.9 * 1.9)}};
  for (const auto& c : cases) {
    std::vector<ParamGroup> groups = {
        ParamGroup{{{"w", Tensor::full({2}, 3.0f, DType::f32, Device::cpu())}}, 0.0}};
    const auto opt = make_optimizer("sgd", groups, o, true, {c.args, ""});
    for (int step = 0; step < 2; ++step) {
      autograd::ensure_meta(groups[0].params[0].second).grad =
          Tensor::full({2}, 1.0f, DType::f32, Device::cpu());
      opt->step();
    }
    EXPECT_NEAR(testing::to_f64(groups[0].params[0].second)[1], 3.0 - 0.5 * c.moved, 1e-6)
        << c.args;
  }
  const struct {
    const char* args;
    const char* error;
  } bad[] = {{"momentum=1", "momentum must be in [0, 1), got '1'"},
             {"nesterov=yes", "nesterov must be true or false, got 'yes'"},
             {"nesterov=true", "nesterov needs momentum > 0 and dampening 0"},
             {"beta=0.9", "unknown key 'beta' for sgd (known: momentum, dampening, nesterov)"}};
  for (const auto& c : bad)
    testing::expect_error(
        [&] {
          make_optimizer("sgd", one_group(), o, true, {c.args, ""});
        },
        "[optim]", c.error);
  testing::expect_error(
      [&] {
        check_optimizer_extras("sgd", {"", "attn"});
      },
      "[optim]", "--optim_target_modules is read only by apollo");
}

TEST(MakeOptimizer, AdafactorHfUsesTheRelativeStepWithoutALearningRate) {
  AdamWOptions o;
  o.lr = 3e-4;
  const auto manual = make_optimizer("adafactor_hf", one_group(), o, true);
  const auto& m = dynamic_cast<const AdafactorHF&>(*manual).options();
  EXPECT_EQ(m.lr, 3e-4);
  EXPECT_FALSE(m.relative_step);
  EXPECT_FALSE(m.scale_parameter);
  const auto relative = make_optimizer("adafactor_hf", one_group(), o, false);
  const auto& r = dynamic_cast<const AdafactorHF&>(*relative).options();
  EXPECT_FALSE(r.lr.has_value());
  EXPECT_TRUE(r.relative_step);
  EXPECT_TRUE(r.scale_parameter);
}

TEST(MakeOptimizer, UnavailableAndUnknownNames) {
  for (const char* name : {"paged_adamw_8bit", "lion_32bit", "galore_adafactor"})
    testing::expect_error([&] { make_optimizer(name, one_group(), {}); }, "[optim]",
                          std::string("'") + name +
                              "' is not implemented yet (available: adamw_torch, "
                              "adamw_torch_fused, adamw_hf, sgd, adamw_8bit");
  testing::expect_error([] { make_optimizer("adam", one_group(), {}); }, "[optim]",
                        "unknown optimizer 'adam' (known: adamw_torch,");
}

}  // namespace
}  // namespace fitgrad::optim
