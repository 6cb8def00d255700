// Dropout front-ends (see dropout.h): checks, draw reservation and dispatch through the
// kernel table. Forward and backward apply the same mask, to x and to dy.
#include "tensor/ops/dropout.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

void check_p(const char* op, double p) {
  FG_CHECK(p >= 0 && p < 1, "[{}] p = {} must be in [0, 1)", op, p);
}

Tensor apply_mask(backend::OpId id, const Tensor& x, double p, const RngState& state) {
  const Tensor xc = x.contiguous();                            // (n), read natively
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());  // (n)
  backend::dispatch(id, x.device(), backend::DropoutArgs{x.numel(), p, state, xc, y});
  return y;
}

}  // namespace

DropoutOut dropout(const Tensor& x, double p, Generator& gen) {
  const char* op = backend::op_name(backend::OpId::dropout);
  check_floating(op, "x", x);
  check_p(op, p);
  if (p == 0) return {x, gen.state()};
  const RngState state = gen.reserve(uint64_t(x.numel()));
  return {apply_mask(backend::OpId::dropout, x, p, state), state};
}

Tensor dropout_backward(const Tensor& dy, double p, const RngState& state) {
  const char* op = backend::op_name(backend::OpId::dropout_backward);
  check_floating(op, "dy", dy);
  check_p(op, p);
  if (p == 0) return dy;
  return apply_mask(backend::OpId::dropout_backward, dy, p, state);
}

}  // namespace fitgrad::ops
