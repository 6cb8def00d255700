// Optimizer kernel front-ends (see optim_update.h): checks, then one dispatch each.
#include "tensor/ops/optim_update.h"

#include <cstring>
#include <string>
#include <tuple>

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
                   const Tensor& exp_avg_sq, const backend::AdamWScalars& scalars,
                   const backend::StochasticRounding& sr) {
  const backend::OpId id = backend::OpId::adamw_update;
  check_update(backend::op_name(id), param, grad,
               {{"exp_avg", &exp_avg}, {"exp_avg_sq", &exp_avg_sq}});
  param.storage()->bump_version();
  backend::dispatch(id, param.device(),
                    backend::AdamWArgs{scalars, param, grad, exp_avg, exp_avg_sq, sr});
}

void adam8bit_update_(const Tensor& param, const Tensor& grad, const Tensor& state1,
                      const Tensor& state2, const Tensor& absmax1, const Tensor& absmax2,
                      const backend::Adam8bitScalars& scalars,
                      const backend::StochasticRounding& sr) {
  const backend::OpId id = backend::OpId::adam8bit_update;
  const char* op = backend::op_name(id);
  if (state1.defined() && state1.dtype() == DType::f32) {
    check_update(op, param, grad, {{"state1", &state1}, {"state2", &state2}});
    FG_CHECK(!absmax1.defined() && !absmax2.defined(), "[{}] f32 states take no absmax", op);
  } else {
    check_update(op, param, grad, {});
    const int64_t n = param.numel(),
                  blocks = (n + backend::kAdam8bitBlock - 1) / backend::kAdam8bitBlock;
    for (const auto& [name, t] : {std::pair{"state1", &state1}, std::pair{"state2", &state2}}) {
      FG_CHECK(t->defined() && t->dtype() == DType::u8 && t->numel() == n && t->is_contiguous(),
               "[{}] {} must be contiguous u8 codes of {} elements", op, name, n);
      check_same_device(op, {&param, t});
    }
    for (const auto& [name, t] : {std::pair{"absmax1", &absmax1}, std::pair{"absmax2", &absmax2}}) {
      FG_CHECK(
          t->defined() && t->dtype() == DType::f32 && t->numel() == blocks && t->is_contiguous(),
          "[{}] {} must be contiguous f32 of {} blocks", op, name, blocks);
      check_same_device(op, {&param, t});
    }
  }
  param.storage()->bump_version();
  backend::dispatch(
      id, param.device(),
      backend::Adam8bitArgs{scalars, param, grad, state1, state2, absmax1, absmax2, sr});
}

void adafactor_update_(const Tensor& param, const Tensor& grad, const Tensor& row,
                       const Tensor& col, const Tensor& full, const Tensor& exp_avg,
                       const backend::AdafactorScalars& scalars,
                       const backend::StochasticRounding& sr) {
  const backend::OpId id = backend::OpId::adafactor_update;
  const char* op = backend::op_name(id);
  check_update(op, param, grad, {});
  if (exp_avg.defined()) check_update(op, param, grad, {{"exp_avg", &exp_avg}});
  int64_t batch = 1, rows = 1, cols = param.numel();
  if (full.defined()) {
    FG_CHECK(full.dtype() == DType::f32 && full.numel() == param.numel() && full.is_contiguous(),
             "[{}] the full second moment must be contiguous f32 of {} elements", op,
             param.numel());
    check_same_device(op, {&param, &full});
  } else {
    FG_CHECK(param.dim() >= 2, "[{}] a factored parameter needs >= 2 dims, got shape {}", op,
             shape_str(param.shape()));
    rows = param.shape()[size_t(param.dim() - 2)];
    cols = param.shape()[size_t(param.dim() - 1)];
    batch = rows * cols == 0 ? 0 : param.numel() / (rows * cols);
    for (const auto& [name, t, count] :
         {std::tuple{"row", &row, batch * rows}, std::tuple{"col", &col, batch * cols}}) {
      FG_CHECK(
          t->defined() && t->dtype() == DType::f32 && t->numel() == count && t->is_contiguous(),
          "[{}] the {} factor must be contiguous f32 of {} elements", op, name, count);
      check_same_device(op, {&param, t});
    }
  }
  if (param.numel() == 0) return;
  param.storage()->bump_version();
  const Tensor workspace =
      f64_workspace(backend::adafactor_workspace_doubles(batch, rows, cols), param.device());
  backend::dispatch(id, param.device(),
                    backend::AdafactorArgs{scalars, param, grad, row, col, full, exp_avg, batch,
                                           rows, cols, workspace, sr});
}

void apollo_update_(const Tensor& param, const Tensor& grad, const Tensor& low,
                    const Tensor& exp_avg, const Tensor& exp_avg_sq, const Tensor& norm,
                    const backend::ApolloScalars& scalars, const backend::StochasticRounding& sr) {
  const backend::OpId id = backend::OpId::apollo_update;
  const char* op = backend::op_name(id);
  check_update(op, param, grad, {});
  FG_CHECK(param.dim() == 2, "[{}] param must be a matrix, got shape {}", op,
           shape_str(param.shape()));
  const int64_t rows = param.shape()[0], cols = param.shape()[1];
  FG_CHECK(low.defined() && low.dim() == 2 && low.dtype() == grad.dtype(),
           "[{}] low must be a matrix in grad's dtype {}", op, dtype_name(grad.dtype()));
  const int64_t rank = scalars.right ? low.shape()[1] : low.shape()[0];
  const Shape low_shape = scalars.right ? Shape{rows, rank} : Shape{rank, cols};
  check_shape(op, "low", low, low_shape);
  check_contiguous(op, "low", low);
  check_same_device(op, {&param, &low});
  for (const auto& [name, t] : {std::pair{"exp_avg", &exp_avg}, {"exp_avg_sq", &exp_avg_sq}}) {
    FG_CHECK(t->defined() && t->dtype() == DType::f32, "[{}] {} must be a defined f32 tensor", op,
             name);
    check_shape(op, name, *t, low_shape);
    check_contiguous(op, name, *t);
    check_same_device(op, {&param, t});
  }
  FG_CHECK(norm.defined() && norm.dtype() == DType::f32 && norm.numel() == 1,
           "[{}] norm must be one f32", op);
  check_same_device(op, {&param, &norm});
  if (param.numel() == 0 || rank == 0) return;
  param.storage()->bump_version();
  const Tensor workspace =
      f64_workspace(backend::apollo_workspace(rows, cols, scalars.right).doubles, param.device());
  backend::dispatch(id, param.device(),
                    backend::ApolloArgs{scalars, rows, cols, rank, param, grad, low, exp_avg,
                                        exp_avg_sq, norm, workspace, sr});
}

void sgd_update_(const Tensor& param, const Tensor& grad, const Tensor& momentum_buffer,
                 const backend::SgdScalars& scalars, const backend::StochasticRounding& sr) {
  const backend::OpId id = backend::OpId::sgd_update;
  const char* op = backend::op_name(id);
  if (momentum_buffer.defined())
    check_update(op, param, grad, {{"momentum_buffer", &momentum_buffer}});
  else
    check_update(op, param, grad, {});
  param.storage()->bump_version();
  backend::dispatch(id, param.device(),
                    backend::SgdArgs{scalars, param, grad, momentum_buffer, sr});
}

// One double of zero_doubles' kind on x's device, as a pointer for a kernel.
double* double_at(const char* op, const char* name, const Tensor& acc, const Tensor& x) {
  FG_CHECK(acc.defined() && acc.dtype() == DType::f32 && acc.numel() == 2 && acc.is_contiguous(),
           "[{}] {} must be one double (an f32 pair of zero_doubles), got {}", op, name,
           acc.defined() ? shape_str(acc.shape()) : std::string("undefined"));
  check_same_device(op, {&x, &acc});
  if (!acc.device().has_bytes()) return nullptr;
  return doubles_in(acc);
}

Tensor zero_doubles(int64_t doubles, Device device) {
  Tensor t = Tensor::empty({2 * doubles}, DType::f32, device);
  t.fill_(0.0);  // all-zero bits: +0.0 as doubles
  return t;
}

double read_double(const Tensor& doubles, int64_t i) {
  if (!doubles.device().has_bytes()) return 0.0;
  const Tensor host = doubles.narrow(0, 2 * i, 2).read_host("read_double");
  double v = 0.0;
  std::memcpy(&v, host.data<float>(), sizeof(v));
  return v;
}

void sum_squares_add_(const Tensor& x, const Tensor& acc) {
  const backend::OpId id = backend::OpId::sum_squares;
  const char* op = backend::op_name(id);
  check_floating(op, "x", x);
  check_contiguous(op, "x", x);
  double* out = double_at(op, "acc", acc, x);
  acc.storage()->bump_version();
  const int64_t doubles =
      backend::sum_squares_workspace_doubles(backend::profile_for(x.device()), x.numel());
  // The chunks' partial sums: Note [Double workspaces] in op_util.h.
  backend::dispatch(id, x.device(),
                    backend::SumSquaresArgs{x, out, f64_workspace(doubles, x.device())});
}

double sum_squares(const Tensor& x) {
  const Tensor acc = zero_doubles(1, x.device());
  sum_squares_add_(x, acc);
  return read_double(acc);
}

void scale_(const Tensor& x, float factor) {
  const backend::OpId id = backend::OpId::scale_;
  const char* op = backend::op_name(id);
  check_floating(op, "x", x);
  check_contiguous(op, "x", x);
  x.storage()->bump_version();
  backend::dispatch(id, x.device(), backend::ScaleInPlaceArgs{x, factor});
}

void clip_scale_(const Tensor& x, const Tensor& sum_sq, double max_norm) {
  const backend::OpId id = backend::OpId::scale_;
  const char* op = backend::op_name(id);
  check_floating(op, "x", x);
  check_contiguous(op, "x", x);
  FG_CHECK(max_norm > 0, "[{}] max_norm must be > 0, got {}", op, max_norm);
  const double* norm = double_at(op, "sum_sq", sum_sq, x);
  x.storage()->bump_version();
  backend::dispatch(id, x.device(), backend::ScaleInPlaceArgs{x, 1.0f, norm, max_norm});
}

}  // namespace fitgrad::ops
