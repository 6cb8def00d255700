// Optimizers by Hugging Face --optim name: the AdamW spellings and sgd build the right
// optimizer with the given learning rate; names transformers has and fitgrad lacks, and
// names nobody has, get the errors that list what is available.
#include "optim/factory.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(optimizer_names(),
            (std::vector<std::string>{"adamw_torch", "adamw_torch_fused", "adamw_hf", "sgd"}));
}

TEST(MakeOptimizer, UnavailableAndUnknownNames) {
  for (const char* name :
       {"adafactor", "adamw_bnb_8bit", "adamw_8bit", "paged_adamw_8bit", "lion_32bit"})
    testing::expect_error([&] { make_optimizer(name, one_group(), {}); }, "[optim]",
                          std::string("'") + name +
                              "' is not implemented yet (available: adamw_torch, "
                              "adamw_torch_fused, adamw_hf, sgd)");
  testing::expect_error([] { make_optimizer("adam", one_group(), {}); }, "[optim]",
                        "unknown optimizer 'adam' (known: adamw_torch,");
}

}  // namespace
}  // namespace fitgrad::optim
