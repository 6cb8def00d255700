// The thread's autocast mode (autocast.h, Note [Autocast]).
#include "autograd/autocast.h"

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

}  // namespace fitgrad::autograd
