// Shared front-end checks (see op_util.h).
#include "tensor/ops/op_util.h"

#include "tensor/memory/scope.h"

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

Tensor kernel_operand(const Tensor& t, bool native) {
  if (!t.defined() || native) return t.defined() ? t.contiguous() : t;
  if (t.dtype() == DType::f32 && t.is_contiguous()) return t;
  CategoryScope category(Category::temporary);  // Note [Staging is temporary]
  return t.to(DType::f32).contiguous();
}

Tensor kernel_result(const Shape& shape, Device device, DType dtype, bool native) {
  if (native || dtype == DType::f32)
    return Tensor::empty(shape, native ? dtype : DType::f32, device);
  CategoryScope category(Category::temporary);  // Note [Staging is temporary]
  return Tensor::empty(shape, DType::f32, device);
}

Tensor f32_workspace(int64_t floats, Device device) {
  if (floats == 0) return Tensor();
  CategoryScope category(Category::temporary);
  return Tensor::empty({floats}, DType::f32, device);
}

Tensor f64_workspace(int64_t doubles, Device device) { return f32_workspace(2 * doubles, device); }

DType promote_floating(DType a, DType b) { return a == b ? a : DType::f32; }

}  // namespace fitgrad::ops
