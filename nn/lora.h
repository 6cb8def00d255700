// LoRA (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language Models") with PEFT's
// semantics: a frozen base Linear plus a trainable low-rank update,
//   y = base(x) + scaling * lora_B(lora_A(dropout(x))),  A (r, in), B (out, r),
// scaling = alpha / r, or alpha / sqrt(r) with rsLoRA (Kalajdzievski 2023). PEFT's
// initialisation: A is Kaiming-uniform with a = sqrt(5) (U(-1/sqrt(in), 1/sqrt(in))) and B
// is zeros, so a fresh adapter leaves the model's outputs unchanged.
//
// Note [LoRA names]
// The layer keeps PEFT's module layout: the base is the child "base_layer" (its weight is
// "<path>.base_layer.weight"), the factors are bias-free Linear children "lora_A" and
// "lora_B" ("<path>.lora_A.weight", "<path>.lora_B.weight"). PEFT's in-memory names carry an
// adapter name ("lora_A.default.weight"); its saved adapter drops it and prefixes
// "base_model.model.", which is what save_lora_adapter writes (nn/lora_adapter.h).
#pragma once

#include <cmath>

#include "nn/layers.h"

namespace fitgrad::nn {

struct LoraConfig {
  int64_t r = 8;
  double alpha = 8.0;
  double dropout = 0.0;
  bool use_rslora = false;
  double scaling() const { return use_rslora ? alpha / std::sqrt(double(r)) : alpha / double(r); }
};

class LoraLinear final : public LinearLayer {
 public:
  // The base is what `base` makes of `spec` (a dense Linear when empty), frozen.
  LoraLinear(const LinearSpec& spec, const LoraConfig& config, BuildContext& ctx,
             const LinearFactory& base = {});

  Tensor forward(const Tensor& x) const override;  // (..., in) -> (..., out)

  // Merging adds scaling * B A into the base's weight (and unmerge subtracts it), after
  // which forward is the base alone. Each returns the largest error it introduced: the
  // base's rounding for a dense base, the requantization for an NF4 one (Note [Merging into
  // a quantized base] in lora.cpp).
  double merge();
  double unmerge();
  bool merged() const { return merged_; }

  const LoraConfig& config() const { return config_; }
  const LinearLayer& base() const { return *base_; }
  const Tensor& lora_A() const { return a_->weight(); }  // (r, in)
  const Tensor& lora_B() const { return b_->weight(); }  // (out, r)

 private:
  // scaling * B A, (out, in), f32.
  Tensor delta() const;
  double apply_delta(double sign);

  LoraConfig config_;
  LinearLayer* base_;
  Linear* a_;
  Linear* b_;
  bool merged_ = false;
};

// Note [Adapters off]: while an AdaptersOff lives, every LoraLinear's forward on this thread
// is its base alone, as PEFT's `with model.disable_adapter():`. Preference tuning runs its
// reference model so: the base under the adapter, with no second copy of the weights.
class AdaptersOff {
 public:
  AdaptersOff();
  ~AdaptersOff();
  AdaptersOff(const AdaptersOff&) = delete;
  AdaptersOff& operator=(const AdaptersOff&) = delete;
  static bool active();

 private:
  bool previous_;
};

// A factory that makes every layer it is given a LoraLinear over what `base` makes
// (targeted_factory in nn/target_modules.h chooses which layers get one).
LinearFactory lora_factory(const LoraConfig& config, LinearFactory base = {});

// PEFT's mark_only_lora_as_trainable (bias "none"): freezes every parameter of `model`
// but the LoRA factors, so embeddings, norms and the head do not train either. Returns the
// number of trainable elements; a model without LoRA layers is an error.
int64_t mark_only_lora_as_trainable(const Module& model);

}  // namespace fitgrad::nn
