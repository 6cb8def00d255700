// Activation offload on the CPU (Notes [Activation offload] and [Offload overlaps with one
// block in flight] in train/activation_offload.h), where far memory is the cpu:1 arena and
// each copy runs as late as a copy stream could: saved tensors come back bit for bit in any
// order, the device holds at most one copy out during the forward and one prefetch during
// the backward, only activations move, and a checkpointed model's step under the hooks is
// the plain step exactly, also with the fused head, the tiled MLP and expandable segments.
#include "train/activation_offload.h"

#include <gtest/gtest.h>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "nn/decoder.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/scope.h"
#include "tensor/storage.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::train {
namespace {

namespace ag = fitgrad::autograd;

constexpr int64_t kBytes = 64 * 1024;  // each saved tensor: 16,384 f32

int64_t live(Device d) { return allocator_for(d).stats().allocated_bytes[kAllPools].current; }

Tensor activation(float first) {
  const CategoryScope category(Category::activation);
  Tensor t = Tensor::empty({128, 128}, DType::f32);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = first + float(i);
  return t;
}

class ActivationOffloadTest : public ::testing::Test {
 protected:
  // Saves four activations as a forward would, dropping each original after its save.
  void save_four() {
    for (int k = 0; k < 4; ++k) {
      const Tensor packed = hooks_.pack(activation(1000.f * float(k)));
      EXPECT_EQ(packed.device(), activation_far_memory(Device::cpu()));
      // The newest copy out holds its source; the one before was waited for.
      EXPECT_EQ(live(Device::cpu()) - base_, kBytes) << "after saving tensor " << k;
      saved_.push_back(packed);
    }
    offload_.end_forward();
    EXPECT_EQ(live(Device::cpu()) - base_, 0);
  }
  void expect_back(int k, const Tensor& t) {
    ASSERT_EQ(t.device(), Device::cpu());
    const float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      ASSERT_EQ(p[i], 1000.f * float(k) + float(i)) << "tensor " << k << ", element " << i;
  }

  const int64_t base_ = live(Device::cpu());
  ActivationOffload offload_{Device::cpu()};
  ag::SavedTensorHooks hooks_ = offload_.hooks();
  std::vector<Tensor> saved_;
};

TEST_F(ActivationOffloadTest, ReverseOrderComesBackExactWithOnePrefetchInFlight) {
  const int64_t far_before = live(activation_far_memory(Device::cpu()));
  save_four();
  EXPECT_EQ(live(activation_far_memory(Device::cpu())) - far_before, 4 * kBytes);
  for (int k = 3; k >= 0; --k) {
    const Tensor back = hooks_.unpack(saved_[size_t(k)]);
    saved_[size_t(k)] = Tensor();  // the node now holds the device tensor only
    expect_back(k, back);
    // The tensor returned, and the prefetch of the next one while there is one.
    EXPECT_EQ(live(Device::cpu()) - base_, (k > 0 ? 2 : 1) * kBytes) << "after unpacking " << k;
  }
  EXPECT_EQ(live(activation_far_memory(Device::cpu())), far_before);
}

TEST_F(ActivationOffloadTest, AnyOrderComesBackExact) {
  save_four();
  for (int k : {0, 2, 3, 1}) {
    expect_back(k, hooks_.unpack(saved_[size_t(k)]));
    saved_[size_t(k)] = Tensor();
  }
}

TEST_F(ActivationOffloadTest, OnlyTheDevicesActivationsMove) {
  const Tensor weight = Tensor::zeros({4});  // category other, not an activation
  EXPECT_EQ(hooks_.pack(weight).storage(), weight.storage());
  const Tensor meta = [] {
    const CategoryScope category(Category::activation);
    return Tensor::empty({4}, DType::f32, Device::meta());
  }();
  EXPECT_EQ(hooks_.pack(meta).storage(), meta.storage());
  EXPECT_EQ(hooks_.unpack(weight).storage(), weight.storage());
}

struct Step {
  double loss = 0;
  std::vector<std::vector<float>> grads;
};

// One step of `m`, with the activation offload's hooks in force during the forward.
Step step(const nn::CausalLM& m, const Tensor& ids, const Tensor& targets, bool offload) {
  m.zero_grad();
  Tensor loss;
  {
    std::optional<ActivationOffload> o;
    if (offload) o.emplace(ids.device());
    std::optional<ag::SavedTensorHooksScope> hooks;
    if (o) hooks.emplace(o->hooks());
    loss = m.loss(ids, targets);
    if (o) o->end_forward();
    hooks.reset();
    ag::backward(loss);
  }
  Step s{loss.item(), {}};
  for (const auto& [name, t] : m.trainable_parameters())
    s.grads.push_back(ag::grad(t).to_vector<float>());
  return s;
}

TEST(ActivationOffloadModel, TheOffloadedStepIsThePlainStepExactly) {
  nn::ModelConfig cfg = nn::preset("llama-tiny");
  cfg.num_layers = 3;
  const auto m = nn::build_model(cfg, {.seed = 6});
  const Tensor ids = testing::random_ids(2, 24, cfg.vocab_size, 61);
  const Tensor targets = testing::random_ids(2, 24, cfg.vocab_size, 62);
  m->set_checkpointing(ag::SegmentPlan::count(3));
  CachingAllocator& cpu = allocator_for(Device::cpu());
  for (const nn::RowChunking chunking : {nn::RowChunking{}, nn::RowChunking{true, 10, true, 3}})
    for (const AllocatorMode mode : {AllocatorMode::native, AllocatorMode::expandable}) {
      m->set_row_chunking(chunking);
      cpu.set_mode(mode);
      const Step plain = step(*m, ids, targets, false);
      CachingAllocator& far = allocator_for(activation_far_memory(Device::cpu()));
      far.reset_peak_stats();
      const int64_t far_before = far.stats().allocated_bytes[kAllPools].current;
      const Step offloaded = step(*m, ids, targets, true);
      // The three blocks' inputs (2 x 24 x 64 f32) and what the head and the loss save.
      EXPECT_GE(far.stats().allocated_bytes[kAllPools].peak - far_before, 3 * 2 * 24 * 64 * 4);
      EXPECT_EQ(offloaded.loss, plain.loss);
      EXPECT_EQ(offloaded.grads, plain.grads)
          << (chunking.fused_head_loss ? "chunked" : "plain")
          << (mode == AllocatorMode::expandable ? ", expandable" : "");
    }
  cpu.set_mode(AllocatorMode::native);
  m->set_row_chunking({});
  m->set_checkpointing(ag::SegmentPlan::none());
}

}  // namespace
}  // namespace fitgrad::train
