// Random fill front-ends (see random.h).
#include "tensor/ops/random.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {

void normal_(const Tensor& out, const RngState& state, double std) {
  const backend::OpId id = backend::OpId::normal_;
  const char* op = backend::op_name(id);
  check_floating(op, "out", out);
  FG_CHECK(out.is_contiguous(), "[{}] out of shape {} must be contiguous", op,
           shape_str(out.shape()));
  if (out.numel() == 0) return;
  out.storage()->bump_version();
  backend::dispatch(id, out.device(), backend::NormalArgs{state, std, out});
}

void uniform_(const Tensor& out, const RngState& state, double lo, double hi) {
  const backend::OpId id = backend::OpId::uniform;
  const char* op = backend::op_name(id);
  check_floating(op, "out", out);
  FG_CHECK(out.is_contiguous(), "[{}] out of shape {} must be contiguous", op,
           shape_str(out.shape()));
  FG_CHECK(lo <= hi, "[{}] lo = {} is greater than hi = {}", op, lo, hi);
  if (out.numel() == 0) return;
  out.storage()->bump_version();
  backend::dispatch(id, out.device(),
                    backend::UniformArgs{out.numel(), state, float(lo), float(hi - lo), out});
}

}  // namespace fitgrad::ops
