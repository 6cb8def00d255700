// matmul and linear front-ends: shape checks, batch broadcasting, the staging workspace, and
// the GEMM dispatch through the kernel table.
//
// Note [Native products]
// The operands (and a linear's bias) share one floating dtype, and the result is written in
// it directly: no f32 copy of an input or of the output exists. f32 runs the f32 GEMM; bf16
// runs the bf16 GEMM when the device's target profile has one (backend::TargetProfile::
// bf16_gemm; tensor/cpu/gemm_bf16.h); f16, and bf16 without one, run the staged GEMM, which
// widens one block of each operand at a time into a bounded f32 workspace that this front-end
// allocates (backend::gemm_workspace_floats; Note [Staged GEMM blocks] in
// tensor/cpu/gemm_staged.cpp). f32 in TF32 mode runs the staged GEMM too, rounding each
// block (Note [TF32 on the CPU] in tensor/cpu/gemm.h).
#include "tensor/ops/matmul.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/math_mode.h"
#include "tensor/backend/profile.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {

namespace {

// TF32 mode applies to f32 products (Note [TF32 on the CPU] in tensor/cpu/gemm.h).
bool tf32_for(DType dtype) { return dtype == DType::f32 && backend::matmul_tf32(); }

// The staging workspace of an (m, k) @ (k, n) product on `dtype` operands, or undefined
// when the GEMM reads them as they are (Note [Native products]).
Tensor gemm_workspace(Device device, DType dtype, int64_t m, int64_t n, int64_t k) {
  return f32_workspace(
      backend::gemm_workspace_floats(backend::profile_for(device), dtype, m, n, k, tf32_for(dtype)),
      device);
}

// Note [Batch strides for broadcast matmul]
// gemm_f32_batched walks one batch index with one stride per operand. An operand whose
// batch dims all have size 1 gets stride 0 (one matrix broadcast over the batch); one whose
// batch shape equals the result's gets its matrix size as stride. Any other broadcast
// (say (2,1) against (1,3)) is materialised with expand + contiguous first.
Tensor batched_operand(const Tensor& t, const Shape& batch, int64_t& stride) {
  const Shape mat(t.shape().end() - 2, t.shape().end());
  const Shape own_batch(t.shape().begin(), t.shape().end() - 2);
  Tensor c = t.contiguous();
  if (numel(own_batch) == 1) {
    stride = 0;
    return c;
  }
  stride = mat[0] * mat[1];
  Shape full = batch;
  full.insert(full.end(), mat.begin(), mat.end());
  if (own_batch.size() == batch.size() && own_batch == batch) return c;
  return c.expand(full).contiguous();
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_floating("matmul", "a", a);
  check_floating("matmul", "b", b);
  check_same_device("matmul", {&a, &b});
  FG_CHECK(a.dim() >= 2 && b.dim() >= 2, "[matmul] operands must be at least 2-d, got {} and {}",
           shape_str(a.shape()), shape_str(b.shape()));
  FG_CHECK(a.dtype() == b.dtype(), "[matmul] dtypes differ: {} and {}", dtype_name(a.dtype()),
           dtype_name(b.dtype()));
  const int64_t m = a.size(trans_a ? -1 : -2), ka = a.size(trans_a ? -2 : -1);
  const int64_t kb = b.size(trans_b ? -1 : -2), n = b.size(trans_b ? -2 : -1);
  FG_CHECK(ka == kb, "[matmul] shapes {}{} and {}{} do not align ({} vs {})", shape_str(a.shape()),
           trans_a ? "^T" : "", shape_str(b.shape()), trans_b ? "^T" : "", ka, kb);
  const Shape batch = broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2),
                                       Shape(b.shape().begin(), b.shape().end() - 2), "matmul");
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  // Note [One GEMM for a shared right operand]
  // x (B, T, C) @ W (C, N), as a Conv1D layer runs it, is one (B T, C) @ (C, N) product:
  // A's matrices lie one after another, so with B shared they fold into the rows of a
  // single GEMM. One large GEMM keeps both threads busy where B small ones of T rows
  // each would not, and every output element is the same k-long dot product either way.
  if (!trans_a && numel(batch) > 1 && b.dim() == 2) {
    const Tensor ca = a.contiguous(), cb = b.contiguous();
    const int64_t rows = numel(batch) * m;
    backend::dispatch(backend::OpId::matmul, a.device(),
                      backend::MatmulArgs{
                          false, trans_b, 1, rows, n, ka, ca, cb, ka, b.size(-1), 0, 0, out,
                          gemm_workspace(a.device(), a.dtype(), rows, n, ka), tf32_for(a.dtype())});
    return out;
  }
  int64_t stride_a = 0, stride_b = 0;
  const Tensor ca = batched_operand(a, batch, stride_a);
  const Tensor cb = batched_operand(b, batch, stride_b);
  backend::dispatch(
      backend::OpId::matmul, a.device(),
      backend::MatmulArgs{trans_a, trans_b, numel(batch), m, n, ka, ca, cb, a.size(-1), b.size(-1),
                          stride_a, stride_b, out, gemm_workspace(a.device(), a.dtype(), m, n, ka),
                          tf32_for(a.dtype())});
  return out;
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_floating("linear", "x", x);
  check_floating("linear", "weight", weight);
  check_same_device("linear", {&x, &weight, &bias});
  FG_CHECK(x.dim() >= 1 && weight.dim() == 2,
           "[linear] x {} and weight {}: need x (..., in) and weight (out, in)",
           shape_str(x.shape()), shape_str(weight.shape()));
  const int64_t in = x.size(-1), out_features = weight.size(0);
  FG_CHECK(weight.size(1) == in, "[linear] x {} has {} features but weight {} expects {}",
           shape_str(x.shape()), in, shape_str(weight.shape()), weight.size(1));
  FG_CHECK(x.dtype() == weight.dtype(), "[linear] dtypes differ: x {} and weight {}",
           dtype_name(x.dtype()), dtype_name(weight.dtype()));
  if (bias.defined()) {
    FG_CHECK(bias.shape() == Shape{out_features}, "[linear] bias has shape {}, expected ({})",
             shape_str(bias.shape()), out_features);
    FG_CHECK(bias.dtype() == x.dtype(), "[linear] bias is {} but x is {}", dtype_name(bias.dtype()),
             dtype_name(x.dtype()));
  }
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  const int64_t rows = numel(x.shape()) / std::max<int64_t>(in, 1);
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());     // (..., out)
  const Tensor cx = x.contiguous();                                 // (rows, in)
  const Tensor cw = weight.contiguous();                            // (out, in)
  const Tensor cb = bias.defined() ? bias.contiguous() : Tensor();  // (out)
  backend::dispatch(
      backend::OpId::linear, x.device(),
      backend::LinearArgs{rows, in, out_features, cx, cw, cb, out,
                          gemm_workspace(x.device(), x.dtype(), rows, out_features, in),
                          tf32_for(x.dtype())});
  return out;
}

}  // namespace fitgrad::ops
