// A token embedding whose frozen table lives only in 4 bits, beside the NF4 Linears of a
// QLoRA base (BuildOptions::quantized_embedding): the (V, C) table quantized as one tensor
// with bitsandbytes' rules (tensor/quant/four_bit.h), in the quantized_weight category under
// "<path>.weight". A lookup dequantizes only the rows it gathers (ops::embedding_4bit), and
// a tied head multiplies through four_bit_linear (Note [Dequantized one layer at a time]),
// so the whole table exists in the compute dtype only as the head's temporary, and not at
// all while decoding (Note [Decoding reads the nibbles]).
//
// Note [Quantizing the embedding]
// bitsandbytes and transformers quantize nn.Linear layers only and keep embeddings (and,
// by default, lm_head) in 16 bits. For a small model the embedding is a large share of the
// base: SmolLM2-135M's tied 49152 x 576 table is 28.3 M of its 134.5 M parameters, 57 MB in
// bf16 against 55 MB for all 30 layers' Linears in NF4. fitgrad's QLoRA therefore quantizes
// the frozen table too, as an NF4 Linear would its weight. Nothing written to disk changes:
// the adapter is all a QLoRA checkpoint holds, and `fitgrad quantize` keeps transformers'
// layout (embeddings unquantized).
#pragma once

#include "nn/nf4_linear.h"

namespace fitgrad::nn {

class Nf4Embedding final : public Module, public FourBitWeight {
 public:
  // Quantizes a normal(0, init_std) draw when the build initialises, else allocates the
  // quantized state for a load. Lookups return the build's dtype (the dtype a dense
  // embedding would have had).
  Nf4Embedding(std::string path, std::string name, int64_t num, int64_t dim, double init_std,
               const ops::FourBitOptions& options, BuildContext& ctx);

  Tensor forward(const Tensor& ids) const;  // ids (...) i32/i64 -> (..., dim), no gradient
  // A tied head: x (..., dim) -> logits (..., num), differentiable in x.
  Tensor head(const Tensor& x) const;

  void quantize_from(const Tensor& weight) override;  // weight (num, dim), any floating dtype
  Shape dense_shape() const override { return q_.shape; }
  const ops::FourBit& quantized() const override { return q_; }

 private:
  DType dtype_;
  ops::FourBit q_;
};

}  // namespace fitgrad::nn
