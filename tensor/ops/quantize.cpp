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

namespace {

// Checks q's tensors against its shape and options.
void check_four_bit(const char* op, const FourBit& q) {
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
}

// The absmaxes a kernel reads: q's own, or a temporary it dequantizes the nested codes into.
Tensor absmax_for_kernel(const FourBit& q) {
  if (!q.nested.defined()) return q.absmax;
  const CategoryScope temporary(Category::temporary);
  return Tensor::empty({q.nested.numel()}, DType::f32, q.packed.device());
}

void check_matrix(const char* op, const FourBit& q) {
  FG_CHECK(q.shape.size() == 2, "[{}] the quantized weight must be 2-d, got shape {}", op,
           shape_str(q.shape));
}

}  // namespace

Tensor dequantize_4bit(const FourBit& q, DType dtype) {
  const backend::OpId id = backend::OpId::dequantize_4bit;
  const char* op = backend::op_name(id);
  FG_CHECK(is_floating(dtype), "[{}] dtype must be f32, f16 or bf16, got {}", op,
           dtype_name(dtype));
  check_four_bit(op, q);
  Tensor out = Tensor::empty(q.shape, dtype, q.packed.device());
  if (q.numel() == 0) return out;
  const Tensor absmax = absmax_for_kernel(q);
  backend::dispatch(id, out.device(),
                    backend::FourBitArgs{q.numel(), q.options.blocksize,
                                         q.options.type == quant::FourBitType::fp4, out, q.packed,
                                         absmax, q.nested, q.absmax2, q.offset});
  return out;
}

Tensor embedding_4bit(const FourBit& q, const Tensor& ids, DType dtype) {
  const backend::OpId id = backend::OpId::embedding_4bit;
  const char* op = backend::op_name(id);
  FG_CHECK(is_floating(dtype), "[{}] dtype must be f32, f16 or bf16, got {}", op,
           dtype_name(dtype));
  check_four_bit(op, q);
  check_matrix(op, q);
  FG_CHECK(ids.defined() && (ids.dtype() == DType::i32 || ids.dtype() == DType::i64),
           "[{}] ids must be i32 or i64", op);
  check_same_device(op, {&q.packed, &ids});
  Shape out_shape = ids.shape();
  out_shape.push_back(q.shape[1]);
  Tensor out = Tensor::empty(out_shape, dtype, ids.device());  // (ids..., C)
  if (out.numel() == 0) return out;
  const Tensor idc = ids.contiguous();
  const Tensor absmax = absmax_for_kernel(q);
  backend::dispatch(
      id, out.device(),
      backend::FourBitReadArgs{q.shape[0], q.shape[1], q.options.blocksize,
                               q.options.type == quant::FourBitType::fp4, q.packed, absmax,
                               q.nested, q.absmax2, q.offset, idc, out, Tensor()});
  return out;
}

Tensor linear_4bit(const Tensor& x, const FourBit& q) {
  const backend::OpId id = backend::OpId::linear_4bit;
  const char* op = backend::op_name(id);
  check_floating(op, "x", x);
  check_four_bit(op, q);
  check_matrix(op, q);
  check_same_device(op, {&q.packed, &x});
  const int64_t out_f = q.shape[0], in_f = q.shape[1];
  FG_CHECK(x.dim() >= 1 && x.size(-1) == in_f, "[{}] x must be (..., {}), got shape {}", op, in_f,
           shape_str(x.shape()));
  Shape out_shape = x.shape();
  out_shape.back() = out_f;
  const int64_t m = x.numel() / std::max<int64_t>(in_f, 1);
  Tensor y;  // (m, out) f32: the result itself for an f32 x, else a temporary
  {
    std::optional<CategoryScope> temporary;
    if (x.dtype() != DType::f32) temporary.emplace(Category::temporary);
    y = Tensor::empty({m, out_f}, DType::f32, x.device());
  }
  if (y.numel() > 0) {
    const CategoryScope temporary(Category::temporary);
    const Tensor xf = x.to(DType::f32).contiguous().reshape({m, in_f});
    const Tensor staging =
        Tensor::empty({backend::four_bit_matvec_staging(m, in_f)}, DType::f32, x.device());
    // The kernel reads double-quantized absmaxes in place: q.absmax (undefined then) as is.
    backend::dispatch(
        id, x.device(),
        backend::FourBitReadArgs{out_f, in_f, q.options.blocksize,
                                 q.options.type == quant::FourBitType::fp4, q.packed, q.absmax,
                                 q.nested, q.absmax2, q.offset, xf, y, staging});
  }
  return y.to(x.dtype()).reshape(out_shape);
}

}  // namespace fitgrad::ops
