// Shared front-end checks (see op_util.h).
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {

void check_floating(const char* op, const char* name, const Tensor& t) {
  FG_CHECK(t.defined(), "[{}] {} is undefined", op, name);
  FG_CHECK(is_floating(t.dtype()), "[{}] {} must be f32, f16 or bf16, got {}", op, name,
           dtype_name(t.dtype()));
}

void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (!first) {
      first = t;
      continue;
    }
    FG_CHECK(t->device() == first->device(), "[{}] tensors are on {} and {}", op,
             first->device().str(), t->device().str());
  }
}

void check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected) {
  FG_CHECK(t.shape() == expected, "[{}] {} has shape {}, expected {}", op, name,
           shape_str(t.shape()), shape_str(expected));
}

void check_dim(const char* op, const char* name, const Tensor& t, int64_t ndim) {
  FG_CHECK(t.dim() == ndim, "[{}] {} must be {}-d, got shape {}", op, name, ndim,
           shape_str(t.shape()));
}

Tensor to_f32_contiguous(const Tensor& t) { return t.to(DType::f32).contiguous(); }

}  // namespace fitgrad::ops
