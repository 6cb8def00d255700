// The two MLPs: GPT-2's c_fc -> GELU (tanh) -> c_proj in Conv1D layout, and Llama's
// SwiGLU down_proj(silu(gate_proj(x)) * up_proj(x)) through the fused autograd::swiglu (gate
// and up one gate_up_proj in Phi-3), or Gemma's GeGLU with the tanh GELU.
// Both map (B, T, C) -> (B, T, C) through the config's intermediate_size.
#pragma once

#include "nn/config.h"
#include "nn/layers.h"

namespace fitgrad::nn {

class Gpt2Mlp : public Module {
 public:
  Gpt2Mlp(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx);
  Tensor forward(const Tensor& x) const;

 private:
  double resid_pdrop_;   // Note [Dropout as configured] in config.h
  LinearLayer* c_fc_;    // (C, F)
  LinearLayer* c_proj_;  // (F, C), init std / sqrt(2 L)
};

class SwiGluMlp : public Module {
 public:
  SwiGluMlp(std::string path, std::string name, const ModelConfig& cfg, BuildContext& ctx);
  Tensor forward(const Tensor& x) const;

 private:
  LinearLayer *gate_proj_ = nullptr, *up_proj_ = nullptr;  // (F, C)
  LinearLayer* gate_up_proj_ = nullptr;                    // (2F, C): Phi-3's fused pair
  LinearLayer* down_proj_;                                 // (C, F)
  bool geglu_;                                             // Gemma: the tanh GELU instead of silu
};

}  // namespace fitgrad::nn
