// Embedding front-ends (see embedding.h): checks, allocation and dispatch through the
// kernel table (the CPU kernel switches on the id dtype).
//
// Note [Embedding gathers in the storage dtype]
// Note [Op dtypes and devices] stages non-f32 inputs as f32 copies. For the embedding
// forward pass that copy would be the whole (V, C) table, 512 MiB for a 32000 x 4096 bf16
// table, to read B*T rows of it. A gather does no arithmetic, so it copies the rows as bytes
// in the table's dtype instead: the result is exactly what the f32 route would give, and the
// only allocation is the output. The backward pass accumulates: f32 sums into dw directly;
// bf16/f16 sort the (id, position) pairs into an (n, 2) i64 temporary and round each sum
// once (Note [Low-precision embedding backward] in tensor/cpu/embedding.cpp), so no f32
// copy of dy or of the table exists.
#include "tensor/ops/embedding.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/profile.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

void check_ids(const char* op, const Tensor& ids) {
  FG_CHECK(ids.defined(), "[{}] ids is undefined", op);
  FG_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64,
           "[{}] ids must be i32 or i64, got {}", op, dtype_name(ids.dtype()));
}

// Calls fn(ptr) with ptr the typed data of contiguous `ids`.
}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const backend::OpId id = backend::OpId::embedding;
  const char* op = backend::op_name(id);
  check_floating(op, "weight", weight);
  check_dim(op, "weight", weight, 2);
  check_ids(op, ids);
  check_same_device(op, {&weight, &ids});
  const int64_t V = weight.size(0), C = weight.size(1);
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());  // (ids..., C)
  const Tensor w = weight.contiguous();                                    // (V, C)
  const Tensor idc = ids.contiguous();                                     // (n)
  backend::dispatch(id, weight.device(), backend::EmbeddingArgs{idc.numel(), V, C, w, idc, out});
  return out;
}

Tensor embedding_backward(const Tensor& dy, const Tensor& ids, int64_t num_embeddings) {
  const backend::OpId id = backend::OpId::embedding_backward;
  const char* op = backend::op_name(id);
  check_floating(op, "dy", dy);
  check_ids(op, ids);
  check_same_device(op, {&dy, &ids});
  FG_CHECK(num_embeddings > 0, "[{}] num_embeddings = {} must be positive", op, num_embeddings);
  FG_CHECK(
      dy.dim() == ids.dim() + 1 && Shape(dy.shape().begin(), dy.shape().end() - 1) == ids.shape(),
      "[{}] dy has shape {}, expected ids' shape {} plus a last dim C", op, shape_str(dy.shape()),
      shape_str(ids.shape()));
  const int64_t C = dy.size(-1);
  const Tensor dyc = dy.contiguous();                                       // (n, C)
  Tensor dw = Tensor::empty({num_embeddings, C}, dy.dtype(), dy.device());  // (V, C)
  const Tensor idc = ids.contiguous();                                      // (n)
  Tensor pairs;
  if (backend::embedding_backward_pairs(backend::profile_for(dy.device()), dy.dtype())) {
    CategoryScope category(Category::temporary);
    pairs = Tensor::empty({idc.numel(), 2}, DType::i64, dy.device());
  }
  backend::dispatch(
      id, dy.device(),
      backend::EmbeddingBackwardArgs{idc.numel(), num_embeddings, C, dyc, idc, dw, pairs});
  return dw;
}

}  // namespace fitgrad::ops
