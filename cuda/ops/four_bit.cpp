// The cuda table's 4-bit ops, quantize_4bit, dequantize_4bit, embedding_4bit and linear_4bit
// (kernels in cuda/kernels/four_bit.cu), registered at static initialisation (Note [Kernel
// tables]). Each adapter checks its argument struct against the shapes of
// tensor/backend/kernel_args.h, runs the double-quantization step where the CPU's adapter
// does (tensor/cpu/kernels.cpp), and fills the kernels' code tables from tensor/quant, so the
// device reads the CPU's values.
// embedding_4bit checks its ids on the device (Note [Device error flags] in
// cuda/error_flags.h).
#include "tensor/quant/four_bit.h"

#include <algorithm>
#include <cstdint>

#include "cuda/error_flags.h"
#include "cuda/kernels/four_bit_launch.h"
#include "cuda/ops/op_launch.h"
#include "tensor/backend/cuda_four_bit_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/quant/dynamic_map.h"

namespace fitgrad::cuda {
namespace {

using backend::FourBitArgs;
using backend::FourBitReadArgs;

FourBitTables make_tables(quant::FourBitType type) {
  FourBitTables t{};
  const auto& values = quant::four_bit_values(type);
  const auto& thresholds = quant::nf4_thresholds();
  const auto& map = quant::dynamic_map_signed();
  std::copy(values.begin(), values.end(), t.values);
  std::copy(thresholds.begin(), thresholds.end(), t.thresholds);
  std::copy(map.begin(), map.end(), t.map);
  return t;
}
const FourBitTables& tables_of(bool fp4) {
  static const FourBitTables nf4 = make_tables(quant::FourBitType::nf4);
  static const FourBitTables fp4_tables = make_tables(quant::FourBitType::fp4);
  return fp4 ? fp4_tables : nf4;
}

// Throws naming op and operand unless t is a contiguous `dtype` tensor of `numel` elements
// on `device`.
void check_operand(const char* op, const char* name, const Tensor& t, DType dtype, int64_t numel,
                   Device device) {
  FG_CHECK(t.defined() && t.dtype() == dtype && t.numel() == numel && t.is_contiguous() &&
               t.device() == device,
           "[{}] {} must be a contiguous {} tensor of {} elements on {}", op, name,
           dtype_name(dtype), numel, device.str());
}
void check_floating_operand(const char* op, const char* name, const Tensor& t, int64_t numel,
                            Device device) {
  FG_CHECK(t.defined() && is_floating(t.dtype()),
           "[{}] the cuda kernel takes {} in f32, bf16 or f16", op, name);
  check_operand(op, name, t, t.dtype(), numel, device);
}

// The checks shared by every 4-bit op: a blocksize the format allows, the packed codes of
// n values on a cuda device, and the double-quantization state when nested is defined.
// Returns the device.
Device check_state(const char* op, int64_t n, int64_t blocksize, const Tensor& packed,
                   const Tensor& nested, const Tensor& absmax2, const Tensor& offset) {
  quant::check_four_bit_blocksize(blocksize, op);
  FG_CHECK(packed.defined() && packed.device().type == DeviceType::cuda,
           "[{}] the cuda kernel takes packed codes on a cuda device", op);
  const Device d = packed.device();
  check_operand(op, "packed", packed, DType::u8, (n + 1) / 2, d);
  if (nested.defined()) {
    const int64_t blocks = quant::blocks_of(n, blocksize);
    check_operand(op, "nested", nested, DType::u8, blocks, d);
    check_operand(op, "absmax2", absmax2, DType::f32,
                  quant::blocks_of(blocks, quant::kNestedBlocksize), d);
    check_operand(op, "offset", offset, DType::f32, 1, d);
  }
  return d;
}

// absmax (blocks) from the nested codes, on launch's stream.
void dequantize_absmax(const Tensor& nested, const Tensor& absmax2, const Tensor& offset,
                       const Tensor& absmax, const OpLaunch& launch) {
  FG_CUDA_CHECK(launch_dequantize_absmax(nested.data<uint8_t>(), absmax2.data<float>(),
                                         offset.data<float>(), nested.numel(), tables_of(false),
                                         absmax.data<float>(), launch.stream()));
}

void quantize_4bit(const FourBitArgs& a) {
  const char* op = "quantize_4bit";
  const Device d = check_state(op, a.n, a.blocksize, a.packed, a.nested, a.absmax2, a.offset);
  check_floating_operand(op, "a", a.a_or_out, a.n, d);
  check_operand(op, "absmax", a.absmax, DType::f32, quant::blocks_of(a.n, a.blocksize), d);
  if (a.n == 0) return;
  OpLaunch launch(a.packed);
  const FourBitTables& tables = tables_of(a.fp4);
  FG_CUDA_CHECK(launch_quantize_4bit(a.a_or_out.data_ptr(), a.a_or_out.dtype(), a.n, a.blocksize,
                                     a.fp4, tables, a.packed.data<uint8_t>(),
                                     a.absmax.data<float>(), launch.stream()));
  if (a.nested.defined())
    FG_CUDA_CHECK(launch_quantize_absmax(a.absmax.data<float>(), a.absmax.numel(), tables,
                                         a.nested.data<uint8_t>(), a.absmax2.data<float>(),
                                         a.offset.data<float>(), launch.stream()));
}

void dequantize_4bit(const FourBitArgs& a) {
  const char* op = "dequantize_4bit";
  const Device d = check_state(op, a.n, a.blocksize, a.packed, a.nested, a.absmax2, a.offset);
  check_floating_operand(op, "out", a.a_or_out, a.n, d);
  check_operand(op, "absmax", a.absmax, DType::f32, quant::blocks_of(a.n, a.blocksize), d);
  if (a.n == 0) return;
  OpLaunch launch(a.packed);
  if (a.nested.defined()) dequantize_absmax(a.nested, a.absmax2, a.offset, a.absmax, launch);
  FG_CUDA_CHECK(launch_dequantize_4bit(a.packed.data<uint8_t>(), a.absmax.data<float>(), a.n,
                                       a.blocksize, tables_of(a.fp4), a.a_or_out.data_ptr(),
                                       a.a_or_out.dtype(), launch.stream()));
}

void embedding_4bit(const FourBitReadArgs& a) {
  const char* op = "embedding_4bit";
  const int64_t n = a.rows * a.cols;
  const Device d = check_state(op, n, a.blocksize, a.packed, a.nested, a.absmax2, a.offset);
  check_operand(op, "absmax", a.absmax, DType::f32, quant::blocks_of(n, a.blocksize), d);
  const Tensor& ids = a.ids_or_x;
  FG_CHECK(ids.defined() && (ids.dtype() == DType::i32 || ids.dtype() == DType::i64),
           "[{}] ids must be i32 or i64", op);
  check_operand(op, "ids", ids, ids.dtype(), ids.numel(), d);
  check_floating_operand(op, "out", a.out, ids.numel() * a.cols, d);
  if (a.out.numel() == 0) return;
  OpLaunch launch(a.out);
  if (a.nested.defined()) dequantize_absmax(a.nested, a.absmax2, a.offset, a.absmax, launch);
  FG_CUDA_CHECK(launch_embedding_4bit(
      a.packed.data<uint8_t>(), a.absmax.data<float>(), a.rows, a.cols, a.blocksize,
      tables_of(a.fp4), ids.data_ptr(), ids.dtype(), ids.numel(), a.out.data_ptr(), a.out.dtype(),
      error_record(a.out.device().index, DeviceErrorOp::embedding_4bit, a.rows), launch.stream()));
}

// staging is the CPU's scratch (x in the order its nibbles are read); the tiled kernel
// stages its tiles in shared memory and does not read it.
void linear_4bit(const FourBitReadArgs& a) {
  const char* op = "linear_4bit";
  const int64_t n = a.rows * a.cols;
  const Device d = check_state(op, n, a.blocksize, a.packed, a.nested, a.absmax2, a.offset);
  const Tensor& x = a.ids_or_x;
  FG_CHECK(x.defined() && x.dim() == 2 && x.size(1) == a.cols,
           "[{}] x must be (m, {}) for the cuda kernel", op, a.cols);
  const int64_t m = x.size(0);
  check_operand(op, "x", x, DType::f32, m * a.cols, d);
  check_operand(op, "out", a.out, DType::f32, m * a.rows, d);
  FourBitAbsmax absmax;
  if (a.nested.defined()) {
    absmax.nested = a.nested.data<uint8_t>();
    absmax.absmax2 = a.absmax2.data<float>();
    absmax.offset = a.offset.data<float>();
  } else {
    check_operand(op, "absmax", a.absmax, DType::f32, quant::blocks_of(n, a.blocksize), d);
    absmax.absmax = a.absmax.data<float>();
  }
  const backend::CudaGrid2 grid = backend::cuda_linear_4bit_grid(m, a.rows);
  FG_CHECK(grid.y <= backend::kCudaMaxGridY && grid.x <= INT32_MAX,
           "[{}] the cuda kernel takes at most {} weight rows and {} rows of x, got {} and {}", op,
           backend::kCudaMaxGridY * backend::kLinear4bitBN,
           int64_t(INT32_MAX) * backend::kLinear4bitBM, a.rows, m);
  if (a.out.numel() == 0) return;
  OpLaunch launch(a.out);
  FG_CUDA_CHECK(launch_linear_4bit(a.packed.data<uint8_t>(), absmax, a.rows, a.cols, a.blocksize,
                                   tables_of(a.fp4), x.data<float>(), m, a.out.data<float>(),
                                   launch.stream()));
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() {
    using backend::OpId;
    using backend::register_kernel;
    constexpr DeviceType cuda = DeviceType::cuda;
    register_kernel(cuda, OpId::quantize_4bit, quantize_4bit);
    register_kernel(cuda, OpId::dequantize_4bit, dequantize_4bit);
    register_kernel(cuda, OpId::embedding_4bit, embedding_4bit);
    register_kernel(cuda, OpId::linear_4bit, linear_4bit);
  }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
