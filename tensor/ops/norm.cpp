// Norm front-ends (see norm.h): shape and dtype checks, allocation of outputs, statistics
// and the weight-gradient scratch, and dispatch through the kernel table; the scratch's rows
// come from the device's target profile (backend::norm_partitions).
//
// Note [Native norms]
// The kernels read and write bf16/f16 as they are (tensor/cpu/norm.h) when x and every
// defined operand (weight, bias, dy) share x's dtype; a mix is staged through f32 copies
// tagged temporary. Statistics and weight gradients are computed in f32 either way.
#include "tensor/ops/norm.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/profile.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

// The leading dims of x: the shape of its per-row statistics.
Shape row_shape(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

// Checks x (..., C); returns C.
int64_t check_input(const char* op, const Tensor& x) {
  check_floating(op, "x", x);
  FG_CHECK(x.dim() >= 1 && x.size(-1) > 0, "[{}] x must be (..., C) with C > 0, got shape {}", op,
           shape_str(x.shape()));
  return x.size(-1);
}

// Checks an optional (C) parameter.
void check_param(const char* op, const char* name, const Tensor& p, int64_t C) {
  if (!p.defined()) return;
  check_floating(op, name, p);
  check_shape(op, name, p, {C});
}

void check_eps(const char* op, double eps) {
  FG_CHECK(eps >= 0, "[{}] eps = {} must be non-negative", op, eps);
}

// Checks dy against x and a saved f32 statistic against x's rows.
void check_backward(const char* op, const Tensor& dy, const Tensor& x, const char* name,
                    const Tensor& stat) {
  check_floating(op, "dy", dy);
  check_shape(op, "dy", dy, x.shape());
  FG_CHECK(stat.defined() && stat.dtype() == DType::f32, "[{}] {} must be a defined f32 tensor", op,
           name);
  check_shape(op, name, stat, row_shape(x));
}

// f32 data of an optional parameter, or null.
// The weight-gradient partial sums: a workspace, freed when the op returns.
Tensor workspace(const Shape& shape, Device device) {
  CategoryScope category(Category::temporary);
  return Tensor::empty(shape, DType::f32, device);
}

// Note [Native norms].
bool native(const Tensor& x, std::initializer_list<const Tensor*> others) {
  for (const Tensor* t : others)
    if (t->defined() && t->dtype() != x.dtype()) return false;
  return true;
}
// The (rows, C) result in x's shape and dtype (kernel_result).
Tensor result(const Tensor& x, bool native) {
  return kernel_result(x.shape(), x.device(), x.dtype(), native);
}

// A norm backward's staged operands, its dx and its partition count (Note [Native norms]).
struct Backward {
  int64_t rows, P;
  Tensor dy, x, w;  // (rows, C), (rows, C), (C)
  Tensor dx;        // (rows, C)
};
Backward stage_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, int64_t C) {
  const int64_t rows = x.numel() / C;
  const bool nat = native(x, {&dy, &weight});
  return {rows,
          backend::norm_partitions(backend::profile_for(x.device()), rows),
          kernel_operand(dy, nat),
          kernel_operand(x, nat),
          kernel_operand(weight, nat),
          result(x, nat)};
}

}  // namespace

LayerNormOut layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const backend::OpId id = backend::OpId::layer_norm;
  const char* op = backend::op_name(id);
  const int64_t C = check_input(op, x);
  check_param(op, "weight", weight, C);
  check_param(op, "bias", bias, C);
  check_same_device(op, {&x, &weight, &bias});
  check_eps(op, eps);
  const int64_t rows = x.numel() / C;
  const bool nat = native(x, {&weight, &bias});
  const Tensor xf = kernel_operand(x, nat);       // (rows, C)
  const Tensor wf = kernel_operand(weight, nat);  // (C)
  const Tensor bf = kernel_operand(bias, nat);    // (C)
  Tensor y = result(x, nat);                      // (rows, C)
  LayerNormOut out{Tensor(), Tensor::empty(row_shape(x), DType::f32, x.device()),
                   Tensor::empty(row_shape(x), DType::f32, x.device())};
  backend::dispatch(id, x.device(),
                    backend::LayerNormArgs{rows, C, float(eps), xf, wf, bf, y, out.mean, out.rstd});
  out.y = cast_to(y, x.dtype());
  return out;
}

LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                                   const Tensor& mean, const Tensor& rstd, bool with_dbias) {
  const backend::OpId id = backend::OpId::layer_norm_backward;
  const char* op = backend::op_name(id);
  const int64_t C = check_input(op, x);
  check_param(op, "weight", weight, C);
  check_backward(op, dy, x, "mean", mean);
  check_backward(op, dy, x, "rstd", rstd);
  check_same_device(op, {&dy, &x, &weight, &mean, &rstd});
  const Device device = x.device();
  const Backward in = stage_backward(dy, x, weight, C);
  Tensor dw = weight.defined() ? Tensor::empty({C}, DType::f32, device) : Tensor();  // (C)
  Tensor db = with_dbias ? Tensor::empty({C}, DType::f32, device) : Tensor();        // (C)
  Tensor partials;                                                                   // (P, 2 * C)
  if (dw.defined() || db.defined()) partials = workspace({in.P, 2 * C}, device);
  backend::dispatch(
      id, device,
      backend::LayerNormBackwardArgs{in.rows, C, in.P, in.dy, in.x, in.w, mean.contiguous(),
                                     rstd.contiguous(), in.dx, dw, db, partials});
  const DType param_dtype = weight.defined() ? weight.dtype() : x.dtype();
  return {cast_to(in.dx, x.dtype()), dw.defined() ? cast_to(dw, param_dtype) : Tensor(),
          db.defined() ? cast_to(db, param_dtype) : Tensor()};
}

RmsNormOut rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  const backend::OpId id = backend::OpId::rms_norm;
  const char* op = backend::op_name(id);
  const int64_t C = check_input(op, x);
  check_param(op, "weight", weight, C);
  check_same_device(op, {&x, &weight});
  check_eps(op, eps);
  const int64_t rows = x.numel() / C;
  const bool nat = native(x, {&weight});
  const Tensor xf = kernel_operand(x, nat);       // (rows, C)
  const Tensor wf = kernel_operand(weight, nat);  // (C)
  Tensor y = result(x, nat);                      // (rows, C)
  RmsNormOut out{Tensor(), Tensor::empty(row_shape(x), DType::f32, x.device())};
  backend::dispatch(id, x.device(), backend::RmsNormArgs{rows, C, float(eps), xf, wf, y, out.rstd});
  out.y = cast_to(y, x.dtype());
  return out;
}

RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight,
                               const Tensor& rstd) {
  const backend::OpId id = backend::OpId::rms_norm_backward;
  const char* op = backend::op_name(id);
  const int64_t C = check_input(op, x);
  check_param(op, "weight", weight, C);
  check_backward(op, dy, x, "rstd", rstd);
  check_same_device(op, {&dy, &x, &weight, &rstd});
  const Device device = x.device();
  const Backward in = stage_backward(dy, x, weight, C);
  Tensor dw, partials;  // (C), (P, C)
  if (weight.defined()) {
    dw = Tensor::empty({C}, DType::f32, device);
    partials = workspace({in.P, C}, device);
  }
  backend::dispatch(id, device,
                    backend::RmsNormBackwardArgs{in.rows, C, in.P, in.dy, in.x, in.w,
                                                 rstd.contiguous(), in.dx, dw, partials});
  return {cast_to(in.dx, x.dtype()), weight.defined() ? cast_to(dw, weight.dtype()) : Tensor()};
}

}  // namespace fitgrad::ops
