// 4-bit quantization front-ends (see quantize.h).
#include "tensor/ops/quantize.h"

#include <optional>

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {

int64_t FourBit::nbytes() const {
  int64_t n = 0;
  for (const Tensor* t : {&packed, &absmax, &nested, &absmax2, &offset})
    if (t->defined()) n += t->nbytes();
  return n;
}

FourBit quantize_4bit(const Tensor& a, const FourBitOptions& options) {
  const backend::OpId id = backend::OpId::quantize_4bit;
  const char* op = backend::op_name(id);
  check_floating(op, "a", a);
  FG_CHECK(a.is_contiguous(), "[{}] a of shape {} must be contiguous", op, shape_str(a.shape()));
  quant::check_four_bit_blocksize(options.blocksize, op);
  FourBit q;
  q.options = options;
  q.shape = a.shape();
  const int64_t n = a.numel(), blocks = quant::blocks_of(n, options.blocksize);
  const Device d = a.device();
  q.packed = Tensor::empty({(n + 1) / 2}, DType::u8, d);
  Tensor absmax;
  {
    std::optional<CategoryScope> temporary;  // replaced by its double quantization
    if (options.double_quant) temporary.emplace(Category::temporary);
    absmax = Tensor::empty({blocks}, DType::f32, d);
  }
  if (options.double_quant) {
    q.nested = Tensor::empty({blocks}, DType::u8, d);
    q.absmax2 = Tensor::empty({quant::blocks_of(blocks, quant::kNestedBlocksize)}, DType::f32, d);
    q.offset = Tensor::empty({1}, DType::f32, d);
  } else {
    q.absmax = absmax;
  }
  if (n == 0) return q;
  backend::dispatch(
      id, d,
      backend::FourBitArgs{n, options.blocksize, options.type == quant::FourBitType::fp4, a,
                           q.packed, absmax, q.nested, q.absmax2, q.offset});
  return q;
}

Tensor dequantize_4bit(const FourBit& q, DType dtype) {
  const backend::OpId id = backend::OpId::dequantize_4bit;
  const char* op = backend::op_name(id);
  FG_CHECK(is_floating(dtype), "[{}] dtype must be f32, f16 or bf16, got {}", op,
           dtype_name(dtype));
  FG_CHECK(q.packed.defined() && q.packed.dtype() == DType::u8 &&
               q.packed.numel() == (q.numel() + 1) / 2,
           "[{}] packed must be u8 of {} bytes for shape {}", op, (q.numel() + 1) / 2,
           shape_str(q.shape));
  const int64_t blocks = quant::blocks_of(q.numel(), q.options.blocksize);
  if (q.nested.defined())
    FG_CHECK(q.nested.numel() == blocks && q.absmax2.defined() && q.offset.defined(),
             "[{}] double quantization needs {} nested codes, absmax2 and offset", op, blocks);
  else
    FG_CHECK(q.absmax.defined() && q.absmax.dtype() == DType::f32 && q.absmax.numel() == blocks,
             "[{}] absmax must be f32 of {} blocks", op, blocks);
  Tensor out = Tensor::empty(q.shape, dtype, q.packed.device());
  if (q.numel() == 0) return out;
  Tensor absmax = q.absmax;
  if (q.nested.defined()) {  // the dequantized absmaxes: a temporary
    const CategoryScope temporary(Category::temporary);
    absmax = Tensor::empty({blocks}, DType::f32, out.device());
  }
  backend::dispatch(id, out.device(),
                    backend::FourBitArgs{q.numel(), q.options.blocksize,
                                         q.options.type == quant::FourBitType::fp4, out, q.packed,
                                         absmax, q.nested, q.absmax2, q.offset});
  return out;
}

}  // namespace fitgrad::ops
