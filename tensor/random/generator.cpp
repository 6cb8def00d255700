// Generator state handling and its uniform fill (see generator.h).
#include "tensor/random/generator.h"

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"

namespace fitgrad {

RngState Generator::state() const {
  std::lock_guard lock(mutex_);
  return state_;
}

void Generator::set_state(const RngState& state) {
  std::lock_guard lock(mutex_);
  state_ = state;
}

RngState Generator::reserve(uint64_t n) {
  std::lock_guard lock(mutex_);
  const RngState start = state_;
  state_.offset += n;
  return start;
}

Tensor Generator::uniform(const Shape& shape, double lo, double hi, DType dtype, Device device) {
  FG_CHECK(is_floating(dtype), "[uniform] dtype must be f32, f16 or bf16, got {}",
           dtype_name(dtype));
  FG_CHECK(lo <= hi, "[uniform] lo = {} is greater than hi = {}", lo, hi);
  Tensor out = Tensor::empty(shape, dtype, device);
  const RngState start = reserve(uint64_t(out.numel()));
  backend::dispatch(backend::OpId::uniform, device,
                    backend::UniformArgs{out.numel(), start, float(lo), float(hi - lo), out});
  return out;
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

}  // namespace fitgrad
