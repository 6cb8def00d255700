// Optimizer state bytes per parameter, read from the ledger (issue 12's memory table): a
// dry run on meta of one step of a 2-layer GPT-2 (53M parameters). AdamW requests exactly
// 8.0 bytes of optimizer_state per parameter (two f32 moments); Adam8bit 2.03 (two u8 codes
// and two f32 absmaxes per 256 values; the few small tensors keep f32 state); both
// Adafactors under 0.1 on the weight matrices (a row and a column vector each). The blocks
// the allocator hands out are rounded up by its policy: under 1% for AdamW, 1.2% for
// Adam8bit's many small absmax blocks.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>

#include "autograd/tape.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "optim/adafactor.h"
#include "optim/adam8bit.h"
#include "optim/adamw.h"
#include "optim/apollo.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tests/tensor/memory/events_since.h"

namespace fitgrad::optim {
namespace {

struct Measured {
  int64_t params = 0, matrix_params = 0;
  int64_t requested = 0, matrix_requested = 0;  // optimizer_state bytes asked for
  int64_t held = 0;                             // the category's growth in the ledger
  std::map<std::string, int64_t> requested_by_param;
};

using Make = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;

Measured measure(const Make& make) {
  nn::ModelConfig cfg = nn::preset("gpt2");
  cfg.num_layers = 2;  // 2 layers of GPT-2 (124M): about 53M parameters
  const auto model = nn::build_model(cfg, {.device = Device::meta()});
  auto opt = make(decay_groups(model->named_parameters(), 0.0));
  Measured m;
  m.params = model->num_parameters();
  std::set<std::string> matrices;
  for (const auto& [name, p] : model->named_parameters())
    if (p.dim() >= 2) {
      m.matrix_params += p.numel();
      matrices.insert(name);
    }
  CachingAllocator& meta = allocator_for(Device::meta());
  const int64_t before = meta.by_category()[size_t(Category::optimizer_state)].current;
  const Tensor ids = Tensor::empty({1, 16}, DType::i64, Device::meta());
  autograd::backward(model->loss(ids, ids));
  const uint64_t first = meta.total_events();
  opt->step();
  for (const MemoryEvent& e : testing::allocations_since(first, Device::meta())) {
    if (e.category != Category::optimizer_state) continue;
    m.requested += int64_t(e.requested);
    const std::string& label = label_text(e.label);
    const std::string param = label.substr(0, label.rfind('.'));
    if (matrices.count(param)) m.matrix_requested += int64_t(e.requested);
    m.requested_by_param[param] += int64_t(e.requested);
  }
  m.held = meta.by_category()[size_t(Category::optimizer_state)].current - before;
  return m;
}

TEST(StateBytes, AdamWHoldsEightBytesPerParameter) {
  const Measured m = measure([](std::vector<ParamGroup> g) {
    return std::make_unique<AdamW>(std::move(g), AdamWOptions{});
  });
  ASSERT_GE(m.params, 10'000'000);
  EXPECT_EQ(m.requested, 8 * m.params);
  EXPECT_GE(m.held, m.requested);
  EXPECT_LT(double(m.held) / double(m.requested), 1.01) << m.held << " bytes held";
}

TEST(StateBytes, Adam8bitHoldsTwoPointZeroThreeBytesPerParameter) {
  const Measured m = measure([](std::vector<ParamGroup> g) {
    return std::make_unique<Adam8bit>(std::move(g), Adam8bitOptions{});
  });
  const double per_param = double(m.requested) / double(m.params);
  EXPECT_NEAR(per_param, 2.03, 0.02);
  // The absmax vectors are small blocks, which the policy rounds to 512 bytes: 1.2% here.
  EXPECT_LT(double(m.held) / double(m.requested), 1.02) << m.held << " bytes held";
  std::printf("adam8bit: %.4f bytes per parameter requested, %.4f held\n", per_param,
              double(m.held) / double(m.params));
}

TEST(StateBytes, AdafactorHoldsUnderATenthOfABytePerMatrixParameter) {
  for (const auto& [what, make] :
       {std::pair<const char*, Make>{"torch",
                                     [](std::vector<ParamGroup> g) {
                                       return std::make_unique<Adafactor>(std::move(g),
                                                                          AdafactorOptions{});
                                     }},
        std::pair<const char*, Make>{"hf", [](std::vector<ParamGroup> g) {
                                       return std::make_unique<AdafactorHF>(std::move(g),
                                                                            AdafactorHFOptions{});
                                     }}}) {
    const Measured m = measure(make);
    EXPECT_LT(double(m.matrix_requested) / double(m.matrix_params), 0.1) << what;
    EXPECT_GT(m.matrix_requested, 0) << what;
  }
}

// APOLLO requests exactly its declared state: for each projected weight (m, n) of the blocks,
// two f32 (max(m, n), r) moments and the limiter's f32 norm, 8 r max(m, n) + 4 bytes; AdamW's
// 8 bytes per element for everything else (the embeddings, the norms). On GPT-2's 768-wide
// blocks that is 2048 / 768 = 2.67 bytes per projected weight at rank 256, and 0.01 at
// APOLLO-Mini's rank 1.
TEST(StateBytes, ApolloHoldsItsLowRankMomentsAndMiniAlmostNothing) {
  for (const auto& [rank, options] :
       {std::pair{256, ApolloOptions{}}, std::pair{1, apollo_mini_options()}}) {
    std::map<std::string, int64_t> want;
    int64_t projected_params = 0, projected_want = 0;
    const Measured m = measure([&, &options = options, rank = rank](std::vector<ParamGroup> g) {
      auto opt = std::make_unique<Apollo>(std::move(g), options);
      size_t i = 0;
      for (const ParamGroup& group : opt->groups())
        for (const auto& [name, p] : group.params) {
          want[name] = state_bytes(opt->state_specs(i));
          if (opt->projected(i)) {
            const int64_t wide = std::max(p.shape()[0], p.shape()[1]);
            EXPECT_EQ(want[name], 8 * rank * wide + 4) << name;
            projected_params += p.numel();
            projected_want += want[name];
          } else {
            EXPECT_EQ(want[name], 8 * p.numel()) << name;
          }
          ++i;
        }
      return opt;
    });
    EXPECT_EQ(m.requested_by_param, want);
    const double per_projected = double(projected_want) / double(projected_params);
    EXPECT_NEAR(per_projected, rank == 256 ? 2048.0 / 768 : 8.0 / 768, 0.01) << rank;
    std::printf("apollo rank %d: %.4f bytes per projected weight, %.4f per parameter\n", rank,
                per_projected, double(m.requested) / double(m.params));
  }
}

}  // namespace
}  // namespace fitgrad::optim
