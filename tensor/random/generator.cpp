// Generator state handling and its uniform fill (see generator.h).
#include "tensor/random/generator.h"

#include "tensor/ops/op_util.h"
#include "tensor/random/philox.h"

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
  Tensor out = Tensor::empty(shape, DType::f32, device);
  const RngState start = reserve(uint64_t(out.numel()));
  if (ops::run_kernel("uniform", device)) {
    float* data = out.data<float>();
    const float base = float(lo);
    const float width = float(hi - lo);
    philox_for_each_uniform(start.seed, start.offset, out.numel(),
                            [&](int64_t i, float u) { data[i] = base + width * u; });
  }
  return ops::cast_to(out, dtype);
}

Generator& default_generator() {
  static Generator generator;
  return generator;
}

}  // namespace fitgrad
