// APOLLO beyond its golden trajectories (tests/optim/apollo_golden_test.cpp): which weights
// are projected and the state bytes they declare (8 r max(m, n) + 4 against AdamW's 8 m n);
// the projections are N(0, 1/r), a pure function of (seed, parameter, refresh), and never
// state; a resume across projection refreshes is bitwise, in f32 and in bf16 with stochastic
// rounding, even when the resumed optimizer was built with another seed (the saved one wins);
// bf16 parameters follow the f32 run; a step on meta allocates the state and, for the step
// only, P and R as temporaries; bad options and flags are errors that name them; on a card
// (the device check's second step, issue 46) the steps follow the CPU's.
#include "optim/apollo.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "autograd/variable.h"
#include "optim/factory.h"
#include "tensor/device_registry.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/card.h"
#include "tests/optim/random_steps.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using ::testing::HasSubstr;

// A tall and a wide target weight, a 2-D non-target and a target's bias.
std::vector<ParamGroup> params(DType dtype, Device device = Device::cpu()) {
  std::vector<ParamGroup> groups(2);
  groups[0].weight_decay = 0.01;
  groups[0].params = {{"h.0.attn.c_attn.weight", testing::random_tensor({96, 40}, 1)},
                      {"h.0.mlp.c_fc.weight", testing::random_tensor({24, 70}, 2)},
                      {"wte.weight", testing::random_tensor({50, 24}, 3)}};
  groups[1].params = {{"h.0.attn.c_attn.bias", testing::random_tensor({40}, 4)}};
  for (auto& g : groups)
    for (auto& [name, p] : g.params) {
      p = p.to(dtype).to(device);
      autograd::set_requires_grad(p);
    }
  return groups;
}

ApolloOptions small(uint64_t seed = 5) {
  ApolloOptions o;
  o.rank = 8;
  o.update_proj_gap = 3;
  o.lr = 1e-2;
  o.seed = seed;
  return o;
}

// Step `step` of the comparisons: gradients of a scale that varies from step to step.
void step_with_grads(Optimizer& opt, int step) {
  testing::step_with_grads(opt, uint64_t(300 + step * 11), 0.1 * (1 + step % 3));
}

using testing::snapshot;

TEST(Apollo, ProjectsTheTargetMatricesOnTheirSmallerSide) {
  const Apollo opt(params(DType::f32), ApolloOptions{});
  EXPECT_TRUE(opt.projected(0));
  EXPECT_TRUE(opt.projected(1));
  EXPECT_FALSE(opt.projected(2));  // wte: not a target module
  EXPECT_FALSE(opt.projected(3));  // a target's bias: not 2-D
  // Rank 256 is the published default even above min(m, n), as in the reference.
  EXPECT_EQ(opt.state_specs(0)[0].shape, (Shape{96, 256}));
  EXPECT_EQ(opt.state_specs(1)[0].shape, (Shape{256, 70}));
  EXPECT_EQ(opt.state_specs(2)[0].shape, (Shape{50, 24}));
  ApolloOptions targets;
  targets.target_modules = {"wte", "mlp"};
  const Apollo wte(params(DType::f32), targets);
  EXPECT_FALSE(wte.projected(0));
  EXPECT_TRUE(wte.projected(1));
  EXPECT_TRUE(wte.projected(2));
}

TEST(Apollo, StateBytesAreTheLowRankMomentsAndTheLimitersNorm) {
  for (const ApolloOptions& o : {ApolloOptions{}, apollo_mini_options(), small()}) {
    const Apollo opt(params(DType::bf16), o);
    const int64_t r = o.rank;
    EXPECT_EQ(state_bytes(opt.state_specs(0)), 8 * r * 96 + 4);
    EXPECT_EQ(state_bytes(opt.state_specs(1)), 8 * r * 70 + 4);
    EXPECT_EQ(state_bytes(opt.state_specs(2)), 8 * 50 * 24);  // plain Adam's, f32 for bf16 too
    EXPECT_EQ(state_bytes(opt.state_specs(3)), 8 * 40);
  }
  // APOLLO-Mini on a 7B model's MLP weight: 88 KiB against AdamW's 344 MiB.
  std::vector<ParamGroup> big(1);
  big[0].params = {
      {"mlp.up_proj.weight", Tensor::empty({11008, 4096}, DType::bf16, Device::meta())}};
  const Apollo mini(big, apollo_mini_options());
  EXPECT_EQ(state_bytes(mini.state_specs(0)), 8 * 11008 + 4);
  EXPECT_LT(double(state_bytes(mini.state_specs(0))) / (11008.0 * 4096.0), 0.002);
  const Apollo apollo(big, ApolloOptions{});
  EXPECT_NEAR(double(state_bytes(apollo.state_specs(0))) / (11008.0 * 4096.0), 0.5, 0.001);
}

TEST(Apollo, ProjectionsAreSeededGaussiansAndNotState) {
  std::vector<ParamGroup> one(1);
  one[0].params = {{"attn.w", testing::random_tensor({4096, 512}, 1)}};
  ApolloOptions o;
  o.rank = 64;
  o.seed = 11;
  const Apollo opt(one, o);
  const Tensor p = opt.projection(0, 0, DType::f32);  // (64, 512)
  ASSERT_EQ(p.shape(), (Shape{64, 512}));
  double mean = 0, var = 0;
  for (double x : testing::to_f64(p)) {
    mean += x / double(p.numel());
    var += x * x / double(p.numel());
  }
  EXPECT_NEAR(mean, 0.0, 0.01 / 8);       // std 1/8, 32768 draws
  EXPECT_NEAR(var, 1.0 / 64, 0.05 / 64);  // variance 1/r
  EXPECT_EQ(testing::to_f64(opt.projection(0, 0, DType::f32)), testing::to_f64(p));
  EXPECT_NE(testing::to_f64(opt.projection(0, 1, DType::f32)), testing::to_f64(p));
  EXPECT_NE(apollo_projection_key(11, 0, 0), apollo_projection_key(11, 1, 0));
  EXPECT_NE(apollo_projection_key(11, 0, 0), apollo_projection_key(12, 0, 0));
  // In bf16: the same normals, rounded once.
  EXPECT_EQ(testing::to_f64(opt.projection(0, 0, DType::bf16)), testing::to_f64(p.to(DType::bf16)));
  for (const auto& [key, t] : opt.state_dict())
    EXPECT_THAT(key, ::testing::Not(HasSubstr("proj.")));
}

void expect_bitwise_resume(DType dtype, bool stochastic) {
  Apollo a(params(dtype), small(5));
  if (stochastic) a.set_stochastic_rounding(7);
  for (int s = 0; s < 4; ++s) step_with_grads(a, s);  // refreshes at steps 1 and 4
  std::vector<ParamGroup> copied = a.groups();
  for (auto& g : copied)
    for (auto& [name, p] : g.params) {
      p = p.clone();
      autograd::set_requires_grad(p);
    }
  Apollo b(std::move(copied), small(99));  // another seed: the state's wins
  if (stochastic) b.set_stochastic_rounding(7);
  std::map<std::string, Tensor> saved;
  for (const auto& [key, t] : a.state_dict()) saved[key] = t.clone();
  EXPECT_EQ(saved.at("projection_seed").item(), 5);
  b.load_state_dict(saved);
  EXPECT_EQ(b.options().seed, 5u);
  for (int s = 4; s < 9; ++s) {  // through the refreshes at steps 7
    step_with_grads(a, s);
    step_with_grads(b, s);
  }
  EXPECT_EQ(snapshot(a), snapshot(b));
}

TEST(Apollo, ResumeAcrossProjectionRefreshesIsBitwise) {
  expect_bitwise_resume(DType::f32, false);
  expect_bitwise_resume(DType::bf16, true);
}

TEST(Apollo, Bf16ParametersWithStochasticRoundingFollowTheF32Run) {
  Apollo f32(params(DType::f32), small());
  Apollo bf16(params(DType::bf16), small());
  bf16.set_stochastic_rounding(3);
  for (int s = 0; s < 5; ++s) {
    step_with_grads(f32, s);
    step_with_grads(bf16, s);
  }
  for (size_t g = 0; g < 2; ++g)
    for (size_t k = 0; k < f32.groups()[g].params.size(); ++k) {
      const auto want = testing::to_f64(f32.groups()[g].params[k].second);
      const auto got = testing::to_f64(bf16.groups()[g].params[k].second);
      EXPECT_TRUE(testing::all_close(got, want, 0.02, 0.02)) << f32.groups()[g].params[k].first;
    }
}

// Eight f32 steps, through the projection refreshes at steps 3 and 6, on cuda:0 and on the
// CPU from the same parameters and gradients: the card draws the same projections (a pure
// function of seed, parameter and refresh) and applies the same scaled update, so every
// parameter and state entry agrees to f32 rounding carried over eight steps.
TEST(Apollo, ACardFollowsTheCpuThroughProjectionRefreshes) {
  FG_SKIP_WITHOUT_CARD();
  Apollo cpu(params(DType::f32), small());
  Apollo card(params(DType::f32, Device::cuda(0)), small());
  for (int s = 0; s < 8; ++s) {
    step_with_grads(cpu, s);
    step_with_grads(card, s);
  }
  const auto want = snapshot(cpu), got = snapshot(card);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(testing::all_close(got[i], want[i], 1e-4, 1e-6)) << "entry " << i;
}

TEST(Apollo, AMetaStepAllocatesTheStateAndTheProjectionForTheStepOnly) {
  Apollo opt(params(DType::bf16, Device::meta()), small());
  for (const ParamGroup& g : opt.groups())
    for (const auto& [name, p] : g.params)
      autograd::ensure_meta(p).grad = Tensor::empty(p.shape(), p.dtype(), Device::meta());
  CachingAllocator& meta = allocator_for(Device::meta());
  const int64_t temporary = meta.by_category()[size_t(Category::temporary)].current;
  const uint64_t first = meta.total_events();
  opt.step();
  int64_t state = 0, declared = 0;
  std::set<int64_t> projection_sizes;
  for (const MemoryEvent& e : testing::allocations_since(first, Device::meta())) {
    if (e.category == Category::optimizer_state) state += int64_t(e.requested);
    if (label_text(e.label).ends_with(".apollo_projection")) {
      EXPECT_EQ(e.category, Category::temporary);
      projection_sizes.insert(int64_t(e.requested));
    }
  }
  for (size_t i = 0; i < opt.num_params(); ++i) declared += state_bytes(opt.state_specs(i));
  EXPECT_EQ(state, declared);
  // P (8, 40) and R (96, 8) of the tall weight, P (8, 24) and R (8, 70) of the wide one, in
  // bf16 (and the bf16 product's f32 staging), all freed by the end of the step.
  for (int64_t bytes : {2 * 8 * 40, 2 * 96 * 8, 2 * 8 * 24, 2 * 8 * 70})
    EXPECT_TRUE(projection_sizes.count(bytes)) << bytes;
  EXPECT_EQ(meta.by_category()[size_t(Category::temporary)].current, temporary);
}

TEST(Apollo, BadOptionsAreErrorsThatNameThem) {
  auto with = [](auto change) {
    ApolloOptions o;
    change(o);
    return o;
  };
  testing::expect_error([&] { Apollo(params(DType::f32), with([](auto& o) { o.rank = 0; })); },
                        "[apollo]", "rank must be in [1, 1048576], got 0");
  testing::expect_error(
      [&] { Apollo(params(DType::f32), with([](auto& o) { o.scale = -1; }), "apollo_mini"); },
      "[apollo_mini]", "scale must be > 0, got -1");
  testing::expect_error(
      [&] { Apollo(params(DType::f32), with([](auto& o) { o.update_proj_gap = 0; })); }, "[apollo]",
      "update_proj_gap must be >= 1");
  testing::expect_error(
      [&] { Apollo(params(DType::f32), with([](auto& o) { o.norm_growth_limit = 0.5; })); },
      "[apollo]", "norm_growth_limit must be >= 1");
  testing::expect_error(
      [&] {
        Apollo(params(DType::f32), with([](auto& o) { o.target_modules = {"q_proj", "v_proj"}; }));
      },
      "[apollo]",
      "no parameter is a 2-D weight of the target modules (q_proj, v_proj): nothing to project");
  Apollo opt(params(DType::f32), small());
  testing::expect_error(
      [&] {
        opt.load_state_dict({{"step", Tensor::full({}, 0, DType::i64)}});
      },
      "[apollo]", "load_state_dict: missing 'projection_seed'");
}

OptimizerExtras extras(std::string optim_args, std::string target_modules = "", uint64_t seed = 0) {
  return {std::move(optim_args), std::move(target_modules), seed};
}

TEST(Apollo, FactoryNamesOptimArgsAndTargetModules) {
  AdamWOptions o;
  o.lr = 3e-4;
  o.eps = 1e-8;
  const auto apollo = make_optimizer("apollo", params(DType::f32), o, true, extras("", "", 42));
  const auto& a = dynamic_cast<const Apollo&>(*apollo).options();
  EXPECT_EQ(apollo->name(), "apollo");
  EXPECT_EQ(apollo->lr(), 3e-4);
  EXPECT_EQ(a.eps, 1e-8);
  EXPECT_EQ(a.rank, 256);
  EXPECT_EQ(a.scale, 1.0);
  EXPECT_EQ(a.scaling, ApolloScaling::channel);
  EXPECT_EQ(a.update_proj_gap, 200);
  EXPECT_EQ(a.seed, 42u);
  const auto mini =
      make_optimizer("apollo_mini", params(DType::f32), o, true,
                     extras("update_proj_gap=50,proj=random,proj_type=std", "mlp,wte"));
  const auto& m = dynamic_cast<const Apollo&>(*mini).options();
  EXPECT_EQ(mini->name(), "apollo_mini");
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(m.scale, 128.0);
  EXPECT_EQ(m.scaling, ApolloScaling::tensor);
  EXPECT_EQ(m.update_proj_gap, 50);
  EXPECT_EQ(m.target_modules, (std::vector<std::string>{"mlp", "wte"}));
  const auto custom = make_optimizer("apollo", params(DType::f32), o, true,
                                     extras("rank=16,scale=2.5,scale_type=tensor"));
  const auto& c = dynamic_cast<const Apollo&>(*custom).options();
  EXPECT_EQ(c.rank, 16);
  EXPECT_EQ(c.scale, 2.5);
  EXPECT_EQ(c.scaling, ApolloScaling::tensor);

  auto error = [](const std::string& name, OptimizerExtras e) {
    return testing::error_of([&] { check_optimizer_extras(name, e); });
  };
  EXPECT_THAT(error("apollo", extras("rank=abc")),
              HasSubstr("[optim] --optim_args: rank must be an integer, got 'abc'"));
  EXPECT_THAT(error("apollo", extras("rank=0")),
              HasSubstr("[apollo] rank must be in [1, 1048576], got 0"));
  EXPECT_THAT(error("apollo_mini", extras("rnk=2")),
              HasSubstr("unknown key 'rnk' for apollo_mini (known: rank, scale, scale_type, "
                        "update_proj_gap, proj, proj_type)"));
  EXPECT_THAT(error("apollo", extras("rank=2,rank=3")), HasSubstr("rank is given twice"));
  EXPECT_THAT(error("apollo", extras("scale_type=row")),
              HasSubstr("scale_type must be channel or tensor, got 'row'"));
  EXPECT_THAT(error("apollo", extras("proj=svd")),
              HasSubstr("proj must be random (fitgrad has no other), got 'svd'"));
  EXPECT_THAT(error("apollo", extras("rank")), HasSubstr("'rank' is not key=value"));
  EXPECT_THAT(error("apollo", extras("", "attn,,mlp")),
              HasSubstr("--optim_target_modules 'attn,,mlp' has an empty name"));
  EXPECT_THAT(error("adamw_torch", extras("rank=2")),
              HasSubstr("[optim] --optim_args is read only by apollo, apollo_mini, galore_adamw, "
                        "galore_adamw_8bit and sgd, not by adamw_torch"));
  EXPECT_THAT(error("adafactor", extras("", "attn")),
              HasSubstr("--optim_target_modules is read only by apollo, apollo_mini, "
                        "galore_adamw and galore_adamw_8bit, not by adafactor"));
}

}  // namespace
}  // namespace fitgrad::optim
