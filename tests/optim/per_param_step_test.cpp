// Per-parameter steps (Note [Per-parameter steps] in optim/optimizer.h): AdamW and APOLLO
// stepped one parameter at a time from gradient hooks during backward (optimizer-in-backward,
// each gradient freed once applied) leave gpt2-tiny's parameters and state bitwise equal to a
// plain step(), while the gradient category's peak falls below the sum of all gradients.
// Misuse (a parameter stepped twice, step_param outside a step, an unknown name) is an error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "optim/adamw.h"
#include "optim/apollo.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

namespace ag = fitgrad::autograd;
using testing::to_f64;

struct Trained {
  std::map<std::string, std::vector<double>> params, state;
  int64_t gradient_peak = 0;
};

Trained two_steps(bool in_backward, bool apollo) {
  const nn::ModelConfig cfg = nn::preset("gpt2-tiny");
  const auto model = nn::build_model(cfg, {.seed = 9});
  ApolloOptions small;
  small.rank = 8;
  small.update_proj_gap = 1;  // a new projection at each step
  const auto groups = decay_groups(model->named_parameters(), 0.1);
  std::unique_ptr<Optimizer> owned = apollo ? std::unique_ptr<Optimizer>(new Apollo(groups, small))
                                            : std::unique_ptr<Optimizer>(new AdamW(groups, {}));
  Optimizer& opt = *owned;
  if (in_backward)
    for (const auto& [name, p] : model->named_parameters())
      // The hook holds the name, not the tensor: a tensor's own hook holding it would be a
      // reference cycle.
      ag::add_grad_hook(p, [&opt, name = name](const Tensor&, const ag::GradHookContext& ctx) {
        if (!ctx.is_last_micro_batch) return;
        opt.step_param(opt.index_of(name));
        for (const ParamGroup& g : opt.groups())
          for (const auto& [n, t] : g.params)
            if (n == name) ag::clear_grad(t);
      });
  CachingAllocator& cpu = allocator_for(Device::cpu());
  Trained out;
  std::mt19937_64 rng(4);
  for (int step = 0; step < 2; ++step) {
    std::vector<int64_t> ids(2 * 17);
    for (int64_t& id : ids) id = int64_t(rng() % uint64_t(cfg.vocab_size));
    const Tensor all = Tensor::from_vector(ids, {2, 17}, DType::i64);
    const Tensor x = all.narrow(1, 0, 16).contiguous(), y = all.narrow(1, 1, 16).contiguous();
    const Tensor loss = model->loss(x, y);
    const int64_t base = cpu.by_category()[size_t(Category::gradient)].current;
    cpu.reset_peak_stats();
    if (in_backward) opt.begin_step();
    ag::backward(loss);
    out.gradient_peak = cpu.by_category()[size_t(Category::gradient)].peak - base;
    if (in_backward)
      opt.end_step();
    else
      opt.step();
    model->zero_grad();
  }
  for (const auto& [name, p] : model->named_parameters()) out.params[name] = to_f64(p);
  for (const auto& [name, t] : opt.state_dict())
    if (t.dtype() == DType::f32) out.state[name] = to_f64(t);
  EXPECT_EQ(opt.steps(), 2);
  return out;
}

TEST(PerParamStep, OptimizerInBackwardEqualsAPlainStep) {
  for (bool apollo : {false, true}) {
    SCOPED_TRACE(apollo ? "apollo" : "adamw");
    const Trained plain = two_steps(false, apollo), hooked = two_steps(true, apollo);
    EXPECT_EQ(hooked.params, plain.params);
    EXPECT_EQ(hooked.state, plain.state);
    EXPECT_LT(hooked.gradient_peak, plain.gradient_peak / 2)
        << "hooked " << hooked.gradient_peak << " B, plain " << plain.gradient_peak << " B";
  }
}

TEST(PerParamStep, MisuseIsAnError) {
  Tensor p = Tensor::zeros({3});
  ag::set_requires_grad(p);
  AdamW opt({{{{"w", p}}, 0.0}}, AdamWOptions{});
  using ::testing::HasSubstr;
  EXPECT_THAT(testing::error_of([&] { opt.step_param(0); }), HasSubstr("outside begin_step"));
  EXPECT_THAT(testing::error_of([&] { opt.index_of("v"); }), HasSubstr("no parameter named 'v'"));
  opt.begin_step();
  opt.step_param(0);
  EXPECT_THAT(testing::error_of([&] { opt.step_param(0); }), HasSubstr("'w' was already stepped"));
  EXPECT_THAT(testing::error_of([&] { opt.step_param(1); }), HasSubstr("index 1 is out of range"));
  EXPECT_THAT(testing::error_of([&] { opt.begin_step(); }), HasSubstr("was not ended"));
  opt.end_step();
  EXPECT_EQ(opt.steps(), 1);
  EXPECT_THAT(testing::error_of([&] { opt.end_step(); }), HasSubstr("end_step without begin_step"));
  EXPECT_THAT(testing::error_of([&] { opt.skip_param(0); }), HasSubstr("outside begin_step"));
}

// Note [Sharded steps]: two "ranks" that each update one of two bf16 parameters with
// stochastic rounding and skip the other end with exactly one process's parameters, state
// and rounding stream, for two steps; the skipping rank allocates no state for the other.
TEST(PerParamStep, SkippedParametersKeepTheRoundingStream) {
  auto make = [] {
    std::vector<std::pair<std::string, Tensor>> ps = {
        {"a", testing::random_tensor({5, 7}, 1).to(DType::bf16)},
        {"b", testing::random_tensor({300}, 2).to(DType::bf16)}};
    for (auto& [name, t] : ps) ag::set_requires_grad(t);
    return ps;
  };
  auto grads = [](const std::vector<std::pair<std::string, Tensor>>& ps, int step) {
    uint64_t seed = 100 + 10 * uint64_t(step);
    for (const auto& [name, p] : ps)
      ag::ensure_meta(p).grad = testing::random_tensor(p.shape(), seed++).to(DType::bf16);
  };
  const auto one = make(), first = make(), second = make();
  AdamW whole({{one, 0.1}}, AdamWOptions{}), rank0({{first, 0.1}}, AdamWOptions{}),
      rank1({{second, 0.1}}, AdamWOptions{});
  for (AdamW* o : {&whole, &rank0, &rank1}) o->set_stochastic_rounding(7);
  for (int step = 0; step < 2; ++step) {
    grads(one, step);
    grads(first, step);
    grads(second, step);
    whole.step();
    rank0.begin_step();
    rank0.step_param(0);
    rank0.skip_param(1);
    rank0.end_step();
    rank1.begin_step();
    rank1.skip_param(0);
    rank1.step_param(1);
    rank1.end_step();
  }
  EXPECT_EQ(to_f64(first[0].second), to_f64(one[0].second));
  EXPECT_EQ(to_f64(second[1].second), to_f64(one[1].second));
  EXPECT_NE(to_f64(first[1].second), to_f64(one[1].second));  // not vacuous: b moved
  const auto w = whole.state_dict(), s0 = rank0.state_dict(), s1 = rank1.state_dict();
  for (const auto* s : {&s0, &s1}) {
    EXPECT_EQ(s->at("stochastic_rounding.offset").item(),
              w.at("stochastic_rounding.offset").item());
    EXPECT_EQ(s->at("step").item(), 2);
  }
  EXPECT_EQ(to_f64(s0.at("a.exp_avg")), to_f64(w.at("a.exp_avg")));
  EXPECT_EQ(to_f64(s1.at("b.exp_avg_sq")), to_f64(w.at("b.exp_avg_sq")));
  EXPECT_FALSE(s0.count("b.exp_avg"));
  EXPECT_FALSE(s1.count("a.exp_avg"));
}

}  // namespace
}  // namespace fitgrad::optim
