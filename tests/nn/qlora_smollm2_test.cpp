// QLoRA's memory on the real SmolLM2-135M (issue 13; skips without the model, see
// tests/io/smollm2_file.h): built with LoRA r 16 on every linear layer over an NF4 base with
// double quantization and a 4-bit embedding, and loaded from the GGUF one tensor at a time,
// the ledger's parameter bytes of the base plus its quantized_weight bytes stay within 0.56
// bytes per base parameter; no base parameter trains; the load's peak stays below the model
// plus one decoded tensor; and through a forward and backward no two dequantized weights are
// alive at once, none larger than the largest layer's.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "io/gguf.h"
#include "nn/gguf_model.h"
#include "nn/lora.h"
#include "nn/nf4_embedding.h"
#include "nn/target_modules.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/io/smollm2_file.h"
#include "tests/tensor/memory/events_since.h"

namespace fitgrad::nn {
namespace {

int64_t category(CachingAllocator& a, Category c) { return a.by_category()[size_t(c)].current; }

TEST(QloraSmolLM2, TheBaseTakesAtMost056BytesPerParameter) {
  const std::string path = test::smollm2_path();
  if (!std::ifstream(path)) GTEST_SKIP() << test::smollm2_skip_message();
  const io::GgufFile file = io::GgufFile::open(path);
  const ops::FourBitOptions four_bit{quant::FourBitType::nf4, 64, true};
  auto targets = std::make_shared<TargetModules>(TargetModules::parse("all-linear"));
  BuildOptions o;
  o.linear_factory = targeted_factory(
      targets, lora_factory({16, 32, 0.0, false}, nf4_factory(four_bit)), nf4_factory(four_bit));
  o.quantized_embedding = four_bit;

  CachingAllocator& alloc = allocator_for(Device::cpu());
  alloc.empty_cache();
  const MemoryStats s0 = alloc.stats();
  const int64_t param0 = category(alloc, Category::parameter);
  const int64_t quant0 = category(alloc, Category::quantized_weight);
  const int64_t all0 = s0.allocated_bytes[kAllPools].current;
  alloc.reset_peak_stats();
  const auto model = load_gguf_model(file, o);
  mark_only_lora_as_trainable(*model);
  const MemoryStats s1 = alloc.stats();

  int64_t base_params = 0, lora_bytes = 0, trained = 0;
  for (const auto& [name, p] : model->named_parameters()) {
    const bool lora = name.find(".lora_") != std::string::npos;
    EXPECT_EQ(autograd::requires_grad(p), lora) << name;
    if (lora) {
      lora_bytes += int64_t(p.nbytes());
      trained += p.numel();
    } else {
      base_params += p.numel();
    }
  }
  int64_t largest_layer = 0;
  for (const auto& [p, m] : model->named_modules())
    if (const auto* q = dynamic_cast<const FourBitWeight*>(m)) {
      base_params += q->quantized().numel();
      largest_layer = std::max(largest_layer, 4 * q->quantized().numel());
    }
  EXPECT_EQ(base_params, 134515008);  // SmolLM2-135M
  EXPECT_EQ(trained, 4884480);
  const int64_t base_bytes = category(alloc, Category::parameter) - param0 - lora_bytes +
                             category(alloc, Category::quantized_weight) - quant0;
  const double per_param = double(base_bytes) / double(base_params);
  RecordProperty("base_bytes_per_parameter", std::to_string(per_param));
  EXPECT_LE(per_param, 0.56);
  // Note [Streaming loads]: the model plus one decoded tensor (the f32 embedding is the
  // largest), its quantized state built beside it, and rounding.
  const int64_t model_bytes = s1.allocated_bytes[kAllPools].current - all0;
  EXPECT_LE(s1.allocated_bytes[kAllPools].peak - all0,
            model_bytes + largest_layer + largest_layer / 4);

  // One forward and backward: the dequantized weights, one at a time.
  std::vector<int64_t> ids(17);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(100 + 37 * i);
  const Tensor all = Tensor::from_vector(ids, {1, 17}, DType::i64);
  const uint64_t first = alloc.total_events();
  autograd::backward(
      model->loss(all.narrow(1, 0, 16).contiguous(), all.narrow(1, 1, 16).contiguous()));
  std::map<std::string, uint64_t> dense;  // 4-bit layer weight label -> its f32 bytes
  for (const auto& [p, m] : model->named_modules())
    if (const auto* q = dynamic_cast<const FourBitWeight*>(m))
      dense[p + ".weight"] = uint64_t(4 * q->quantized().numel());
  std::map<uint64_t, uint64_t> live;
  size_t most = 0, seen = 0;
  for (const MemoryEvent& e : testing::events_since(first, Device::cpu())) {
    const auto it = dense.find(label_text(e.label));
    if (e.category != Category::temporary || it == dense.end() || e.requested != it->second)
      continue;
    if (e.kind == EventKind::alloc) {
      live[e.addr] = e.requested;
      ++seen;
    } else if (e.kind == EventKind::free) {
      live.erase(e.addr);
    }
    most = std::max(most, live.size());
  }
  EXPECT_GT(seen, dense.size());  // every layer in the forward, most again in the backward
  EXPECT_EQ(most, 1u);
}

}  // namespace
}  // namespace fitgrad::nn
