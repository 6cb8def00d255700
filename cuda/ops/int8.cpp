// The cuda table's int8 group-quantization ops, quantize_int8 and dequantize_int8 (kernels in
// cuda/kernels/int8.cu), registered at static initialisation (Note [Kernel tables]). Each
// adapter checks its argument struct against the shapes of tensor/backend/kernel_args.h.
#include "tensor/quant/int8.h"

#include <cstdint>

#include "cuda/kernels/int8_launch.h"
#include "cuda/ops/op_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"

namespace fitgrad::cuda {
namespace {

using backend::Int8Args;

// Checks the codes, scales and zeros of a on a cuda device, and its floating operand.
void check_args(const char* op, const Int8Args& a) {
  quant::check_int8_group_size(a.n, a.group_size, op);
  FG_CHECK(a.codes.defined() && a.codes.device().type == DeviceType::cuda,
           "[{}] the cuda kernel takes codes on a cuda device", op);
  const Device d = a.codes.device();
  const int64_t groups = a.n / a.group_size;
  auto check = [&](const char* name, const Tensor& t, bool floating, DType dtype, int64_t numel) {
    FG_CHECK(t.defined() && (floating ? is_floating(t.dtype()) : t.dtype() == dtype) &&
                 t.numel() == numel && t.is_contiguous() && t.device() == d,
             "[{}] {} must be a contiguous {} tensor of {} elements on {}", op, name,
             floating ? "floating" : dtype_name(dtype), numel, d.str());
  };
  check("codes", a.codes, false, DType::u8, a.n);
  check("scales", a.scales, false, DType::f32, groups);
  check("zeros", a.zeros, false, DType::u8, groups);
  check("a_or_out", a.a_or_out, true, DType::f32, a.n);
}

void quantize_int8(const Int8Args& a) {
  check_args("quantize_int8", a);
  if (a.n == 0) return;
  OpLaunch launch(a.codes);
  FG_CUDA_CHECK(launch_quantize_int8(a.a_or_out.data_ptr(), a.a_or_out.dtype(), a.n, a.group_size,
                                     a.codes.data<uint8_t>(), a.scales.data<float>(),
                                     a.zeros.data<uint8_t>(), a.sr.enabled, a.sr.seed, a.sr.offset,
                                     launch.stream()));
}

void dequantize_int8(const Int8Args& a) {
  check_args("dequantize_int8", a);
  if (a.n == 0) return;
  OpLaunch launch(a.codes);
  FG_CUDA_CHECK(launch_dequantize_int8(a.codes.data<uint8_t>(), a.scales.data<float>(),
                                       a.zeros.data<uint8_t>(), a.n, a.group_size,
                                       a.a_or_out.data_ptr(), a.a_or_out.dtype(), launch.stream()));
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() {
    using backend::OpId;
    using backend::register_kernel;
    constexpr DeviceType cuda = DeviceType::cuda;
    register_kernel(cuda, OpId::quantize_int8, quantize_int8);
    register_kernel(cuda, OpId::dequantize_int8, dequantize_int8);
  }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
