// The CPU strided copy and fill kernels. tensor/ resolves every view to a base address,
// an element offset and per-dim strides (broadcast dims have stride 0) before calling
// here, so these kernels do no shape logic: they walk the index space of `shape` and
// convert each element with tensor/convert.h.
#pragma once

#include <cstdint>

#include "tensor/backend/strided.h"

namespace fitgrad::cpu {

using StridedOperand = backend::StridedOperand;

// dst[i] = convert(src[i]) for every index i of `shape`, in parallel runs (Note [Copies in
// parallel runs] in copy.cpp). dst must not overlap src.
void copy_strided(const Shape& shape, const StridedOperand& dst, const StridedOperand& src);

// dst[i] = convert(value) for every index i of `shape`.
void fill_strided(const Shape& shape, const StridedOperand& dst, double value);

}  // namespace fitgrad::cpu
