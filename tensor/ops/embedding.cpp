// Embedding front-ends (see embedding.h): checks, allocation and dispatch to
// tensor/cpu/embedding.h on the id dtype.
//
// Note [Embedding gathers in the storage dtype]
// Note [Op dtypes and devices] stages non-f32 inputs as f32 copies. For the embedding
// forward pass that copy would be the whole (V, C) table, 512 MiB for a 32000 x 4096 bf16
// table, to read B*T rows of it. A gather does no arithmetic, so it copies the rows as bytes
// in the table's dtype instead: the result is exactly what the f32 route would give, and the
// only allocation is the output. The backward pass accumulates, so it does stage in f32.
#include "tensor/ops/embedding.h"

#include "tensor/cpu/embedding.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

void check_ids(const char* op, const Tensor& ids) {
  FG_CHECK(ids.defined(), "[{}] ids is undefined", op);
  FG_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::i64,
           "[{}] ids must be i32 or i64, got {}", op, dtype_name(ids.dtype()));
}

// Calls fn(ptr) with ptr the typed data of contiguous `ids`.
template <class Fn>
void with_ids(const Tensor& ids, Fn&& fn) {
  if (ids.dtype() == DType::i32)
    fn(ids.data<int32_t>());
  else
    fn(ids.data<int64_t>());
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  const char* op = "embedding";
  check_floating(op, "weight", weight);
  check_dim(op, "weight", weight, 2);
  check_ids(op, ids);
  check_same_device(op, {&weight, &ids});
  const int64_t V = weight.size(0), C = weight.size(1);
  Shape out_shape = ids.shape();
  out_shape.push_back(C);
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());  // (ids..., C)
  if (run_kernel(op, weight.device())) {
    const Tensor w = weight.contiguous();  // (V, C)
    const Tensor id = ids.contiguous();    // (n)
    with_ids(id, [&](const auto* p) {
      cpu::embedding_gather(w.data_ptr(), p, out.data_ptr(), id.numel(), V,
                            size_t(C) * element_size(w.dtype()));
    });
  }
  return out;
}

Tensor embedding_backward(const Tensor& dy, const Tensor& ids, int64_t num_embeddings) {
  const char* op = "embedding_backward";
  check_floating(op, "dy", dy);
  check_ids(op, ids);
  check_same_device(op, {&dy, &ids});
  FG_CHECK(num_embeddings > 0, "[{}] num_embeddings = {} must be positive", op, num_embeddings);
  FG_CHECK(
      dy.dim() == ids.dim() + 1 && Shape(dy.shape().begin(), dy.shape().end() - 1) == ids.shape(),
      "[{}] dy has shape {}, expected ids' shape {} plus a last dim C", op, shape_str(dy.shape()),
      shape_str(ids.shape()));
  const int64_t C = dy.size(-1);
  const Tensor dyf = to_f32_contiguous(dy);                                 // (n, C)
  Tensor dw = Tensor::empty({num_embeddings, C}, DType::f32, dy.device());  // (V, C)
  if (run_kernel(op, dy.device())) {
    const Tensor id = ids.contiguous();  // (n)
    with_ids(id, [&](const auto* p) {
      cpu::embedding_scatter_add_f32(dyf.data<float>(), p, dw.data<float>(), id.numel(),
                                     num_embeddings, C);
    });
  }
  return cast_to(dw, dy.dtype());
}

}  // namespace fitgrad::ops
