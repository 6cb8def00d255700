// The NF4 Linear (see nf4_linear.h).
#include "nn/nf4_linear.h"

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/lambda_node.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/random.h"

namespace fitgrad::nn {

ops::FourBit quantized_draw(const Shape& shape, double init_std, const ops::FourBitOptions& options,
                            const std::string& label, BuildContext& ctx) {
  quant::check_four_bit_blocksize(options.blocksize, "nf4");
  const uint32_t name = intern_label(label);
  Tensor dense;
  {
    const MemoryContextScope scope({Category::temporary, name});
    dense = Tensor::empty(shape, DType::f32, ctx.options.device);
    if (ctx.options.initialize) init_tensor(dense, Init::normal(init_std), ctx.generator());
  }
  const MemoryContextScope scope({Category::quantized_weight, name});
  return ops::quantize_4bit(dense, options);
}

ops::FourBit quantize_weight(const Tensor& weight, const ops::FourBitOptions& options,
                             const std::string& label) {
  autograd::NoGradGuard no_grad;
  const Tensor w = weight.contiguous();
  const MemoryContextScope scope({Category::quantized_weight, intern_label(label)});
  return ops::quantize_4bit(w, options);
}

Nf4Linear::Nf4Linear(const LinearSpec& spec, const ops::FourBitOptions& options, BuildContext& ctx)
    : LinearLayer(spec.path, spec.name, spec.in, spec.out), layout_(spec.options.layout) {
  q_ = quantized_draw({spec.out, spec.in}, spec.options.init_std, options, spec.path + ".weight",
                      ctx);
  if (spec.options.bias)
    bias_ = register_parameter("bias", {spec.out}, Init::zeros(), ctx, {.requires_grad = false});
}

Shape Nf4Linear::dense_shape() const {
  return layout_ == LinearLayout::torch ? Shape{out_features(), in_features()}
                                        : Shape{in_features(), out_features()};
}

void Nf4Linear::quantize_from(const Tensor& weight) {
  const Shape want = dense_shape();
  FG_CHECK(weight.shape() == want, "[{}] weight has shape {}, expected {}", path(),
           shape_str(weight.shape()), shape_str(want));
  q_ = quantize_weight(layout_ == LinearLayout::torch ? weight : weight.transpose(0, 1), q_.options,
                       path() + ".weight");
}

Tensor Nf4Linear::dequantized(DType dtype) const {
  const MemoryContextScope scope({Category::temporary, intern_label(path() + ".weight")});
  return ops::dequantize_4bit(q_, dtype);
}

Tensor four_bit_linear(const Tensor& x, const ops::FourBit& q, const Tensor& bias,
                       const std::string& label) {
  const int64_t in = q.shape[1], out = q.shape[0];
  const DType auto_dt = autograd::autocast_dtype();
  const DType dt = auto_dt != DType::f32 ? auto_dt : x.dtype();
  const Tensor xc = x.dtype() == dt ? x : autograd::cast(x, dt);
  const bool rec = autograd::needs_record({&xc});
  const Tensor b = bias.defined() ? bias.to(dt) : Tensor();
  const uint32_t name = intern_label(label);
  if (!rec && xc.numel() / in <= kMatvecRows) {  // Note [Decoding reads the nibbles]
    Tensor y = ops::linear_4bit(xc, q);
    return b.defined() ? ops::add(y, b) : y;
  }
  Tensor y;
  {
    autograd::ForwardScope forward(rec);
    Tensor w;  // Note [Dequantized one layer at a time]
    {
      const MemoryContextScope scope({Category::temporary, name});
      w = ops::dequantize_4bit(q, dt);
    }
    y = ops::linear(xc, w, b);
  }
  if (!rec) return y;
  auto node = autograd::make_node(
      "nf4_linear", [&q, dt, name, out, xs = xc.shape()](autograd::Node&, std::vector<Tensor>& g) {
        Tensor w;  // (out, in), freed after dX
        {
          const MemoryContextScope scope({Category::temporary, name});
          w = ops::dequantize_4bit(q, dt);
        }
        const Tensor g2 = g[0].reshape({-1, out});
        return std::vector<Tensor>{ops::matmul(g2, w).reshape(xs)};
      });
  autograd::record(node, {&xc}, {&y});
  return y;
}

Tensor Nf4Linear::forward(const Tensor& x) const {
  ForwardScope scope(*this);
  FG_CHECK(x.dim() >= 1 && x.size(-1) == in_features(),
           "[{}] expected input (..., {}), got last dim {}", path(), in_features(),
           x.dim() ? x.size(-1) : 0);
  return four_bit_linear(x, q_, bias_, path() + ".weight");
}

ops::FourBitOptions bnb_4bit_options(const std::string& quant_type, bool double_quant,
                                     const char* what) {
  FG_CHECK(quant_type == "nf4" || quant_type == "fp4",
           "[{}] --bnb_4bit_quant_type must be nf4 or fp4, got '{}'", what, quant_type);
  return {quant_type == "fp4" ? quant::FourBitType::fp4 : quant::FourBitType::nf4, 64,
          double_quant};
}

LinearFactory nf4_factory(const ops::FourBitOptions& options) {
  return [options](const LinearSpec& spec, BuildContext& ctx) -> std::unique_ptr<LinearLayer> {
    return std::make_unique<Nf4Linear>(spec, options, ctx);
  };
}

}  // namespace fitgrad::nn
