// AdamW beyond the torch golden data: a resume through state_dict is bitwise the same as
// an uninterrupted run; a dry run on meta allocates exactly the two f32 states per
// parameter in the ledger, labelled by parameter; a bf16 parameter keeps f32 states and
// follows an fp64 reference loop; load_state_dict names each bad entry; decay_groups
// follows Hugging Face's rule.
#include "optim/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "autograd/variable.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using testing::random_tensor;

// Three parameters; "big" spans several of the kernel's parallel chunks and a partial tile.
std::vector<std::pair<std::string, Tensor>> make_params(uint64_t seed) {
  std::vector<std::pair<std::string, Tensor>> out = {{"big", random_tensor({3, 20001}, seed)},
                                                     {"w", random_tensor({4, 6}, seed + 1)},
                                                     {"b", random_tensor({6}, seed + 2)}};
  for (auto& [name, t] : out) autograd::set_requires_grad(t);
  return out;
}

// The gradients of step k: fixed random tensors, the same for every run.
void set_grads(const std::vector<std::pair<std::string, Tensor>>& params, int k) {
  uint64_t seed = 1000 + 10 * uint64_t(k);
  for (const auto& [name, p] : params)
    autograd::ensure_meta(p).grad = random_tensor(p.shape(), seed++);
}

AdamWOptions options() {
  AdamWOptions o;
  o.lr = 1e-2;
  o.beta2 = 0.95;
  return o;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(AdamW, ResumeFromStateDictIsBitwiseIdentical) {
  // Six straight steps, the lr changing every step.
  auto straight = make_params(1);
  AdamW a(decay_groups(straight, 0.1), options());
  for (int k = 0; k < 6; ++k) {
    set_grads(straight, k);
    a.set_lr(1e-2 / (k + 1));
    a.step();
  }
  // Three steps, a checkpoint (copies), a fresh optimizer over copies of the parameters.
  auto first = make_params(1);
  AdamW b(decay_groups(first, 0.1), options());
  for (int k = 0; k < 3; ++k) {
    set_grads(first, k);
    b.set_lr(1e-2 / (k + 1));
    b.step();
  }
  std::map<std::string, Tensor> saved;
  for (const auto& [key, t] : b.state_dict()) saved[key] = t.clone();
  EXPECT_EQ(saved.size(), 1u + 3 * 3);  // "step", and step + 2 states per parameter
  EXPECT_EQ(saved.at("step").item(), 3);
  EXPECT_EQ(saved.at("big.step").dtype(), DType::i64);
  std::vector<std::pair<std::string, Tensor>> resumed;
  for (const auto& [name, p] : first) {
    Tensor copy = p.clone();
    autograd::set_requires_grad(copy);
    resumed.emplace_back(name, copy);
  }
  AdamW c(decay_groups(resumed, 0.1), options());
  c.load_state_dict(saved);
  EXPECT_EQ(c.steps(), 3);
  for (int k = 3; k < 6; ++k) {
    set_grads(resumed, k);
    c.set_lr(1e-2 / (k + 1));
    c.step();
  }
  for (size_t i = 0; i < straight.size(); ++i)
    EXPECT_TRUE(bitwise_equal(resumed[i].second, straight[i].second)) << straight[i].first;
  const auto want = a.state_dict(), got = c.state_dict();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [key, t] : want) EXPECT_TRUE(bitwise_equal(got.at(key), t)) << key;
  // The resumed run really moved: its parameters differ from the checkpoint's.
  EXPECT_FALSE(bitwise_equal(resumed[1].second, first[1].second));
}

TEST(AdamW, StateDictAliasesTheState) {
  auto params = make_params(2);
  AdamW opt(decay_groups(params, 0.0), options());
  set_grads(params, 0);
  opt.step();
  Tensor m = opt.state_dict().at("w.exp_avg");
  opt.step();
  EXPECT_TRUE(bitwise_equal(m, opt.state_dict().at("w.exp_avg")));
  EXPECT_TRUE(m.shares_storage_with(opt.state_dict().at("w.exp_avg")));
}

TEST(AdamW, MetaStepAllocatesTwoF32StatesPerParameterAndComputesNothing) {
  CachingAllocator& meta = allocator_for(Device::meta());
  const auto state_bytes = [&] {
    return meta.by_category()[size_t(Category::optimizer_state)].current;
  };
  // Sizes that are multiples of 512 B, so rounded and requested bytes agree.
  std::vector<std::pair<std::string, Tensor>> params = {
      {"dry.wte.weight", Tensor::empty({1000, 768}, DType::f32, Device::meta())},
      {"dry.ln.weight", Tensor::empty({768}, DType::f32, Device::meta())},
      {"dry.lm_head.weight", Tensor::empty({256, 1024}, DType::bf16, Device::meta())}};
  int64_t f32_param_bytes = 0;
  for (const auto& [name, p] : params) {
    autograd::set_requires_grad(p);
    autograd::ensure_meta(p).grad = Tensor::empty(p.shape(), p.dtype(), Device::meta());
    f32_param_bytes += p.numel() * 4;
  }
  AdamW opt(decay_groups(params, 0.1), options());
  const int64_t before = state_bytes();
  EXPECT_EQ(opt.state_dict().size(), 1u);  // lazy: nothing before the first step
  opt.step();
  EXPECT_EQ(state_bytes() - before, 2 * f32_param_bytes);
  EXPECT_EQ(opt.steps(), 1);
  // Labelled "<param>.exp_avg" / "<param>.exp_avg_sq".
  std::map<std::string, int64_t> by_label;
  for (const auto& [id, bytes] : meta.by_label()) by_label[label_text(id)] = bytes;
  EXPECT_EQ(by_label["dry.wte.weight.exp_avg"], 1000 * 768 * 4);
  EXPECT_EQ(by_label["dry.lm_head.weight.exp_avg_sq"], 256 * 1024 * 4);
  // A second step allocates nothing more.
  opt.step();
  EXPECT_EQ(state_bytes() - before, 2 * f32_param_bytes);
  const auto state = opt.state_dict();
  EXPECT_EQ(state.at("dry.lm_head.weight.exp_avg").dtype(), DType::f32);
  EXPECT_EQ(state.at("dry.lm_head.weight.step").item(), 2);
}

TEST(AdamW, StatesAreAllocatedUnderTheirCategoryOutsideTheCallersScope) {
  CachingAllocator& cpu = allocator_for(Device::cpu());
  auto params = make_params(3);
  AdamW opt(decay_groups(params, 0.0), options());
  set_grads(params, 0);
  const int64_t before = cpu.by_category()[size_t(Category::optimizer_state)].current;
  {
    LabelScope outer("train");
    CategoryScope cat(Category::temporary);
    opt.step();
  }
  const int64_t grown = cpu.by_category()[size_t(Category::optimizer_state)].current - before;
  EXPECT_GE(grown, 2 * (3 * 20001 + 24 + 6) * 4);
  bool found = false;
  for (const auto& [id, bytes] : cpu.by_label()) found = found || label_text(id) == "w.exp_avg";
  EXPECT_TRUE(found);
}

// An fp64 AdamW on a bf16 parameter: states in double, the parameter rounded to bf16 after
// every step.
TEST(AdamW, Bf16ParameterKeepsF32StatesAndFollowsAnFp64Reference) {
  Tensor p = random_tensor({300}, 7, DType::bf16);
  autograd::set_requires_grad(p);
  std::vector<double> ref = testing::to_f64(p), m(300, 0.0), v(300, 0.0);
  AdamWOptions o = options();
  AdamW opt({ParamGroup{{{"p", p}}, 0.1}}, o);
  for (int k = 0; k < 4; ++k) {
    const Tensor g = random_tensor({300}, 50 + uint64_t(k), DType::bf16);
    autograd::ensure_meta(p).grad = g;
    opt.step();
    const auto gd = testing::to_f64(g);
    const double bc1 = 1 - std::pow(o.beta1, k + 1), bc2 = 1 - std::pow(o.beta2, k + 1);
    for (size_t i = 0; i < ref.size(); ++i) {
      ref[i] *= 1 - o.lr * 0.1;
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * gd[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * gd[i] * gd[i];
      ref[i] -= o.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + o.eps);
      ref[i] = double(float(BFloat16(float(ref[i]))));
    }
    // Within one bf16 ulp (2^-7 relative): f32 and f64 may round to neighbours.
    EXPECT_TRUE(testing::all_close(testing::to_f64(p), ref, 1.0 / 128, 1e-6)) << "step " << k;
  }
  EXPECT_EQ(p.dtype(), DType::bf16);
  EXPECT_EQ(opt.state_dict().at("p.exp_avg").dtype(), DType::f32);
  EXPECT_TRUE(testing::all_close(testing::to_f64(opt.state_dict().at("p.exp_avg")), m, 1e-5, 1e-7));
}

TEST(AdamW, ParameterWithoutGradientIsSkipped) {
  auto params = make_params(4);
  AdamW opt(decay_groups(params, 0.1), options());
  set_grads(params, 0);
  autograd::clear_grad(params[1].second);
  const Tensor before = params[1].second.clone();
  opt.step();
  EXPECT_TRUE(bitwise_equal(params[1].second, before));  // not even decayed
  const auto state = opt.state_dict();
  EXPECT_EQ(state.count("w.exp_avg"), 0u);
  EXPECT_EQ(state.at("b.step").item(), 1);
}

TEST(AdamW, LoadStateDictNamesEveryBadEntryAndLoadsNothing) {
  auto params = make_params(5);
  AdamW opt(decay_groups(params, 0.1), options());
  set_grads(params, 0);
  opt.step();
  const auto good = opt.state_dict();
  const std::string op = "[adamw] load_state_dict";

  auto missing = good;
  missing.erase("w.exp_avg");
  testing::expect_error([&] { opt.load_state_dict(missing); }, op, "missing 'w.exp_avg'");
  auto no_step = good;
  no_step.erase("step");
  testing::expect_error([&] { opt.load_state_dict(no_step); }, op, "missing 'step'");
  auto misshaped = good;
  misshaped["w.exp_avg_sq"] = Tensor::zeros({3});
  testing::expect_error([&] { opt.load_state_dict(misshaped); }, op,
                        "'w.exp_avg_sq' has shape (3), expected (4, 6)");
  auto unexpected = good;
  unexpected["v.exp_avg"] = Tensor::zeros({4, 6});
  testing::expect_error([&] { opt.load_state_dict(unexpected); }, op, "unexpected 'v.exp_avg'");
  auto bad_step = good;
  bad_step["b.step"] = Tensor::full({}, 1.5, DType::f32);
  testing::expect_error([&] { opt.load_state_dict(bad_step); }, op,
                        "'b.step' must be an i64 scalar");
  // Two problems at once: both named.
  auto two = missing;
  two["bogus"] = Tensor::zeros({1});
  const std::string what = testing::error_of([&] { opt.load_state_dict(two); });
  EXPECT_NE(what.find("missing 'w.exp_avg'"), std::string::npos) << what;
  EXPECT_NE(what.find("unexpected 'bogus'"), std::string::npos) << what;
  // Nothing was loaded by the failed calls: the state is the one step's.
  EXPECT_EQ(opt.steps(), 1);
  // A state dict without a parameter's entries leaves that parameter without state.
  auto partial = good;
  for (const char* k : {"w.step", "w.exp_avg", "w.exp_avg_sq"}) partial.erase(k);
  opt.load_state_dict(partial);
  EXPECT_EQ(opt.state_dict().count("w.exp_avg"), 0u);
  EXPECT_EQ(opt.state_dict().count("big.exp_avg"), 1u);
}

TEST(AdamW, ConstructorRejectsBadGroupsAndOptions) {
  Tensor p = random_tensor({2}, 1);
  testing::expect_error(
      [&] {
        AdamW({ParamGroup{{{"a", p}, {"a", p}}, 0.0}}, {});
      },
      "[adamw]", "parameter 'a' appears twice");
  testing::expect_error(
      [&] {
        AdamW({ParamGroup{{{"i", Tensor::zeros({2}, DType::i64)}}, 0.0}}, {});
      },
      "[adamw]", "parameter 'i' must be f32, f16 or bf16");
  AdamWOptions o;
  o.beta2 = 1.0;
  testing::expect_error(
      [&] {
        AdamW({ParamGroup{{{"a", p}}, 0.0}}, o);
      },
      "[adamw]", "beta2 must be in [0, 1)");
  testing::expect_error(
      [&] {
        AdamW({ParamGroup{{{"a", p}}, -1.0}}, {});
      },
      "[adamw]", "weight_decay must be >= 0");
}

TEST(AdamW, DecayGroupsExcludeEveryOneDimensionalParameter) {
  const std::vector<std::pair<std::string, Tensor>> named = {
      {"wte.weight", Tensor::zeros({10, 4})},
      {"h.0.ln_1.weight", Tensor::zeros({4})},
      {"h.0.ln_1.bias", Tensor::zeros({4})},
      {"h.0.attn.c_attn.weight", Tensor::zeros({4, 12})},
      {"h.0.attn.c_attn.bias", Tensor::zeros({12})}};
  const auto groups = decay_groups(named, 0.01);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].weight_decay, 0.01);
  EXPECT_EQ(groups[1].weight_decay, 0.0);
  std::vector<std::string> decayed, not_decayed;
  for (const auto& [n, t] : groups[0].params) decayed.push_back(n);
  for (const auto& [n, t] : groups[1].params) not_decayed.push_back(n);
  EXPECT_EQ(decayed, (std::vector<std::string>{"wte.weight", "h.0.attn.c_attn.weight"}));
  EXPECT_EQ(not_decayed,
            (std::vector<std::string>{"h.0.ln_1.weight", "h.0.ln_1.bias", "h.0.attn.c_attn.bias"}));
}

}  // namespace
}  // namespace fitgrad::optim
