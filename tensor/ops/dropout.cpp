// Dropout front-ends (see dropout.h): checks, draw reservation and dispatch to
// tensor/cpu/dropout.h. Forward and backward run the same kernel, on x and on dy.
#include "tensor/ops/dropout.h"

#include "tensor/cpu/dropout.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

void check_p(const char* op, double p) {
  FG_CHECK(p >= 0 && p < 1, "[{}] p = {} must be in [0, 1)", op, p);
}

Tensor apply_mask(const char* op, const Tensor& x, double p, const RngState& state) {
  const Tensor xf = to_f32_contiguous(x);                       // (n)
  Tensor y = Tensor::empty(x.shape(), DType::f32, x.device());  // (n)
  if (run_kernel(op, x.device()))
    cpu::dropout_f32(xf.data<float>(), y.data<float>(), x.numel(), p, state.seed, state.offset);
  return cast_to(y, x.dtype());
}

}  // namespace

DropoutOut dropout(const Tensor& x, double p, Generator& gen) {
  const char* op = "dropout";
  check_floating(op, "x", x);
  check_p(op, p);
  if (p == 0) return {x, gen.state()};
  const RngState state = gen.reserve(uint64_t(x.numel()));
  return {apply_mask(op, x, p, state), state};
}

Tensor dropout_backward(const Tensor& dy, double p, const RngState& state) {
  const char* op = "dropout_backward";
  check_floating(op, "dy", dy);
  check_p(op, p);
  if (p == 0) return dy;
  return apply_mask(op, dy, p, state);
}

}  // namespace fitgrad::ops
