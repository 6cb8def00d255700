// GaLore beyond its golden data (tests/optim/galore_golden_test.cpp; which weights are targets
// is tests/optim/target_modules_test.cpp's): each target's state bytes equal galore.h's
// formula, for both variants, both projection sides and a rank that clamps; a dry run on meta
// allocates exactly that state and every temporary of the real step, labelled; a resume
// through state_dict across a projection refresh is bitwise the uninterrupted run; the
// per-parameter step (optimizer-in-backward) is bitwise step(); bad options and a non-finite
// gradient at a refresh give errors naming them, where the 8-bit variant skips the parameter.
#include "optim/galore.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "autograd/variable.h"
#include "optim/adam8bit.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::optim {
namespace {

using testing::random_tensor;
using Named = std::vector<std::pair<std::string, Tensor>>;

// A right projection (m >= n), a left one whose 8-bit moments are quantized (16 x 300), a
// rank that clamps (6 < 16), and two non-targets.
Named make_params(uint64_t seed, Device device = Device::cpu()) {
  Named out = {{"h.0.attn.c_attn.weight", random_tensor({40, 24}, seed)},
               {"h.0.mlp.c_proj.weight", random_tensor({24, 300}, seed + 1)},
               {"h.0.mlp.c_fc.weight", random_tensor({6, 20}, seed + 2)},
               {"wte.weight", random_tensor({10, 24}, seed + 3)},
               {"h.0.ln_1.weight", random_tensor({24}, seed + 4)}};
  for (auto& [name, t] : out) {
    t = t.to(device);
    autograd::set_requires_grad(t);
  }
  return out;
}

void set_grads(const Named& params, int k) {
  uint64_t seed = 500 + 10 * uint64_t(k);
  for (const auto& [name, p] : params)
    autograd::ensure_meta(p).grad = random_tensor(p.shape(), seed++, DType::f32, -0.1, 0.1);
}

GaLoreOptions galore_options() {
  GaLoreOptions g;
  g.rank = 16;
  g.update_proj_gap = 2;
  return g;
}

AdamWOptions adam_options() {
  AdamWOptions o;
  o.lr = 1e-2;
  return o;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

TEST(GaLore, StateBytesFollowTheFormula) {
  const Named params = make_params(1);
  for (bool eight_bit : {false, true}) {
    const GaLore opt(decay_groups(params, 0.0), adam_options(), galore_options(), eight_bit);
    // f32: 8 r max(m, n) + 4 r min(m, n); 8-bit: 2 r max + 8 ceil(r max / 256) + 4 r min
    // (f32 states below 4096 low-rank elements); others as AdamW or Adam8bit.
    auto low_rank = [&](int64_t r, int64_t big, int64_t small) -> int64_t {
      const int64_t low = r * big;
      const int64_t moments =
          !eight_bit || low < 4096 ? 8 * low : 2 * low + 8 * ((low + 255) / 256);
      return moments + 4 * r * small;
    };
    std::map<std::string, int64_t> want = {{"h.0.attn.c_attn.weight", low_rank(16, 40, 24)},
                                           {"h.0.mlp.c_proj.weight", low_rank(16, 300, 24)},
                                           {"h.0.mlp.c_fc.weight", low_rank(6, 20, 6)},
                                           {"wte.weight", eight_bit ? 8 * 240 : 8 * 240},
                                           {"h.0.ln_1.weight", 8 * 24}};
    for (size_t i = 0; i < opt.num_params(); ++i) {
      const std::string& name = opt.groups()[i < 4 ? 0 : 1].params[i < 4 ? i : 0].first;
      EXPECT_EQ(state_bytes(opt.state_specs(i)), want.at(name)) << name << " 8-bit " << eight_bit;
      EXPECT_EQ(opt.projected(i),
                name.find("attn") != std::string::npos || name.find("mlp") != std::string::npos)
          << name;
    }
    EXPECT_EQ(opt.state_specs(1)[0].dtype, eight_bit ? DType::u8 : DType::f32);
    EXPECT_EQ(opt.state_specs(1).back().name, "projection");
    EXPECT_EQ(opt.state_specs(1).back().shape, (Shape{24, 16}));  // left: P (m, r)
    EXPECT_EQ(opt.state_specs(0).back().shape, (Shape{16, 24}));  // right: Q (r, n)
  }
}

TEST(GaLore, ResumeAcrossARefreshIsBitwiseIdentical) {
  for (bool eight_bit : {false, true}) {
    SCOPED_TRACE(eight_bit ? "galore_adamw_8bit" : "galore_adamw");
    const Named straight = make_params(2);
    GaLore a(decay_groups(straight, 0.1), adam_options(), galore_options(), eight_bit);
    for (int k = 0; k < 5; ++k) {
      set_grads(straight, k);
      a.step();
    }
    const Named first = make_params(2);
    GaLore b(decay_groups(first, 0.1), adam_options(), galore_options(), eight_bit);
    for (int k = 0; k < 3; ++k) {  // refreshes at steps 0 and 2; the next at 4
      set_grads(first, k);
      b.step();
    }
    std::map<std::string, Tensor> saved;
    for (const auto& [key, t] : b.state_dict()) saved[key] = t.clone();
    EXPECT_TRUE(saved.count("h.0.mlp.c_proj.weight.projection"));
    Named resumed;
    for (const auto& [name, p] : first) {
      Tensor copy = p.clone();
      autograd::set_requires_grad(copy);
      resumed.emplace_back(name, copy);
    }
    GaLore c(decay_groups(resumed, 0.1), adam_options(), galore_options(), eight_bit);
    c.load_state_dict(saved);
    for (int k = 3; k < 5; ++k) {
      set_grads(resumed, k);
      c.step();
    }
    for (size_t i = 0; i < straight.size(); ++i)
      EXPECT_TRUE(bitwise_equal(resumed[i].second, straight[i].second)) << straight[i].first;
    for (const auto& [key, t] : a.state_dict())
      EXPECT_TRUE(bitwise_equal(c.state_dict().at(key), t)) << key;
  }
}

TEST(GaLore, PerParameterStepsAreBitwiseStep) {
  const Named x = make_params(3), y = make_params(3);
  GaLore a(decay_groups(x, 0.1), adam_options(), galore_options(), false);
  GaLore b(decay_groups(y, 0.1), adam_options(), galore_options(), false);
  for (int k = 0; k < 3; ++k) {
    set_grads(x, k);
    set_grads(y, k);
    a.step();
    b.begin_step();
    for (size_t i = b.num_params(); i-- > 0;) b.step_param(i);  // backward's order
    b.end_step();
  }
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_TRUE(bitwise_equal(x[i].second, y[i].second)) << x[i].first;
}

// The update moves a target only within the projection's column (or row) space: for a left
// projection P, (I - P P^T)(W' - W (1 - lr wd)) = 0.
TEST(GaLore, TheUpdateOfALeftTargetLiesInItsProjection) {
  const Named params = make_params(4);
  GaLore opt({ParamGroup{{params[1]}, 0.0}}, adam_options(), galore_options(), false);
  const Tensor before = params[1].second.clone();
  set_grads(params, 0);
  opt.step();
  const Tensor p = opt.state_dict().at("h.0.mlp.c_proj.weight.projection");  // (24, 16)
  const Tensor w = params[1].second;
  double outside = 0, total = 0;
  for (int64_t j = 0; j < 300; ++j) {
    std::vector<double> d(24), coef(16, 0.0);
    for (int64_t i = 0; i < 24; ++i)
      d[size_t(i)] =
          double(w.data<float>()[i * 300 + j]) - double(before.data<float>()[i * 300 + j]);
    for (int64_t c = 0; c < 16; ++c)
      for (int64_t i = 0; i < 24; ++i)
        coef[size_t(c)] += double(p.data<float>()[i * 16 + c]) * d[size_t(i)];
    for (int64_t i = 0; i < 24; ++i) {
      double in = 0;
      for (int64_t c = 0; c < 16; ++c) in += double(p.data<float>()[i * 16 + c]) * coef[size_t(c)];
      outside += (d[size_t(i)] - in) * (d[size_t(i)] - in);
      total += d[size_t(i)] * d[size_t(i)];
    }
  }
  EXPECT_GT(total, 0);
  EXPECT_LT(std::sqrt(outside / total), 1e-5);
}

TEST(GaLore, MetaStepAllocatesTheStateAndTheRealStepsTemporaries) {
  CachingAllocator& meta = allocator_for(Device::meta());
  CachingAllocator& cpu = allocator_for(Device::cpu());
  auto run = [](CachingAllocator& alloc, Device device) {
    const Named params = make_params(5, device);
    for (const auto& [name, p] : params)
      autograd::ensure_meta(p).grad = random_tensor(p.shape(), 9).to(device);
    GaLore opt(decay_groups(params, 0.1), adam_options(), galore_options(), true);
    const uint64_t first = alloc.total_events();
    opt.step();
    opt.step();
    std::vector<std::tuple<EventKind, uint64_t, Category, std::string>> seen;
    for (const MemoryEvent& e : alloc.events())
      if (e.seq >= first && (e.kind == EventKind::alloc || e.kind == EventKind::free))
        seen.emplace_back(e.kind, e.requested, e.category, label_text(e.label));
    int64_t declared = 0;
    for (size_t i = 0; i < opt.num_params(); ++i) declared += state_bytes(opt.state_specs(i));
    return std::pair{seen, declared};
  };
  const auto [on_cpu, declared] = run(cpu, Device::cpu());
  const auto [on_meta, declared_meta] = run(meta, Device::meta());
  EXPECT_EQ(on_meta, on_cpu);
  int64_t state = 0;
  bool temporary = false;
  for (const auto& [kind, requested, category, label] : on_meta) {
    if (kind == EventKind::alloc && category == Category::optimizer_state)
      state += int64_t(requested);
    temporary |= category == Category::temporary && label == "h.0.mlp.c_proj.weight.galore";
  }
  EXPECT_EQ(state, declared_meta);
  EXPECT_TRUE(temporary);
}

TEST(GaLore, BadOptionsAndNoTargetAreErrorsNamingThem) {
  const Named params = make_params(6);
  auto make = [&](GaLoreOptions g) {
    return [params, g] { GaLore(decay_groups(params, 0.0), adam_options(), g, false); };
  };
  GaLoreOptions g = galore_options();
  g.rank = 0;
  testing::expect_error(make(g), "[galore_adamw]", "rank must be in [1, 1048576], got 0");
  g = galore_options();
  g.update_proj_gap = 0;
  testing::expect_error(make(g), "[galore_adamw]", "update_proj_gap must be >= 1");
  g = galore_options();
  g.scale = -1;
  testing::expect_error(make(g), "[galore_adamw]", "scale must be a finite number > 0");
  g = galore_options();
  g.target_modules = {"q_proj"};
  testing::expect_error(make(g), "[galore_adamw]", "target_modules 'q_proj' names no 2-D weight");
}

TEST(GaLore, ANonFiniteGradientAtARefreshThrowsAndTheEightBitVariantSkips) {
  for (bool eight_bit : {false, true}) {
    const Named params = make_params(7);
    GaLore opt(decay_groups(params, 0.0), adam_options(), galore_options(), eight_bit);
    set_grads(params, 0);
    autograd::grad(params[0].second).data<float>()[5] = std::nanf("");
    const Tensor before = params[0].second.clone();
    if (!eight_bit) {
      testing::expect_error([&] { opt.step(); }, "[galore_adamw]",
                            "the gradient of 'h.0.attn.c_attn.weight' has non-finite values");
      continue;
    }
    opt.step();
    EXPECT_TRUE(bitwise_equal(params[0].second, before));
    EXPECT_FALSE(opt.state_dict().count("h.0.attn.c_attn.weight.step"));
  }
}

}  // namespace
}  // namespace fitgrad::optim
