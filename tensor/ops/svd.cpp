// The truncated SVD basis front-end (see svd.h).
#include "tensor/ops/svd.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/profile.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {

void svd_basis_(const Tensor& a, const Tensor& out, bool left) {
  const backend::OpId id = backend::OpId::svd_basis;
  const char* op = backend::op_name(id);
  check_floating(op, "a", a);
  check_floating(op, "out", out);
  check_same_device(op, {&a, &out});
  FG_CHECK(a.dim() == 2 && out.dim() == 2, "[{}] a {} and out {} must be matrices", op,
           shape_str(a.shape()), shape_str(out.shape()));
  FG_CHECK(a.is_contiguous() && out.is_contiguous(), "[{}] a and out must be contiguous", op);
  const int64_t m = a.shape()[0], n = a.shape()[1];
  const int64_t r = left ? out.shape()[1] : out.shape()[0];
  check_shape(op, "out", out, left ? Shape{m, r} : Shape{r, n});
  FG_CHECK(r >= 1 && r <= std::min(m, n), "[{}] rank {} of a {} matrix (at most {})", op, r,
           shape_str(a.shape()), std::min(m, n));
  const Tensor workspace = f32_workspace(
      backend::svd_workspace_floats(backend::profile_for(a.device()), m, n, left), a.device());
  out.storage()->bump_version();
  backend::dispatch(id, a.device(), backend::SvdBasisArgs{m, n, r, left, a, out, workspace});
}

}  // namespace fitgrad::ops
