// Optimizer offload (Note [Optimizer offload] in optim/offload.h): an AdamW or APOLLO step
// through host masters (gradients pulled, the masters stepped, the parameters pushed back)
// leaves gpt2-tiny's parameters and state bitwise equal to the ordinary step; on meta the masters
// and the state are planned as host memory (meta:1), so the device ledger holds no
// optimizer state; the CPU has nothing to offload, and the flag says so.
#include "optim/offload.h"

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
#include "train/train_args.h"

namespace fitgrad::optim {
namespace {

namespace ag = fitgrad::autograd;
using testing::to_f64;

std::map<std::string, std::vector<double>> trained(bool offloaded, bool apollo) {
  const nn::ModelConfig cfg = nn::preset("gpt2-tiny");
  const auto model = nn::build_model(cfg, {.seed = 9});
  std::unique_ptr<OptimizerOffload> offload;
  if (offloaded)
    offload = std::make_unique<OptimizerOffload>(model->named_parameters(), Device::cpu());
  const auto groups =
      decay_groups(offloaded ? offload->host_params() : model->named_parameters(), 0.1);
  ApolloOptions small;
  small.rank = 8;
  small.update_proj_gap = 2;
  std::unique_ptr<Optimizer> owned = apollo ? std::unique_ptr<Optimizer>(new Apollo(groups, small))
                                            : std::unique_ptr<Optimizer>(new AdamW(groups, {}));
  Optimizer& opt = *owned;
  std::mt19937_64 rng(4);
  for (int step = 0; step < 3; ++step) {
    std::vector<int64_t> ids(2 * 17);
    for (int64_t& id : ids) id = int64_t(rng() % uint64_t(cfg.vocab_size));
    const Tensor all = Tensor::from_vector(ids, {2, 17}, DType::i64);
    ag::backward(model->loss(all.narrow(1, 0, 16).contiguous(), all.narrow(1, 1, 16).contiguous()));
    if (offloaded) offload->pull_grads();
    opt.step();
    if (offloaded) offload->push_params();
    model->zero_grad();
    opt.zero_grad();
  }
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, p] : model->named_parameters()) out[name] = to_f64(p);
  for (const auto& [name, t] : opt.state_dict()) out["state." + name] = to_f64(t);
  return out;
}

TEST(OptimizerOffload, AStepThroughTheMastersIsTheOrdinaryStepBitForBit) {
  for (bool apollo : {false, true}) {
    SCOPED_TRACE(apollo ? "apollo" : "adamw");
    const auto plain = trained(false, apollo), offloaded = trained(true, apollo);
    ASSERT_EQ(plain.size(), offloaded.size());
    for (const auto& [name, values] : plain) {
      ASSERT_TRUE(offloaded.count(name)) << name;
      EXPECT_EQ(offloaded.at(name), values) << name;
    }
  }
}

TEST(OptimizerOffload, OnMetaTheMastersAndTheStateArePlannedAsHostMemory) {
  const Device meta = Device::meta(), host = offload_host(meta);
  EXPECT_EQ(host, (Device{DeviceType::meta, 1}));
  const nn::ModelConfig cfg = nn::preset("gpt2-tiny");
  const auto model = nn::build_model(cfg, {.device = meta, .seed = 9});
  CachingAllocator& device_alloc = allocator_for(meta);
  CachingAllocator& host_alloc = allocator_for(host);
  auto state_bytes = [](CachingAllocator& a) {
    return a.by_category()[size_t(Category::optimizer_state)].current;
  };
  const int64_t device_before = state_bytes(device_alloc), host_before = state_bytes(host_alloc);
  {
    OptimizerOffload offload(model->named_parameters(), host);
    AdamW opt(decay_groups(offload.host_params(), 0.0), AdamWOptions{});
    const Tensor ids = Tensor::empty({2, 16}, DType::i64, meta);
    ag::backward(model->loss(ids, ids));
    offload.pull_grads();
    opt.step();
    offload.push_params();
    // 4 bytes of master and 8 of AdamW's moments per parameter, each tensor its own block.
    int64_t want = 0;
    for (const auto& [name, p] : model->named_parameters())
      want += 3 * int64_t(round_request(size_t(p.numel()) * 4));
    EXPECT_EQ(state_bytes(host_alloc) - host_before, want);
    EXPECT_EQ(state_bytes(device_alloc) - device_before, 0) << "no optimizer state on the device";
    for (const auto& [name, p] : model->named_parameters())
      EXPECT_FALSE(ag::grad(p).defined()) << name << ": the device gradient was dropped";
  }
}

TEST(OptimizerOffload, OnMetaApolloPlansItsLowRankStateAndProjectionsOnTheHost) {
  const Device meta = Device::meta(), host = offload_host(meta);
  const auto model = nn::build_model(nn::preset("gpt2-tiny"), {.device = meta, .seed = 9});
  CachingAllocator& device_alloc = allocator_for(meta);
  CachingAllocator& host_alloc = allocator_for(host);
  auto category = [](CachingAllocator& a, Category c) {
    return a.by_category()[size_t(c)].current;
  };
  const int64_t device_before = category(device_alloc, Category::optimizer_state);
  const int64_t host_before = category(host_alloc, Category::optimizer_state);
  OptimizerOffload offload(model->named_parameters(), host);
  Apollo opt(decay_groups(offload.host_params(), 0.0), apollo_mini_options());
  const Tensor ids = Tensor::empty({2, 16}, DType::i64, meta);
  ag::backward(model->loss(ids, ids));
  offload.pull_grads();
  const uint64_t first = host_alloc.total_events();
  opt.step();
  offload.push_params();
  int64_t want = 0;  // the masters and the declared state, each tensor its own block
  for (size_t i = 0; i < opt.num_params(); ++i)
    for (const StateSpec& spec : opt.state_specs(i))
      want += int64_t(round_request(size_t(state_bytes({spec}))));
  for (const auto& [name, p] : model->named_parameters())
    want += int64_t(round_request(size_t(p.numel()) * 4));
  EXPECT_EQ(category(host_alloc, Category::optimizer_state) - host_before, want);
  EXPECT_EQ(category(device_alloc, Category::optimizer_state) - device_before, 0);
  bool projected_on_host = false;
  for (const MemoryEvent& e : host_alloc.events())
    projected_on_host |= e.seq >= first && label_text(e.label).ends_with(".apollo_projection");
  EXPECT_TRUE(projected_on_host);
}

TEST(OptimizerOffload, TheCpuHasNothingToOffload) {
  EXPECT_THAT([] { offload_host(Device::cpu()); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("the parameters are there")));
  train::TrainArgs a;
  a.data = "x.txt";
  a.offload_optimizer = true;
  EXPECT_THAT([&] { train::validate(a); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("--offload_optimizer")));
  a.device = "cuda:0";
  a.optim_in_backward = true;
  a.max_grad_norm = 0;
  EXPECT_THAT([&] { train::validate(a); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("--optim_in_backward")));
}

}  // namespace
}  // namespace fitgrad::optim
