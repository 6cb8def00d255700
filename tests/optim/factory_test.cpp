// Optimizers by Hugging Face --optim name: the AdamW spellings, sgd, the 8-bit Adams, both
// Adafactors and both GaLores (with their options) build the right optimizer with the given learning rate (adafactor_hf: the
// relative step when none is given, as transformers does); names transformers has and
// fitgrad lacks, and names nobody has, get the errors that list what is available.
#include "optim/factory.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(optimizer_names(),
            (std::vector<std::string>{"adamw_torch", "adamw_torch_fused", "adamw_hf", "sgd",
                                      "adamw_8bit", "adamw_bnb_8bit", "adam8bit", "adafactor",
                                      "adafactor_hf", "galore_adamw", "galore_adamw_8bit"}));
}

TEST(MakeOptimizer, GaloreTakesItsOptions) {
  AdamWOptions o;
  o.lr = 3e-4;
  GaLoreOptions g;
  g.rank = 2;
  g.target_modules = "w*";
  const std::vector<ParamGroup> groups = {
      ParamGroup{{{"w.weight", testing::random_tensor({3, 4}, 1)}}, 0.0}};
  for (const char* name : {"galore_adamw", "galore_adamw_8bit"}) {
    const auto opt = make_optimizer(name, groups, o, true, g);
    EXPECT_EQ(opt->name(), name);
    EXPECT_EQ(opt->lr(), 3e-4);
    EXPECT_EQ(dynamic_cast<const GaLore&>(*opt).galore_options().rank, 2);
    EXPECT_TRUE(dynamic_cast<const GaLore&>(*opt).projected(0));
  }
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
