// The 4-bit token embedding (see nf4_embedding.h).
#include "nn/nf4_embedding.h"

#include "tensor/error.h"

namespace fitgrad::nn {

Nf4Embedding::Nf4Embedding(std::string path, std::string name, int64_t num, int64_t dim,
                           double init_std, const ops::FourBitOptions& options, BuildContext& ctx)
    : Module(std::move(path), std::move(name)),
      dtype_(ctx.options.dtype),
      q_(quantized_draw({num, dim}, init_std, options, this->path() + ".weight", ctx)) {}

Tensor Nf4Embedding::forward(const Tensor& ids) const {
  ForwardScope scope(*this);
  return ops::embedding_4bit(q_, ids, dtype_);
}

Tensor Nf4Embedding::head(const Tensor& x) const {
  ForwardScope scope(*this);
  FG_CHECK(x.dim() >= 1 && x.size(-1) == q_.shape[1],
           "[{}] the tied head expects input (..., {}), got last dim {}", path(), q_.shape[1],
           x.dim() ? x.size(-1) : 0);
  return four_bit_linear(x, q_, Tensor(), path() + ".weight");
}

void Nf4Embedding::quantize_from(const Tensor& weight) {
  FG_CHECK(weight.shape() == q_.shape, "[{}] weight has shape {}, expected {}", path(),
           shape_str(weight.shape()), shape_str(q_.shape));
  q_ = quantize_weight(weight, q_.options, path() + ".weight");
}

}  // namespace fitgrad::nn
