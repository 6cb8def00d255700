// One operand of a strided kernel (copy, fill, the elementwise ops): tensor/ resolves every
// view to a base address, an element offset and per-dim strides (broadcast dims have
// stride 0) before dispatch, so no backend does shape logic.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace fitgrad::backend {

struct StridedOperand {
  void* data = nullptr;  // storage base address (meta: a virtual one, never read)
  int64_t offset = 0;    // element 0, in elements from `data`
  Strides strides;       // in elements, one per dim of the shape
  DType dtype = DType::f32;
};

}  // namespace fitgrad::backend
