// The int8 Linear (see int8_linear.h).
#include "nn/int8_linear.h"

#include "autograd/autocast.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/lambda_node.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "tensor/ops/reduce.h"
#include "tensor/quant/int8.h"

namespace fitgrad::nn {
namespace {

// x (..., in) times the int8 weight q (layout's shape) plus bias (out) when defined, in the
// compute dtype; differentiable in x, in q's codes (dW in the compute dtype) and in the bias
// (Note [Int8 forward and backward]). `name` labels the dequantized temporaries.
Tensor int8_linear(const Tensor& x, const ops::Int8& q, const Tensor& bias, LinearLayout layout,
                   uint32_t name) {
  const bool torch = layout == LinearLayout::torch;
  const int64_t in = torch ? q.shape()[1] : q.shape()[0], out = torch ? q.shape()[0] : q.shape()[1];
  const DType auto_dt = autograd::autocast_dtype();
  const DType dt = auto_dt != DType::f32 ? auto_dt : x.dtype();
  const Tensor xc = x.dtype() == dt ? x : autograd::cast(x, dt);
  const Tensor b = !bias.defined() || bias.dtype() == dt ? bias : autograd::cast(bias, dt);
  const bool rec = autograd::needs_record({&xc, &q.codes, &b});
  auto dequantized = [&q, dt, name] {
    const MemoryContextScope scope({Category::temporary, name});
    return ops::dequantize_int8(q, dt);  // layout's shape
  };
  Tensor y;
  {
    autograd::ForwardScope forward(rec);
    const Tensor w = dequantized();
    if (torch) {
      y = ops::linear(xc, w, b);
    } else {
      y = ops::matmul(xc.reshape({-1, in}), w).reshape([&] {
        Shape s = xc.shape();
        s.back() = out;
        return s;
      }());
      if (b.defined()) y = ops::add(y, b);
    }
  }
  if (!rec) return y;
  const bool grad_w = autograd::requires_grad(q.codes);
  auto node = autograd::make_node("int8_linear", [&q, dt, name, in, out, torch, xs = xc.shape()](
                                                     autograd::Node& n, std::vector<Tensor>& g) {
    const Tensor g2 = g[0].reshape({-1, out});  // (rows, out)
    Tensor dx, dw, db;
    if (n.needs_input_grad(0)) {
      Tensor w;  // layout's shape, freed after dX
      {
        const MemoryContextScope scope({Category::temporary, name});
        w = ops::dequantize_int8(q, dt);
      }
      dx = ops::matmul(g2, w, false, !torch).reshape(xs);  // (..., in)
    }
    if (n.needs_input_grad(1)) {
      const Tensor x2 = n.saved[0].reshape({-1, in});  // (rows, in)
      dw = torch ? ops::matmul(g2, x2, true, false)    // (out, in)
                 : ops::matmul(x2, g2, true, false);   // (in, out)
    }
    if (n.needs_input_grad(2)) db = ops::sum(g2, {0});  // (out)
    return std::vector<Tensor>{dx, dw, db};
  });
  node->save(grad_w ? xc : Tensor());
  autograd::record(node, {&xc, &q.codes, &b}, {&y});
  return y;
}

}  // namespace

Int8Linear::Int8Linear(const LinearSpec& spec, int64_t group_size, BuildContext& ctx)
    : LinearLayer(spec.path, spec.name, spec.in, spec.out), layout_(spec.options.layout) {
  const Shape shape =
      layout_ == LinearLayout::torch ? Shape{spec.out, spec.in} : Shape{spec.in, spec.out};
  quant::check_int8_group_size(fitgrad::numel(shape), group_size, spec.path.c_str());
  const uint32_t name = intern_label(spec.path + ".weight");
  {
    const MemoryContextScope scope({Category::quantized_weight, name});
    q_ = ops::empty_int8(shape, group_size, ctx.options.device);
  }
  if (ctx.options.initialize) {
    Tensor dense;  // layout's shape, f32, freed once quantized
    {
      const MemoryContextScope scope({Category::temporary, name});
      dense = Tensor::empty(shape, DType::f32, ctx.options.device);
      init_tensor(dense, Init::normal(spec.options.init_std), ctx.generator());
    }
    ops::requantize_int8_(q_, dense, {});
  }
  adopt_parameter("weight", q_.codes, true);
  adopt_parameter("weight_scales", q_.scales, false);
  adopt_parameter("weight_zeros", q_.zeros, false);
  if (spec.options.bias) bias_ = register_parameter("bias", {spec.out}, Init::zeros(), ctx);
}

void Int8Linear::quantize_from(const Tensor& weight) {
  FG_CHECK(weight.shape() == q_.shape(), "[{}] weight has shape {}, expected {}", path(),
           shape_str(weight.shape()), shape_str(q_.shape()));
  autograd::NoGradGuard no_grad;
  ops::requantize_int8_(q_, weight.contiguous().to(q_.codes.device()), {});
}

Tensor Int8Linear::dequantized(DType dtype) const {
  const MemoryContextScope scope({Category::temporary, intern_label(path() + ".weight")});
  return ops::dequantize_int8(q_, dtype);
}

Tensor Int8Linear::forward(const Tensor& x) const {
  ForwardScope scope(*this);
  FG_CHECK(x.dim() >= 1 && x.size(-1) == in_features(),
           "[{}] expected input (..., {}), got last dim {}", path(), in_features(),
           x.dim() ? x.size(-1) : 0);
  return int8_linear(x, q_, bias_, layout_, intern_label(path() + ".weight"));
}

LinearFactory int8_factory(int64_t group_size) {
  return [group_size](const LinearSpec& spec, BuildContext& ctx) -> std::unique_ptr<LinearLayer> {
    return std::make_unique<Int8Linear>(spec, group_size, ctx);
  };
}

}  // namespace fitgrad::nn
