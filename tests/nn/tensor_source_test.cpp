// Streaming loads (Note [Streaming loads] in nn/tensor_source.h): Module::load and
// load_into_adapted check a whole source before reading any entry, and read, copy or
// quantize one entry at a time, so loading a QLoRA model from decoded tensors holds at most
// one of them beyond the model itself.
#include "nn/tensor_source.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "nn/config.h"
#include "nn/decoder.h"
#include "nn/lora.h"
#include "nn/nf4_linear.h"
#include "nn/peft_load.h"
#include "nn/target_modules.h"
#include "tensor/memory/caching_allocator.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::nn {
namespace {

// A source over `state` whose reads are fresh copies (as a decoder's are), counted.
TensorSource copying_source(const std::map<std::string, Tensor>& state, int* reads) {
  TensorSource s = TensorSource::of(state);
  s.read = [state, reads](const std::string& name) {
    ++*reads;
    return state.at(name).clone();
  };
  return s;
}

TEST(TensorSource, ABadEntryFailsTheLoadBeforeAnythingIsRead) {
  const auto model = build_model(preset("llama-tiny"), {.seed = 1});
  std::map<std::string, Tensor> state =
      build_model(preset("llama-tiny"), {.seed = 2})->state_dict();
  state["model.norm.weight"] = Tensor::zeros({63});
  int reads = 0;
  testing::expect_error([&] { model->load(copying_source(state, &reads)); }, "[load model]",
                        "model.norm.weight: expected shape (64,), got (63,)");
  EXPECT_EQ(reads, 0);
  state.erase("model.norm.weight");
  testing::expect_error([&] { load_into_adapted(*model, copying_source(state, &reads)); },
                        "[load model]", "1 missing");
  EXPECT_EQ(reads, 0);
}

TEST(TensorSource, AQloraLoadHoldsOneDecodedTensorAtATime) {
  ModelConfig cfg = preset("llama-tiny");
  cfg.tie_word_embeddings = true;
  const std::map<std::string, Tensor> state = build_model(cfg, {.seed = 3})->state_dict();
  int64_t largest = 0;
  for (const auto& [name, t] : state) largest = std::max(largest, int64_t(t.nbytes()));

  auto targets = std::make_shared<TargetModules>(TargetModules::parse("all-linear"));
  BuildOptions o;
  o.initialize = false;
  o.linear_factory = targeted_factory(targets, lora_factory({4, 8, 0.0, false}, nf4_factory({})));
  o.quantized_embedding = ops::FourBitOptions{};
  const auto model = build_model(cfg, o);
  CachingAllocator& alloc = allocator_for(Device::cpu());
  const int64_t before = alloc.stats().allocated_bytes[kAllPools].current;
  alloc.reset_peak_stats();
  int reads = 0;
  load_into_adapted(*model, copying_source(state, &reads));
  const MemoryStats s = alloc.stats();
  EXPECT_EQ(reads, int(state.size()));
  EXPECT_EQ(s.allocated_bytes[kAllPools].current, before);  // every decoded tensor freed
  // One decoded tensor, plus a new quantized state beside the one it replaces, plus the
  // quantizer's absmax temporary and allocator rounding.
  EXPECT_LE(s.allocated_bytes[kAllPools].peak - before, largest + largest / 4 + 8192);
  int64_t all = 0;
  for (const auto& [name, t] : state) all += int64_t(t.nbytes());
  EXPECT_LT(largest + largest / 4 + 8192, all / 2);  // so the bound means something
}

}  // namespace
}  // namespace fitgrad::nn
