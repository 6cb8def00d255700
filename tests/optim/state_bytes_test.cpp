// Optimizer state bytes per parameter, read from the ledger (issue 12's memory table): a
// dry run on meta of one AdamW step of a 2-layer GPT-2 (53M parameters) requests 8.0 bytes
// of optimizer_state per parameter (two f32 moments); the blocks the allocator hands out
// for them are rounded up by its policy, by under 1% here.
#include <gtest/gtest.h>

#include "autograd/tape.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "optim/adamw.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/memory/events_since.h"

namespace fitgrad::optim {
namespace {

TEST(StateBytes, AdamWHoldsEightBytesPerParameter) {
  nn::ModelConfig cfg = nn::preset("gpt2");
  cfg.num_layers = 2;  // 2 layers of GPT-2 (124M): about 53M parameters
  const auto model = nn::build_model(cfg, {.device = Device::meta()});
  ASSERT_GE(model->num_parameters(), 10'000'000);
  AdamW opt(decay_groups(model->named_parameters(), 0.0), AdamWOptions{});
  CachingAllocator& meta = allocator_for(Device::meta());
  const int64_t before = meta.by_category()[size_t(Category::optimizer_state)].current;
  const Tensor ids = Tensor::empty({1, 16}, DType::i64, Device::meta());
  autograd::backward(model->loss(ids, ids));
  const uint64_t first = meta.total_events();
  opt.step();
  int64_t requested = 0;
  for (const MemoryEvent& e : testing::allocations_since(first, Device::meta()))
    if (e.category == Category::optimizer_state) requested += int64_t(e.requested);
  EXPECT_EQ(requested, 8 * model->num_parameters());
  const int64_t held = meta.by_category()[size_t(Category::optimizer_state)].current - before;
  EXPECT_GE(held, requested);
  EXPECT_LT(double(held) / double(requested), 1.01) << held << " bytes held";
}

}  // namespace
}  // namespace fitgrad::optim
