// The cuda table's optimizer ops: adamw_update, sgd_update, adam8bit_update,
// adafactor_update, apollo_update, sum_squares and scale_ (kernels in cuda/kernels/optim.cu
// and apollo.cu), registered at static initialisation (Note [Kernel tables]). Each adapter
// checks its argument struct, copies the scalars into the launcher's constants and launches on
// the compute stream; sum_squares then reads its one double back to the host, so it waits for
// the stream.
#include <cuda_runtime_api.h>

#include "cuda/kernels/optim_launch.h"
#include "cuda/ops/op_launch.h"
#include "tensor/backend/cuda_optim_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/quant/dynamic_map.h"

namespace fitgrad::cuda {
namespace {

static_assert(backend::kCudaAdam8bitThreads == backend::kAdam8bitBlock,
              "the 8-bit kernel runs one thread per element of an absmax block");

// param and grad as the launchers take them; both floating, with as many elements.
UpdateOperands operands(const char* op, const Tensor& param, const Tensor& grad,
                        const backend::StochasticRounding& sr) {
  FG_CHECK(
      param.defined() && grad.defined() && is_floating(param.dtype()) && is_floating(grad.dtype()),
      "[{}] the cuda kernel takes a floating param and grad", op);
  FG_CHECK(grad.numel() == param.numel(), "[{}] grad has {} elements, param {}", op, grad.numel(),
           param.numel());
  return {param.data_ptr(), param.dtype(), grad.data_ptr(), grad.dtype(),
          param.numel(),    sr.enabled,    sr.seed,         sr.offset};
}

// Throws unless t is a defined `dtype` tensor of `numel` elements.
void check_state(const char* op, const char* name, const Tensor& t, DType dtype, int64_t numel) {
  FG_CHECK(t.defined() && t.dtype() == dtype && t.numel() == numel,
           "[{}] {} must be {} of {} elements", op, name, dtype_name(dtype), numel);
}

// The workspace of `doubles` doubles, an f32 tensor of twice the count (Note [Double
// workspaces] in tensor/ops/op_util.h).
double* doubles_of(const char* op, const Tensor& workspace, int64_t doubles) {
  FG_CHECK(
      workspace.defined() && workspace.dtype() == DType::f32 && workspace.numel() >= 2 * doubles,
      "[{}] the cuda kernel needs a workspace of {} doubles", op, doubles);
  return reinterpret_cast<double*>(workspace.data<float>());
}

void adamw_update(const backend::AdamWArgs& a) {
  const char* op = "adamw_update";
  const UpdateOperands u = operands(op, a.param, a.grad, a.sr);
  check_state(op, "exp_avg", a.exp_avg, DType::f32, u.n);
  check_state(op, "exp_avg_sq", a.exp_avg_sq, DType::f32, u.n);
  if (u.n == 0) return;
  const backend::AdamWScalars& s = a.k;
  const AdamWConstants k{s.decay, s.beta1,           s.one_minus_beta1,
                         s.beta2, s.one_minus_beta2, s.bias_correction2_sqrt,
                         s.eps,   s.neg_step_size};
  OpLaunch launch(a.param);
  FG_CUDA_CHECK(
      launch_adamw(k, u, a.exp_avg.data<float>(), a.exp_avg_sq.data<float>(), launch.stream()));
}

void sgd_update(const backend::SgdArgs& a) {
  const char* op = "sgd_update";
  const UpdateOperands u = operands(op, a.param, a.grad, a.sr);
  if (a.momentum_buffer.defined())
    check_state(op, "momentum_buffer", a.momentum_buffer, DType::f32, u.n);
  if (u.n == 0) return;
  const backend::SgdScalars& s = a.k;
  const SgdConstants k{s.lr,       s.weight_decay, s.momentum, s.one_minus_dampening,
                       s.nesterov, s.first};
  float* buffer = a.momentum_buffer.defined() ? a.momentum_buffer.data<float>() : nullptr;
  OpLaunch launch(a.param);
  FG_CUDA_CHECK(launch_sgd(k, u, buffer, launch.stream()));
}

void adam8bit_update(const backend::Adam8bitArgs& a) {
  const char* op = "adam8bit_update";
  const UpdateOperands u = operands(op, a.param, a.grad, a.sr);
  const backend::Adam8bitScalars& s = a.k;
  const Adam8bitConstants k{s.beta1,     s.one_minus_beta1, s.beta2, s.one_minus_beta2,
                            s.step_size, s.eps_c2,          s.decay, s.weight_decay};
  FG_CHECK(a.state1.defined(), "[{}] state1 is undefined", op);
  if (a.state1.dtype() == DType::f32) {
    check_state(op, "state1", a.state1, DType::f32, u.n);
    check_state(op, "state2", a.state2, DType::f32, u.n);
    if (u.n == 0) return;
    OpLaunch launch(a.param);
    FG_CUDA_CHECK(launch_adam8bit_32bit(k, u, a.state1.data<float>(), a.state2.data<float>(),
                                        launch.stream()));
    return;
  }
  const int64_t blocks = backend::cuda_ceil_div(u.n, backend::kAdam8bitBlock);
  check_state(op, "state1", a.state1, DType::u8, u.n);
  check_state(op, "state2", a.state2, DType::u8, u.n);
  check_state(op, "absmax1", a.absmax1, DType::f32, blocks);
  check_state(op, "absmax2", a.absmax2, DType::f32, blocks);
  if (u.n == 0) return;
  OpLaunch launch(a.param);
  FG_CUDA_CHECK(launch_adam8bit_blockwise(k, u, a.state1.data<uint8_t>(), a.state2.data<uint8_t>(),
                                          a.absmax1.data<float>(), a.absmax2.data<float>(),
                                          quant::dynamic_map_signed().data(),
                                          quant::dynamic_map_unsigned().data(), launch.stream()));
}

void adafactor_update(const backend::AdafactorArgs& a) {
  const char* op = "adafactor_update";
  const UpdateOperands u = operands(op, a.param, a.grad, a.sr);
  FG_CHECK(a.batch >= 1 && a.rows >= 1 && a.cols >= 1 && a.batch * a.rows * a.cols == u.n,
           "[{}] a ({}, {}, {}) view of a parameter of {} elements", op, a.batch, a.rows, a.cols,
           u.n);
  if (a.full.defined()) {
    FG_CHECK(a.batch == 1 && a.rows == 1, "[{}] an unfactored parameter is viewed as (1, 1, n)",
             op);
    check_state(op, "full", a.full, DType::f32, u.n);
  } else {
    check_state(op, "row", a.row, DType::f32, a.batch * a.rows);
    check_state(op, "col", a.col, DType::f32, a.batch * a.cols);
  }
  if (a.exp_avg.defined()) check_state(op, "exp_avg", a.exp_avg, DType::f32, u.n);
  double* workspace =
      doubles_of(op, a.workspace, backend::adafactor_workspace_doubles(a.batch, a.rows, a.cols));
  const backend::AdafactorScalars& s = a.k;
  const AdafactorConstants k{s.variant == backend::AdafactorVariant::torch,
                             s.rho,
                             s.eps2,
                             s.d,
                             s.eps1,
                             s.decay,
                             s.one_minus_beta2,
                             s.rel_step,
                             s.eps_scale,
                             s.clip_threshold,
                             s.weight_decay,
                             s.beta2t,
                             s.eps0,
                             s.beta1,
                             s.scale_parameter};
  auto f32_or_null = [](const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; };
  OpLaunch launch(a.param);
  FG_CUDA_CHECK(launch_adafactor(k, u, f32_or_null(a.row), f32_or_null(a.col), f32_or_null(a.full),
                                 f32_or_null(a.exp_avg), a.batch, a.rows, a.cols, workspace,
                                 launch.stream()));
}

void apollo_update(const backend::ApolloArgs& a) {
  const char* op = "apollo_update";
  const UpdateOperands u = operands(op, a.param, a.grad, a.sr);
  const backend::ApolloScalars& s = a.k;
  FG_CHECK(a.rows * a.cols == u.n && a.rank >= 0, "[{}] a ({}, {}) view of {} elements", op, a.rows,
           a.cols, u.n);
  FG_CHECK(a.low.defined() && a.low.dtype() == a.grad.dtype(), "[{}] low must be in grad's dtype",
           op);
  const int64_t low_numel = a.rank * (s.right ? a.rows : a.cols);
  FG_CHECK(a.low.numel() == low_numel, "[{}] low has {} elements, expected {}", op, a.low.numel(),
           low_numel);
  check_state(op, "exp_avg", a.exp_avg, DType::f32, low_numel);
  check_state(op, "exp_avg_sq", a.exp_avg_sq, DType::f32, low_numel);
  check_state(op, "norm", a.norm, DType::f32, 1);
  if (u.n == 0 || a.rank == 0) return;
  double* workspace =
      doubles_of(op, a.workspace, backend::apollo_workspace(a.rows, a.cols, s.right).doubles);
  const ApolloConstants k{
      s.beta1,  s.one_minus_beta1, s.beta2,        s.one_minus_beta2, s.eps,         s.step,
      s.growth, s.decay,           s.weight_decay, s.right,           s.tensor_wise, s.first};
  OpLaunch launch(a.param);
  FG_CUDA_CHECK(launch_apollo(k, u, a.low.data_ptr(), a.rows, a.cols, a.rank,
                              a.exp_avg.data<float>(), a.exp_avg_sq.data<float>(),
                              a.norm.data<float>(), workspace, launch.stream()));
}

void sum_squares(const backend::SumSquaresArgs& a) {
  const char* op = "sum_squares";
  FG_CHECK(a.x.defined() && is_floating(a.x.dtype()) && a.acc != nullptr,
           "[{}] the cuda kernel takes a floating x and an accumulator", op);
  const int64_t n = a.x.numel();
  if (n == 0) return;
  double* workspace = doubles_of(op, a.workspace, 1);
  OpLaunch launch(a.x);
  int sms = 0;
  FG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, a.x.device().index));
  const int64_t blocks = backend::cuda_sum_squares_blocks(n, sms, a.workspace.numel() / 2);
  FG_CUDA_CHECK(launch_sum_squares(a.x.data_ptr(), a.x.dtype(), n, blocks, workspace, a.acc,
                                   launch.stream()));
}

void scale_inplace(const backend::ScaleInPlaceArgs& a) {
  FG_CHECK(a.x.defined() && is_floating(a.x.dtype()),
           "[scale_] the cuda kernel takes a floating x");
  const int64_t n = a.x.numel();
  if (n == 0) return;
  OpLaunch launch(a.x);
  FG_CUDA_CHECK(launch_scale_inplace(a.x.data_ptr(), a.x.dtype(), n, a.factor, a.clip_sum_squares,
                                     a.max_norm, launch.stream()));
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() {
    using backend::OpId;
    using backend::register_kernel;
    constexpr DeviceType cuda = DeviceType::cuda;
    register_kernel(cuda, OpId::adamw_update, adamw_update);
    register_kernel(cuda, OpId::sgd_update, sgd_update);
    register_kernel(cuda, OpId::adam8bit_update, adam8bit_update);
    register_kernel(cuda, OpId::adafactor_update, adafactor_update);
    register_kernel(cuda, OpId::apollo_update, apollo_update);
    register_kernel(cuda, OpId::sum_squares, sum_squares);
    register_kernel(cuda, OpId::scale_, scale_inplace);
  }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
