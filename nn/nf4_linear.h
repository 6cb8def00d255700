// A Linear whose frozen weight lives only in 4 bits (QLoRA's base layer, Dettmers et al.
// 2023): bitsandbytes' NF4 or FP4 blockwise quantization (tensor/quant/four_bit.h), with
// double-quantized absmaxes by default, in the ledger's quantized_weight category, labelled
// "<path>.weight". Built through the Linear factory (nf4_factory), so a model definition
// gets it wherever the factory chooses; under a LoRA layer it is the frozen base.
//
// Note [Dequantized one layer at a time]
// The forward dequantizes the whole weight into a temporary in the compute dtype (the
// autocast dtype, else the input's), multiplies, and frees it before returning; the
// backward computes dX only (the weight is frozen) and dequantizes again for it. Nothing
// dequantized is saved for backward, so at most one layer's weight exists in 16 or 32 bits
// at any moment, and the ledger shows it as a temporary. A weight is quantized layer by
// layer as the model is built or loaded (quantize_from), so a 16-bit copy of the whole
// model never exists either. The weight is stored in torch's (out, in) layout whatever the
// model's layout (GPT-2's Conv1D weights are transposed once, when quantized), as
// bitsandbytes stores a quantized nn.Linear.
//
// Note [Decoding reads the nibbles]
// Without a gradient to record and with at most kMatvecRows rows of input (a decoding
// step), the product skips the dequantized copy and reads the 4-bit codes directly
// (ops::linear_4bit, Note [Four-bit matvec]): a decoding step then streams 4.1 bits per
// weight instead of writing and reading 32. Its f32 sums differ from the dequantize-and-
// multiply route only in their order.
#pragma once

#include <string>

#include "nn/layers.h"
#include "tensor/ops/quantize.h"

namespace fitgrad::nn {

// A module whose frozen weight lives only in 4 bits (Nf4Linear, Nf4Embedding): loading
// quantizes its "<path>.weight" from a file's dense weight (nn/peft_load.h).
class FourBitWeight {
 public:
  virtual ~FourBitWeight() = default;
  virtual const ops::FourBit& quantized() const = 0;
  // The shape of the dense weight quantize_from takes (the file's shape).
  virtual Shape dense_shape() const = 0;
  // Replaces the quantized weight by the quantization of `weight` (dense_shape()).
  virtual void quantize_from(const Tensor& weight) = 0;
};

// The 4-bit state of a frozen weight of `shape`, in quantized_weight under `label`: a
// normal(0, init_std) draw, as a dense layer would make it, when the build initialises
// (else uninitialised, about to be loaded), drawn in a temporary f32 tensor freed at once.
ops::FourBit quantized_draw(const Shape& shape, double init_std, const ops::FourBitOptions& options,
                            const std::string& label, BuildContext& ctx);
// The quantization of `weight` (any floating dtype and layout), in quantized_weight under
// `label`, outside autograd.
ops::FourBit quantize_weight(const Tensor& weight, const ops::FourBitOptions& options,
                             const std::string& label);

// Rows of input up to which a product without autograd reads the nibbles directly (Note
// [Decoding reads the nibbles]).
inline constexpr int64_t kMatvecRows = 4;

// x (..., in) times the 4-bit weight q (out, in) transposed, plus bias (out) when defined,
// in the compute dtype (the autocast dtype, else x's), differentiable in x only (Note
// [Dequantized one layer at a time]). `label` names the dequantized temporaries. q must
// outlive the backward pass.
Tensor four_bit_linear(const Tensor& x, const ops::FourBit& q, const Tensor& bias,
                       const std::string& label);

class Nf4Linear final : public LinearLayer, public FourBitWeight {
 public:
  // Quantizes a normal(0, init_std) draw of the weight when the build initialises, else
  // allocates the quantized state for a load; the bias (if any) is a frozen parameter.
  Nf4Linear(const LinearSpec& spec, const ops::FourBitOptions& options, BuildContext& ctx);

  Tensor forward(const Tensor& x) const override;  // (..., in) -> (..., out)

  // Replaces the quantized weight by the quantization of `weight`, given in the model's
  // layout ((out, in) for torch, (in, out) for GPT-2's Conv1D), any floating dtype.
  void quantize_from(const Tensor& weight) override;
  Shape dense_shape() const override;
  // The weight dequantized in `dtype`, (out, in).
  Tensor dequantized(DType dtype) const;
  const ops::FourBit& quantized() const override { return q_; }
  LinearLayout layout() const { return layout_; }
  const Tensor& bias() const { return bias_; }

 private:
  LinearLayout layout_;
  ops::FourBit q_;
  Tensor bias_;
};

// bitsandbytes' BitsAndBytesConfig as fitgrad's flags give it: bnb_4bit_quant_type "nf4" or
// "fp4" (anything else throws "[<what>] --bnb_4bit_quant_type ..."), blocks of 64, and
// bnb_4bit_use_double_quant.
ops::FourBitOptions bnb_4bit_options(const std::string& quant_type, bool double_quant,
                                     const char* what);

// A factory that makes every layer it is given an Nf4Linear (targeted_factory chooses
// which; lora_factory(config, nf4_factory(options)) puts LoRA over NF4: QLoRA).
LinearFactory nf4_factory(const ops::FourBitOptions& options);

}  // namespace fitgrad::nn
