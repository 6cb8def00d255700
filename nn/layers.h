// The basic layers: Linear (in torch's (out, in) layout or GPT-2's Conv1D (in, out)
// layout), Embedding, LayerNorm and RMSNorm. Each forward runs under the module's
// LabelScope (Note [Module names are memory labels]) and is differentiable through
// autograd/functions.h.
#pragma once

#include "nn/module.h"

namespace fitgrad::nn {

class Linear : public Module {
 public:
  // torch: weight (out, in), y = x W^T + b (Hugging Face nn.Linear).
  // conv1d: weight (in, out), y = x W + b (GPT-2's Conv1D, kept in its own layout so
  // checkpoints load without transposes).
  enum class Layout { torch, conv1d };
  struct Options {
    bool bias = true;
    Layout layout = Layout::torch;
    double init_std = 0.02;  // weight ~ normal(0, init_std); bias zeros
  };
  Linear(std::string path, std::string name, int64_t in, int64_t out, const Options& options,
         BuildContext& ctx);

  Tensor forward(const Tensor& x) const;  // (..., in) -> (..., out)
  const Tensor& weight() const { return weight_; }
  const Tensor& bias() const { return bias_; }  // undefined without bias
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  int64_t in_, out_;
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
  RMSNorm(std::string path, std::string name, int64_t dim, double eps, BuildContext& ctx);
  Tensor forward(const Tensor& x) const;  // over the last dim

 private:
  double eps_;
  Tensor weight_;  // (dim): ones
};

}  // namespace fitgrad::nn
