// The NF4 Linear (nn/nf4_linear.h): its forward is the dense Linear of its dequantized
// weight, within NF4's error of the weight it quantized; its backward gives dX only (the
// weight gets no gradient, its bias is frozen); the weight lives in the ledger as
// quantized_weight at about 4.1 bits per element; a QLoRA model (LoRA over NF4 on every
// linear layer of a tiny Llama) dequantizes at most one layer's weight at a time through a
// forward and backward, and trains: ten AdamW steps on the adapters lower the loss while
// the quantized base stays byte for byte as it was.
#include "nn/nf4_linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "nn/lora.h"
#include "nn/target_modules.h"
#include "optim/adamw.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/matmul.h"
#include "tests/tensor/memory/events_since.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

using testing::to_f64;

std::unique_ptr<Nf4Linear> make_layer(int64_t in, int64_t out, bool bias = true) {
  BuildOptions o;
  o.seed = 5;
  BuildContext ctx(o);
  LinearOptions lo;
  lo.bias = bias;
  return std::make_unique<Nf4Linear>(LinearSpec{"m.proj", "proj", in, out, lo},
                                     ops::FourBitOptions{}, ctx);
}

TEST(Nf4Linear, ForwardIsTheDenseLinearOfItsDequantizedWeight) {
  const auto layer = make_layer(128, 96);
  const Tensor dense = testing::random_tensor({96, 128}, 3, DType::f32, -0.1, 0.1);
  layer->quantize_from(dense);
  // More rows than kMatvecRows: the dequantize-and-multiply route, exactly.
  const Tensor x = testing::random_tensor({kMatvecRows + 1, 128}, 4);
  autograd::NoGradGuard no_grad;
  const Tensor w = layer->dequantized(DType::f32);
  EXPECT_EQ(to_f64(layer->forward(x)), to_f64(ops::linear(x, w, layer->bias())));
  // One row (decoding): the nibbles are read directly (Note [Decoding reads the nibbles]),
  // the same product up to the order of the f32 sums.
  const Tensor row = x.narrow(0, 0, 1).contiguous();
  EXPECT_TRUE(testing::all_close(to_f64(layer->forward(row)),
                                 to_f64(ops::linear(row, w, layer->bias())), 1e-5, 1e-6));
  // NF4 keeps a weight within about a tenth of its block's absmax; the output error is
  // correspondingly small against the dense layer's.
  const auto want = to_f64(ops::linear(x, dense, layer->bias()));
  const auto got = to_f64(layer->forward(x));
  double err = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  EXPECT_LT(std::sqrt(err / norm), 0.15);
  EXPECT_GT(std::sqrt(err / norm), 1e-3);  // it is 4-bit
  // 4 bits, plus one u8 absmax code per 64 and an f32 per 256 x 64: about 4.13 bits each.
  const double bits = 8.0 * double(layer->quantized().nbytes()) / double(96 * 128);
  EXPECT_NEAR(bits, 4.13, 0.03);
}

TEST(Nf4Linear, BackwardGivesTheInputGradientOnly) {
  const auto layer = make_layer(64, 32);
  Tensor x = testing::random_tensor({3, 64}, 6);
  autograd::set_requires_grad(x);
  const Tensor r = testing::random_tensor({3, 32}, 7);
  autograd::backward(autograd::sum(autograd::mul(layer->forward(x), r)));
  const Tensor w = layer->dequantized(DType::f32);
  EXPECT_EQ(to_f64(autograd::grad(x)), to_f64(ops::matmul(r, w)));
  EXPECT_FALSE(autograd::grad(layer->bias()).defined());
  EXPECT_TRUE(layer->trainable_parameters().empty());
}

// nf4_paths: each NF4 layer's path and its weight's f32 bytes.
std::unique_ptr<CausalLM> qlora_model(std::map<std::string, uint64_t>* nf4_paths) {
  auto targets = std::make_shared<TargetModules>(TargetModules::all_linear());
  LoraConfig c;
  c.r = 8;
  c.alpha = 16;
  BuildOptions o{.seed = 8};
  o.linear_factory = targeted_factory(targets, lora_factory(c, nf4_factory({})));
  auto model = build_model(preset("llama-tiny"), o);
  mark_only_lora_as_trainable(*model);
  if (nf4_paths)
    for (const auto& [path, m] : model->named_modules())
      if (const auto* l = dynamic_cast<const Nf4Linear*>(m))
        (*nf4_paths)[path + ".weight"] = uint64_t(4 * l->in_features() * l->out_features());
  return model;
}

TEST(Nf4Linear, AQloraModelDequantizesOneLayerAtATime) {
  std::map<std::string, uint64_t> nf4;
  const auto model = qlora_model(&nf4);
  ASSERT_GE(nf4.size(), 10u);
  // 3 x 16 = 48 rows, so no activation has a weight's size.
  std::vector<int64_t> v(3 * 17);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 29 + 3) % 256);
  const Tensor all = Tensor::from_vector(v, {3, 17}, DType::i64);
  CachingAllocator& alloc = allocator_for(Device::cpu());
  const uint64_t first = alloc.total_events();
  autograd::backward(
      model->loss(all.narrow(1, 0, 16).contiguous(), all.narrow(1, 1, 16).contiguous()));
  // The dequantized weights: temporaries labelled "<NF4 layer>.weight", of that layer's
  // weight size. Never two alive at once.
  std::map<uint64_t, int64_t> live;  // address -> size
  int most = 0, seen = 0;
  for (const MemoryEvent& e : testing::events_since(first, Device::cpu())) {
    const auto layer = nf4.find(label_text(e.label));
    if (e.category != Category::temporary || layer == nf4.end()) continue;
    if (e.requested != layer->second) continue;
    if (e.kind == EventKind::alloc) {
      live[e.addr] = int64_t(e.size);
      ++seen;
    } else if (e.kind == EventKind::free) {
      live.erase(e.addr);
    }
    most = std::max(most, int(live.size()));
  }
  // Once in every forward, once in each backward that needs dX: all but layer 0's q, k and
  // v projections, whose input (the frozen embedding, normed) needs no gradient.
  EXPECT_EQ(seen, int(2 * nf4.size()) - 3);
  EXPECT_EQ(most, 1);
  for (const auto& [name, t] : model->named_parameters())
    EXPECT_EQ(autograd::grad(t).defined(), name.find(".lora_") != std::string::npos) << name;
}

TEST(Nf4Linear, QloraTrainsTheAdaptersAndLeavesTheBase) {
  const auto model = qlora_model(nullptr);
  std::vector<std::vector<double>> base_before;
  for (const auto& [path, m] : model->named_modules())
    if (const auto* l = dynamic_cast<const Nf4Linear*>(m))
      base_before.push_back(to_f64(l->quantized().packed.to(DType::f32)));
  optim::AdamW opt(optim::decay_groups(model->trainable_parameters(), 0.0), {.lr = 1e-2});
  std::vector<int64_t> v(4 * 17);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 37 + 11) % 97);
  const Tensor all = Tensor::from_vector(v, {4, 17}, DType::i64);
  const Tensor ids = all.narrow(1, 0, 16).contiguous(), targets = all.narrow(1, 1, 16).contiguous();
  double first = 0, last = 0;
  for (int s = 0; s < 10; ++s) {
    model->zero_grad();
    const Tensor loss = model->loss(ids, targets);
    (s == 0 ? first : last) = loss.item();
    autograd::backward(loss);
    opt.step();
  }
  EXPECT_LT(last, first - 0.05);
  size_t k = 0;
  for (const auto& [path, m] : model->named_modules()) {
    const auto* l = dynamic_cast<const Nf4Linear*>(m);
    if (!l) continue;
    EXPECT_EQ(to_f64(l->quantized().packed.to(DType::f32)), base_before[k++]) << path;
  }
  for (const auto& [key, t] : opt.state_dict()) {  // state for the adapters only
    if (key == "step") continue;
    EXPECT_NE(key.find(".lora_"), std::string::npos) << key;
  }
}

}  // namespace
}  // namespace fitgrad::nn
