// Linear, Embedding, LayerNorm, RMSNorm (layers.h).
#include "nn/layers.h"

#include "autograd/autocast_rules.h"
#include "autograd/functions.h"
#include "tensor/error.h"

namespace fitgrad::nn {

namespace ag = fitgrad::autograd;

LinearLayer& Module::register_linear(const std::string& name, int64_t in, int64_t out,
                                     const LinearOptions& options, BuildContext& ctx) {
  const LinearSpec spec{child_path(name), name, in, out, options};
  std::unique_ptr<LinearLayer> layer =
      ctx.options.linear_factory
          ? ctx.options.linear_factory(spec, ctx)
          : std::make_unique<Linear>(spec.path, spec.name, in, out, options, ctx);
  return adopt_linear(name, std::move(layer), spec);
}

LinearLayer& Module::adopt_linear(const std::string& name, std::unique_ptr<LinearLayer> layer,
                                  const LinearSpec& spec) {
  const int64_t in = spec.in, out = spec.out;
  FG_CHECK(layer != nullptr, "[{}] the linear factory returned no layer", spec.path);
  FG_CHECK(layer->path() == spec.path && layer->name() == spec.name && layer->in_features() == in &&
               layer->out_features() == out,
           "[{}] the linear factory made '{}' ({} -> {}), expected '{}' ({} -> {})", spec.path,
           layer->path(), layer->in_features(), layer->out_features(), spec.path, in, out);
  LinearLayer& ref = *layer;
  children_.emplace_back(name, std::move(layer));
  return ref;
}

Linear::Linear(std::string path, std::string name, int64_t in, int64_t out, const Options& options,
               BuildContext& ctx)
    : LinearLayer(std::move(path), std::move(name), in, out), layout_(options.layout) {
  const Shape w = layout_ == Layout::torch ? Shape{out, in} : Shape{in, out};
  weight_ = register_parameter("weight", w, Init::normal(options.init_std), ctx);
  if (options.bias) bias_ = register_parameter("bias", {out}, Init::zeros(), ctx);
}

Tensor Linear::forward(const Tensor& x) const {
  ForwardScope scope(*this);
  FG_CHECK(x.dim() >= 1 && x.size(-1) == in_features(),
           "[{}] expected input (..., {}), got last dim {}", path(), in_features(),
           x.dim() ? x.size(-1) : 0);
  // Note [Autocast op table] in autograd/autocast_rules.h: linear is a lower op; with
  // autocast off the operands come back as they are.
  const std::vector<Tensor> in = ag::autocast_operands(backend::OpId::linear, {x, weight_, bias_});
  const Tensor &xc = in[0], &w = in[1], &b = in[2];
  if (layout_ == Layout::torch) return ag::linear(xc, w, b);
  const Tensor y = ag::matmul(xc, w);  // (..., out)
  return b.defined() ? ag::add(y, b) : y;
}

Embedding::Embedding(std::string path, std::string name, int64_t num, int64_t dim, double init_std,
                     BuildContext& ctx)
    : Module(std::move(path), std::move(name)) {
  weight_ = register_parameter("weight", {num, dim}, Init::normal(init_std), ctx);
}

Tensor Embedding::forward(const Tensor& ids) const {
  ForwardScope scope(*this);
  return ag::embedding(weight_, ids);
}

LayerNorm::LayerNorm(std::string path, std::string name, int64_t dim, double eps, BuildContext& ctx)
    : Module(std::move(path), std::move(name)), eps_(eps) {
  weight_ = register_parameter("weight", {dim}, Init::ones(), ctx);
  bias_ = register_parameter("bias", {dim}, Init::zeros(), ctx);
}

Tensor LayerNorm::forward(const Tensor& x) const {
  ForwardScope scope(*this);
  return ag::layer_norm(x, weight_, bias_, eps_);
}

RMSNorm::RMSNorm(std::string path, std::string name, int64_t dim, double eps, BuildContext& ctx,
                 bool plus_one)
    : Module(std::move(path), std::move(name)), eps_(eps), plus_one_(plus_one) {
  weight_ = register_parameter("weight", {dim}, plus_one ? Init::zeros() : Init::ones(), ctx);
}

Tensor RMSNorm::forward(const Tensor& x) const {
  ForwardScope scope(*this);
  return ag::rms_norm(x, plus_one_ ? ag::add_scalar(weight_, 1.0) : weight_, eps_);
}

Tensor dropout_in_training(const Module& m, const Tensor& x, double p) {
  return m.training() && p > 0 ? autograd::dropout(x, p) : x;
}

}  // namespace fitgrad::nn
