// Optimizer kernel front-ends (see optim_update.h): checks, then one dispatch each.
#include "tensor/ops/optim_update.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/profile.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

void check_contiguous(const char* op, const char* name, const Tensor& t) {
  FG_CHECK(t.is_contiguous(), "[{}] {} of shape {} must be contiguous", op, name,
           shape_str(t.shape()));
}

// param and grad floating and contiguous; each state f32, contiguous and shaped as param;
// everything on param's device.
void check_update(const char* op, const Tensor& param, const Tensor& grad,
                  std::initializer_list<std::pair<const char*, const Tensor*>> states) {
  check_floating(op, "param", param);
  check_floating(op, "grad", grad);
  check_same_device(op, {&param, &grad});
  check_shape(op, "grad", grad, param.shape());
  check_contiguous(op, "param", param);
  check_contiguous(op, "grad", grad);
  for (const auto& [name, t] : states) {
    FG_CHECK(t->defined() && t->dtype() == DType::f32, "[{}] {} must be a defined f32 tensor", op,
             name);
    check_same_device(op, {&param, t});
    check_shape(op, name, *t, param.shape());
    check_contiguous(op, name, *t);
  }
}

}  // namespace

void adamw_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                   const Tensor& exp_avg_sq, const backend::AdamWScalars& scalars) {
  const backend::OpId id = backend::OpId::adamw_update;
  check_update(backend::op_name(id), param, grad,
               {{"exp_avg", &exp_avg}, {"exp_avg_sq", &exp_avg_sq}});
  param.storage()->bump_version();
  backend::dispatch(id, param.device(),
                    backend::AdamWArgs{scalars, param, grad, exp_avg, exp_avg_sq});
}

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const backend::SgdScalars& scalars) {
  const backend::OpId id = backend::OpId::sgd_update;
  const char* op = backend::op_name(id);
  if (momentum_buffer.defined())
    check_update(op, param, grad, {{"momentum_buffer", &momentum_buffer}});
  else
    check_update(op, param, grad, {});
  param.storage()->bump_version();
  backend::dispatch(id, param.device(), backend::SgdArgs{scalars, param, grad, momentum_buffer});
}

double sum_squares(const Tensor& x) {
  const backend::OpId id = backend::OpId::sum_squares;
  const char* op = backend::op_name(id);
  check_floating(op, "x", x);
  check_contiguous(op, "x", x);
  const int64_t doubles =
      backend::sum_squares_workspace_doubles(backend::profile_for(x.device()), x.numel());
  double out = 0.0;  // the chunks' partial sums: Note [Double workspaces] in op_util.h
  backend::dispatch(id, x.device(),
                    backend::SumSquaresArgs{x, &out, f64_workspace(doubles, x.device())});
  return out;
}

void scale_(const Tensor& x, float factor) {
  const backend::OpId id = backend::OpId::scale_;
  const char* op = backend::op_name(id);
  check_floating(op, "x", x);
  check_contiguous(op, "x", x);
  x.storage()->bump_version();
  backend::dispatch(id, x.device(), backend::ScaleInPlaceArgs{x, factor});
}

}  // namespace fitgrad::ops
