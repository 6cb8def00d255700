// Int8 group quantization front-ends (see quantize_int8.h).
#include "tensor/ops/quantize_int8.h"

#include "tensor/backend/kernel_table.h"
#include "tensor/ops/op_util.h"
#include "tensor/quant/int8.h"

namespace fitgrad::ops {
namespace {

// Checks q's tensors against each other.
void check_int8(const char* op, const Int8& q) {
  FG_CHECK(q.codes.defined() && q.codes.dtype() == DType::u8 && q.codes.is_contiguous(),
           "[{}] codes must be contiguous u8", op);
  quant::check_int8_group_size(q.numel(), q.group_size, op);
  const int64_t groups = q.numel() / q.group_size;
  FG_CHECK(q.scales.defined() && q.scales.dtype() == DType::f32 && q.scales.numel() == groups &&
               q.zeros.defined() && q.zeros.dtype() == DType::u8 && q.zeros.numel() == groups,
           "[{}] scales must be f32 and zeros u8, {} each", op, groups);
  FG_CHECK(q.scales.device() == q.codes.device() && q.zeros.device() == q.codes.device(),
           "[{}] codes, scales and zeros must be on one device", op);
}

}  // namespace

Int8 empty_int8(const Shape& shape, int64_t group_size, Device device) {
  const int64_t n = fitgrad::numel(shape);
  quant::check_int8_group_size(n, group_size, "quantize_int8");
  Int8 q;
  q.group_size = group_size;
  q.codes = Tensor::empty(shape, DType::u8, device);
  q.scales = Tensor::empty({n / group_size}, DType::f32, device);
  q.zeros = Tensor::empty({n / group_size}, DType::u8, device);
  return q;
}

Int8 quantize_int8(const Tensor& a, int64_t group_size) {
  check_floating(backend::op_name(backend::OpId::quantize_int8), "a", a);
  Int8 q = empty_int8(a.shape(), group_size, a.device());
  requantize_int8_(q, a, {});
  return q;
}

void requantize_int8_(Int8& q, const Tensor& a, const backend::StochasticRounding& sr) {
  const backend::OpId id = backend::OpId::quantize_int8;
  const char* op = backend::op_name(id);
  check_floating(op, "a", a);
  check_int8(op, q);
  FG_CHECK(a.is_contiguous() && a.shape() == q.shape() && a.device() == q.codes.device(),
           "[{}] a of shape {} on {} must be contiguous, of shape {} on {}", op,
           shape_str(a.shape()), a.device().str(), shape_str(q.shape()), q.codes.device().str());
  if (q.numel() == 0) return;
  backend::dispatch(id, a.device(),
                    backend::Int8Args{q.numel(), q.group_size, a, q.codes, q.scales, q.zeros, sr});
}

Tensor dequantize_int8(const Int8& q, DType dtype) {
  const backend::OpId id = backend::OpId::dequantize_int8;
  const char* op = backend::op_name(id);
  check_int8(op, q);
  FG_CHECK(is_floating(dtype), "[{}] the output dtype must be floating, got {}", op,
           dtype_name(dtype));
  Tensor out = Tensor::empty(q.shape(), dtype, q.codes.device());
  if (q.numel() == 0) return out;
  backend::dispatch(
      id, out.device(),
      backend::Int8Args{q.numel(), q.group_size, out, q.codes, q.scales, q.zeros, {}});
  return out;
}

}  // namespace fitgrad::ops
