// The basic layers: Linear (in torch's (out, in) layout or GPT-2's Conv1D (in, out)
// layout), Embedding, LayerNorm and RMSNorm. Each forward runs under the module's
// LabelScope (Note [Module names are memory labels]) and is differentiable through
// autograd/functions.h.
#pragma once

#include <memory>
#include <string>

#include "nn/module.h"

namespace fitgrad::nn {

// torch: weight (out, in), y = x W^T + b (Hugging Face nn.Linear).
// conv1d: weight (in, out), y = x W + b (GPT-2's Conv1D, kept in its own layout so
// checkpoints load without transposes).
enum class LinearLayout { torch, conv1d };
struct LinearOptions {
  bool bias = true;
  LinearLayout layout = LinearLayout::torch;
  double init_std = 0.02;  // weight ~ normal(0, init_std); bias zeros
};

// Note [Linear factory]
// Every projection of a model is made through Module::register_linear, which hands a
// LinearSpec (the full path, the local name, the sizes and the options) to the build's
// LinearFactory (BuildOptions::linear_factory) and keeps what it returns as the child
// `name`. Without a factory that is a dense Linear; with one, the same model definition
// gets NF4 or LoRA layers wherever the factory chooses (by path, as PEFT's target_modules
// do), and a layer that keeps no dense weight never allocates one. A factory's layer must
// have the spec's path and sizes; anything else is an error naming the path.
struct LinearSpec {
  std::string path;  // full dotted path, "transformer.h.0.attn.c_attn"
  std::string name;  // local name, "c_attn"
  int64_t in = 0, out = 0;
  LinearOptions options;
};

// The interface of every Linear variant: (..., in) -> (..., out).
class LinearLayer : public Module {
 public:
  LinearLayer(std::string path, std::string name, int64_t in, int64_t out)
      : Module(std::move(path), std::move(name)), in_(in), out_(out) {}
  virtual Tensor forward(const Tensor& x) const = 0;  // (..., in) -> (..., out)
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
};

// The dense Linear.
class Linear final : public LinearLayer {
 public:
  using Layout = LinearLayout;
  using Options = LinearOptions;
  Linear(std::string path, std::string name, int64_t in, int64_t out, const Options& options,
         BuildContext& ctx);

  Tensor forward(const Tensor& x) const override;  // (..., in) -> (..., out)
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias

 private:
  Layout layout_;
  Tensor weight_;  // (out, in) or (in, out)
  Tensor bias_;    // (out)
};

class Embedding : public Module {
 public:
  Embedding(std::string path, std::string name, int64_t num, int64_t dim, double init_std,
            BuildContext& ctx);
  Tensor forward(const Tensor& ids) const;  // ids (...) i32/i64 -> (..., dim)
  const Tensor& weight() const { return weight_; }

 private:
  Tensor weight_;  // (num, dim)
};

class LayerNorm : public Module {
 public:
  LayerNorm(std::string path, std::string name, int64_t dim, double eps, BuildContext& ctx);
  Tensor forward(const Tensor& x) const;  // over the last dim

 private:
  double eps_;
  Tensor weight_, bias_;  // (dim): ones, zeros
};

class RMSNorm : public Module {
 public:
  // plus_one: Gemma's RMSNorm, which scales by 1 + weight (weights start at 0).
  RMSNorm(std::string path, std::string name, int64_t dim, double eps, BuildContext& ctx,
          bool plus_one = false);
  Tensor forward(const Tensor& x) const;  // over the last dim

 private:
  double eps_;
  bool plus_one_;
  Tensor weight_;  // (dim): ones, or zeros with plus_one
};

// Dropout with probability p on x when `m` is in training mode and p > 0 (Note [Dropout as
// configured] in config.h), drawing from the global generator; x itself otherwise.
Tensor dropout_in_training(const Module& m, const Tensor& x, double p);

}  // namespace fitgrad::nn
