// A Linear whose trainable weight lives in 8 bits (Q-GaLore's int8 weights, Zhang et al.
// 2024): asymmetric u8 codes with an f32 scale and a u8 zero point per group of
// `group_size` values (tensor/quant/int8.h, Note [Int8 weights]), in the ledger's
// quantized_weight category labelled "<path>.weight". It is trained: the backward forms dX
// and dW, and the optimizer applies each update to the dequantized weight and re-quantizes
// it stochastically (Note [Int8 updates] in optim/optimizer.h). Built through the Linear
// factory (int8_factory), for every Linear of the decoder blocks (PEFT's all-linear: the
// head, the embeddings and the norms stay dense, as in Q-GaLore, which quantizes the
// q/k/v/o/gate/up/down projections only).
//
// Note [Int8 weights as parameters]
// The codes, scales and zeros are the module's parameters "weight" (u8, in the model's
// layout: (out, in), or (in, out) for GPT-2's Conv1D; the groups run over it flattened, as
// the reference's reshape(-1, group_size) of a torch weight), "weight_scales" (f32, groups)
// and "weight_zeros" (u8, groups). So a checkpoint (safetensors) holds exactly what the run
// holds and a resume is bitwise, and the optimizer finds the weight under its own name. The
// codes are an integer leaf that requires a floating gradient
// (autograd::set_requires_float_grad): its gradient, dW, is in the compute dtype (the
// autocast dtype, else the input's), as Q-GaLore's float_grad is in the input's dtype. The
// scales and zeros never require grad; the optimizer rewrites them with the codes.
//
// Note [Int8 forward and backward]
// As Nf4Linear (Note [Dequantized one layer at a time] in nn/nf4_linear.h): the forward
// dequantizes the weight into a temporary in the compute dtype, multiplies and frees it; the
// backward dequantizes it again for dX, and forms dW from the saved input (saved only when
// the weight requires grad, Note [Frozen inputs]). No 16-bit copy of the weights outlives one
// layer's product.
#pragma once

#include <string>

#include "nn/layers.h"
#include "tensor/ops/quantize_int8.h"

namespace fitgrad::nn {

class Int8Linear final : public LinearLayer {
 public:
  // Quantizes a normal(0, init_std) draw of the weight (to nearest) when the build
  // initialises, else allocates the state for a load; the bias (if any) is a dense
  // trainable parameter.
  Int8Linear(const LinearSpec& spec, int64_t group_size, BuildContext& ctx);

  Tensor forward(const Tensor& x) const override;  // (..., in) -> (..., out)

  // Replaces the weight by the quantization (to nearest) of `weight`, in the model's layout,
  // any floating dtype: a dense pretrained weight loaded into an int8 model.
  void quantize_from(const Tensor& weight);
  // The weight's shape in the model's layout.
  const Shape& dense_shape() const { return q_.shape(); }
  // The weight dequantized in `dtype`, in the model's layout.
  Tensor dequantized(DType dtype) const;
  const ops::Int8& quantized() const { return q_; }
  LinearLayout layout() const { return layout_; }

 private:
  LinearLayout layout_;
  ops::Int8 q_;
  Tensor bias_;
};

// A factory that makes every layer it is given an Int8Linear with groups of `group_size`.
LinearFactory int8_factory(int64_t group_size);

}  // namespace fitgrad::nn
