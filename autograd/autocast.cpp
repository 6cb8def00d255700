// Autocast state and casts (autocast.h, Note [Autocast]).
#include "autograd/autocast.h"

#include "autograd/functions.h"
#include "tensor/error.h"

namespace fitgrad::autograd {
namespace {
thread_local DType t_autocast = DType::f32;
}  // namespace

DType autocast_dtype() { return t_autocast; }

AutocastGuard::AutocastGuard(DType dtype) : saved_(t_autocast) {
  FG_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
           "[autocast] compute dtype must be bf16, f16 or f32 (off), got {}", dtype_name(dtype));
  t_autocast = dtype;
}

AutocastGuard::~AutocastGuard() { t_autocast = saved_; }

Tensor autocast_input(const Tensor& x) {
  const DType dt = t_autocast;
  if (dt == DType::f32 || !x.defined() || !is_floating(x.dtype()) || x.dtype() == dt) return x;
  return cast(x, dt);
}

}  // namespace fitgrad::autograd
