// The 4-bit token embedding (see nf4_embedding.h).
#include "nn/nf4_embedding.h"

#include "autograd/grad_mode.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"

namespace fitgrad::nn {

Nf4Embedding::Nf4Embedding(std::string path, std::string name, int64_t num, int64_t dim,
                           double init_std, const ops::FourBitOptions& options, BuildContext& ctx)
    : Module(std::move(path), std::move(name)), dtype_(ctx.options.dtype) {
  quant::check_four_bit_blocksize(options.blocksize, "nf4 embedding");
  const uint32_t label = intern_label(this->path() + ".weight");
  Tensor dense;
  {
    const MemoryContextScope scope({Category::temporary, label});
    dense = Tensor::empty({num, dim}, DType::f32, ctx.options.device);
    if (ctx.options.initialize) init_tensor(dense, Init::normal(init_std), ctx.generator());
  }
  const MemoryContextScope scope({Category::quantized_weight, label});
  q_ = ops::quantize_4bit(dense, options);
}

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
  autograd::NoGradGuard no_grad;
  const Tensor w = weight.contiguous();
  const MemoryContextScope scope({Category::quantized_weight, intern_label(path() + ".weight")});
  q_ = ops::quantize_4bit(w, q_.options);
}

}  // namespace fitgrad::nn
