// matmul and linear front-ends: shape checks, batch broadcasting, f32 staging, and the GEMM
// dispatch through the kernel table.
//
// Note [Native bf16 products]
// When both operands (and a linear's bias) are bf16 and the device's target profile has a
// bf16 GEMM (backend::TargetProfile::bf16_gemm; tensor/cpu/gemm_bf16.h), the operands go to
// the kernel as they are and the result is written in bf16 directly: no f32 copy of an input
// or of the output exists. Otherwise (f16, mixed, or no bf16 GEMM) every operand is staged
// into an f32 temporary and the f32 result cast back, as Note [Op dtypes and devices] says.
#include "tensor/ops/matmul.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/profile.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {

namespace {

// True when the product of these operands runs on the bf16 GEMM (Note [Native bf16 products]).
bool native_bf16(Device device, std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands)
    if (t->defined() && t->dtype() != DType::bf16) return false;
  return backend::profile_for(device).bf16_gemm;
}

// Note [Batch strides for broadcast matmul]
// gemm_f32_batched walks one batch index with one stride per operand. An operand whose
// batch dims all have size 1 gets stride 0 (one matrix broadcast over the batch); one whose
// batch shape equals the result's gets its matrix size as stride. Any other broadcast
// (say (2,1) against (1,3)) is materialised with expand + contiguous first.
Tensor batched_operand(const Tensor& t, const Shape& batch, int64_t& stride, bool native) {
  const Shape mat(t.shape().end() - 2, t.shape().end());
  const Shape own_batch(t.shape().begin(), t.shape().end() - 2);
  Tensor c = kernel_operand(t, native);
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
  const bool native = native_bf16(a.device(), {&a, &b});
  Tensor out = kernel_result(out_shape, a.device(), a.dtype(), native);
  // Note [One GEMM for a shared right operand]
  // x (B, T, C) @ W (C, N), as a Conv1D layer runs it, is one (B T, C) @ (C, N) product:
  // A's matrices lie one after another, so with B shared they fold into the rows of a
  // single GEMM. One large GEMM keeps both threads busy where B small ones of T rows
  // each would not, and every output element is the same k-long dot product either way.
  if (!trans_a && numel(batch) > 1 && b.dim() == 2) {
    const Tensor ca = kernel_operand(a, native);
    const Tensor cb = kernel_operand(b, native);
    backend::dispatch(backend::OpId::matmul, a.device(),
                      backend::MatmulArgs{false, trans_b, 1, numel(batch) * m, n, ka, ca, cb, ka,
                                          b.size(-1), 0, 0, out});
    return cast_to(out, a.dtype());
  }
  int64_t stride_a = 0, stride_b = 0;
  const Tensor ca = batched_operand(a, batch, stride_a, native);
  const Tensor cb = batched_operand(b, batch, stride_b, native);
  backend::dispatch(backend::OpId::matmul, a.device(),
                    backend::MatmulArgs{trans_a, trans_b, numel(batch), m, n, ka, ca, cb,
                                        a.size(-1), b.size(-1), stride_a, stride_b, out});
  return cast_to(out, a.dtype());
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
  const bool native = native_bf16(x.device(), {&x, &weight, &bias});
  Tensor out = kernel_result(out_shape, x.device(), x.dtype(), native);  // (..., out)
  const Tensor cx = kernel_operand(x, native);                           // (rows, in)
  const Tensor cw = kernel_operand(weight, native);                      // (out, in)
  const Tensor cb = kernel_operand(bias, native);                        // (out)
  backend::dispatch(backend::OpId::linear, x.device(),
                    backend::LinearArgs{rows, in, out_features, cx, cw, cb, out});
  return cast_to(out, x.dtype());
}

}  // namespace fitgrad::ops
